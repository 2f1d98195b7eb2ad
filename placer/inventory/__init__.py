"""What runs where across the fleet: listing and describing workloads live on the members.

Read-only, through :mod:`placer.kube`; used by ``placer get`` and ``placer describe TYPE/NAME``
(owner scoping, spec 7.2, is :class:`placer.kube.OwnerWalker`).

* :mod:`~placer.inventory.pods` — pods to components (spec 7.1, 7.3): :func:`attribute_pods`;
* :mod:`~placer.inventory.listing` — every workload of the catalog's kinds on every cluster
  (:func:`list_workloads`, :func:`find_workload`);
* :mod:`~placer.inventory.describe` — the live describe tree (:func:`live_view`).
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

__all__ = [
    "Inventory",
    "LiveView",
    "LiveWorkload",
    "UnknownTypeError",
    "WorkloadNotFoundError",
    "age",
    "attribute_pods",
    "components_text",
    "find_workload",
    "list_workloads",
    "live_json",
    "live_view",
    "render_live",
    "resolve_type",
    "resolve_type_on",
]

if TYPE_CHECKING:
    from placer.inventory.describe import LiveView, live_json, live_view, render_live
    from placer.inventory.listing import (
        Inventory,
        LiveWorkload,
        UnknownTypeError,
        WorkloadNotFoundError,
        age,
        components_text,
        find_workload,
        list_workloads,
        resolve_type,
        resolve_type_on,
    )
    from placer.inventory.pods import attribute_pods
else:
    # `placer get` lists; only `describe` needs the live tree (and the dispatch modules it reads)
    __getattr__ = lazy_exports(
        __name__,
        __all__,
        ("placer.inventory.listing", "placer.inventory.pods", "placer.inventory.describe"),
    )
