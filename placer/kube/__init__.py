"""The one Kubernetes I/O layer of placer: kubeconfigs, clients, requests, errors, watches.

Everything that talks to an API server goes through this package (capacity gathering, dispatch,
the placement controller). Layout, by concept:

* :mod:`~placer.kube.kubeconfig` — find and merge kubeconfig files, list contexts, redact
  credentials (:func:`load_kubeconfigs`, :class:`KubeconfigSet`, :class:`ContextInfo`);
* :mod:`~placer.kube.client` — one :class:`KubeClient` per context (:func:`open_client`): any
  kind by apiVersion/kind, raw JSON dicts, paginated lists, every write verb;
* :mod:`~placer.kube.requests` — pure request building (:class:`Request`, :class:`PatchType`);
* :mod:`~placer.kube.resources` — :class:`ResourceRef` and discovery parsing;
* :mod:`~placer.kube.translate` — API answers and transport failures to
  :class:`placer.errors.KubeError` subclasses;
* :mod:`~placer.kube.owners` — owner scoping (Workload Map spec 7.2): whether an object
  belongs to a workload, by its owner chain (:class:`OwnerWalker`);
* :mod:`~placer.kube.watching` — the list → watch → re-list loop (:class:`Watcher`);
* :mod:`~placer.kube.settings` — :class:`ClientSettings`, :class:`WatchSettings`.
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

__all__ = [
    "ROLE_EXTENSION",
    "ROLE_HUB",
    "ClientSettings",
    "ContextInfo",
    "KubeClient",
    "KubeconfigSet",
    "Listed",
    "ObjectList",
    "OwnerWalker",
    "PatchType",
    "Request",
    "ResourceRef",
    "WatchEvent",
    "WatchSettings",
    "WatchState",
    "Watcher",
    "error_from_exception",
    "error_from_status",
    "load_kubeconfigs",
    "open_client",
    "split_api_version",
]

if TYPE_CHECKING:
    from placer.kube.client import KubeClient, ObjectList, open_client
    from placer.kube.kubeconfig import (
        ROLE_EXTENSION,
        ROLE_HUB,
        ContextInfo,
        KubeconfigSet,
        load_kubeconfigs,
    )
    from placer.kube.owners import OwnerWalker
    from placer.kube.requests import PatchType, Request
    from placer.kube.resources import ResourceRef, split_api_version
    from placer.kube.settings import ClientSettings, WatchSettings
    from placer.kube.translate import error_from_exception, error_from_status
    from placer.kube.watching import Listed, Watcher, WatchEvent, WatchState
else:
    # the client (urllib3, the official client) only for the commands that talk to clusters
    __getattr__ = lazy_exports(
        __name__,
        __all__,
        (
            "placer.kube.kubeconfig",
            "placer.kube.requests",
            "placer.kube.resources",
            "placer.kube.settings",
            "placer.kube.translate",
            "placer.kube.client",
            "placer.kube.owners",
            "placer.kube.watching",  # last: only the controller's informers need it
        ),
    )
