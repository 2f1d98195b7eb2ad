"""Loopback Kubernetes API servers for tests, benchmarks and the virtual fleet.

``placer.testing`` gives placer's integration tests (and users testing their own setups) real
Kubernetes API servers without a cluster: HTTPS on 127.0.0.1 with a throwaway CA and a bearer
token, the real REST protocol, reached through real kubeconfig files by the real ``kubernetes``
client or kubectl. A server starts in a few milliseconds and answers a GET in about half a
millisecond (``python -m placer.testing bench`` measures it).

Quick start::

    from kubernetes import client, config
    from placer.testing import ApiServer, write_kubeconfig

    with ApiServer() as east, ApiServer() as west:
        east.store.seed([{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}])
        path = write_kubeconfig("/tmp/kubeconfig", {"east": east, "west": west})
        with config.new_client_from_config(str(path), context="east") as api:
            print([n.metadata.name for n in client.CoreV1Api(api).list_node().items])

What a server speaks: discovery; list/get/create/replace/patch (merge, JSON, strategic for
built-ins, server-side apply)/delete/deletecollection for built-in kinds and any custom resource
(registered with :meth:`Store.register_resource` or by creating a CustomResourceDefinition);
label and field selectors; ``limit``/``continue`` pagination over consistent snapshots; watch
with resourceVersion replay, bookmarks and 410 Expired; the status subresource and generation
rules; ``dryRun=All``; finalizers; owner-reference garbage collection; namespace lifecycle; real
``Status`` errors. The module docstrings of ``_store``, ``_patch``, ``_validation`` and
``_http`` say precisely what is and is not modelled.

Hooks for tests: :attr:`ApiServer.store` (in-process API, fast ``seed``),
:attr:`ApiServer.faults` (latency, slow requests, error Statuses, dropped connections, requests
held until the test lets them through),
:meth:`ApiServer.stop`/:meth:`ApiServer.start` (unreachable cluster, same port), admission
callbacks and reactors on the store, :attr:`ApiServer.requests` (what clients sent), and
:class:`ApiServerProcess` for a server in its own process (benchmarks that must not share a GIL
with the client).
"""

from placer.testing._faults import FaultRule, Faults, Gate, RequestRecord
from placer.testing._kubeconfig import Endpoint, kubeconfig_dict, write_kubeconfig
from placer.testing._process import ApiServerProcess, load_objects
from placer.testing._resources import BUILTIN_RESOURCES, ResourceType
from placer.testing._server import ApiServer
from placer.testing._status import StatusError
from placer.testing._store import AdmissionRequest, Store, WriteEvent
from placer.testing._synthetic import synthetic_cluster

__all__ = [
    "BUILTIN_RESOURCES",
    "AdmissionRequest",
    "ApiServer",
    "ApiServerProcess",
    "Endpoint",
    "FaultRule",
    "Faults",
    "Gate",
    "RequestRecord",
    "ResourceType",
    "StatusError",
    "Store",
    "WriteEvent",
    "kubeconfig_dict",
    "load_objects",
    "synthetic_cluster",
    "write_kubeconfig",
]
