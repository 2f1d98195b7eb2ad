"""The client's discovery against a loopback API server: the whole of ``/apis`` in one request
(aggregated discovery, asked as kubectl asks), a group/version at a time from a server that
answers legacy documents only, and again after the cache is dropped."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from placer.errors import NotFoundError
from placer.kube import ClientSettings, KubeClient, load_kubeconfigs, open_client
from placer.testing import ApiServer

KINDS = (
    ("jobset.x-k8s.io/v1alpha2", "JobSet"),
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
    ("kubeflow.org/v1", "PyTorchJob"),
    ("ray.io/v1", "RayCluster"),
)


@pytest.fixture
def server(start_apiserver: Callable[..., ApiServer]) -> ApiServer:
    server = start_apiserver("m1")
    for api_version, kind in KINDS:
        group, _, version = api_version.partition("/")
        server.store.register_resource(group, version, kind, short_names=[kind[:3].lower()])
    return server


def _client(server: ApiServer, kubeconfig: Path, *, light: bool = True) -> KubeClient:
    settings = ClientSettings(light_transport=light)
    return open_client(load_kubeconfigs([kubeconfig]), server.name, settings=settings)


def _discovery(server: ApiServer) -> list[str]:
    """The paths of the discovery requests the server had (not lists, not gets of objects)."""
    return [r.path for r in server.requests if r.resource is None]


@pytest.mark.parametrize("light", [True, False], ids=["light", "official"])
def test_one_request_discovers_every_group(
    server: ApiServer, kubeconfig_for: Callable[..., Path], light: bool
) -> None:
    """Four kinds of four groups listed: one discovery request (``/apis``, aggregated), where
    the legacy documents took one per group/version; the refs are those of the
    group/version's own document (plural, scope, subresources, short names)."""
    server.clear_requests()
    with _client(server, kubeconfig_for(server), light=light) as client:
        for api_version, kind in KINDS:
            assert client.list(api_version, kind).items == []
        assert _discovery(server) == ["/apis"]
        ref = client.resource("jobset.x-k8s.io/v1alpha2", "JobSet")
        assert (ref.plural, ref.namespaced, ref.subresources) == ("jobsets", True, {"status"})
        assert ref.aliases == ("jobset", "job")
        legacy = client.served_kinds("jobset.x-k8s.io/v1alpha2")["JobSet"]  # (its own document)
        assert (legacy, legacy.aliases) == (ref, ref.aliases)


def test_a_kind_installed_later_is_found_and_forgetting_reads_the_whole_again(
    server: ApiServer, kubeconfig_for: Callable[..., Path]
) -> None:
    with _client(server, kubeconfig_for(server)) as client:
        client.resource(*KINDS[0])
        with pytest.raises(NotFoundError):
            client.resource("example.com/v1", "Widget")
        server.store.register_resource("example.com", "v1", "Widget")  # a CRD installed now
        server.clear_requests()
        assert client.resource("example.com/v1", "Widget").plural == "widgets"
        assert _discovery(server) == ["/apis/example.com/v1"]  # that group/version alone
        client.forget_discovery()
        server.clear_requests()
        client.resource(*KINDS[1])
        client.resource(*KINDS[2])
        assert _discovery(server) == ["/apis"]


def test_a_server_without_aggregated_discovery_is_asked_a_group_version_at_a_time(
    server: ApiServer, kubeconfig_for: Callable[..., Path]
) -> None:
    """``/apis`` answers 404 (as a server too old or a proxy that strips it might): the
    client asks each group/version, and does not ask ``/apis`` again."""
    server.faults.fail(404, times=1)  # (the first request: /apis)
    server.clear_requests()
    with _client(server, kubeconfig_for(server)) as client:
        for api_version, kind in KINDS:
            assert client.resource(api_version, kind).kind == kind
        assert _discovery(server) == ["/apis", *(f"/apis/{v}" for v, _ in KINDS)]
