"""The fleet side of placer: which clusters exist, how to reach them, what is free where.

* :mod:`~placer.fleet.config` — member clusters from kubeconfigs or a fleet file
  (:class:`FleetConfig`, :class:`ClusterSource`);
* :mod:`~placer.fleet.capacity` — pure: Node/Pod API objects to :class:`placer.model.Cluster`
  (free = allocatable − requests of bound non-terminal pods, for every resource);
* :mod:`~placer.fleet.gather` — concurrent, paginated gathering with per-cluster timeouts
  (:func:`gather_fleet`);
* :mod:`~placer.fleet.summary` — what ``placer fleet show`` reports per cluster.

Kubernetes I/O goes through :mod:`placer.kube` only. The virtual fleet (``placer fleet up``:
a snapshot served by loopback API servers) is :mod:`placer.virtual`.
"""

from typing import TYPE_CHECKING

from placer._lazy import lazy_exports

__all__ = [
    "ClusterSource",
    "FleetConfig",
    "PodTally",
    "cluster_from_api",
    "complete_labels",
    "fleet_from_kubeconfigs",
    "gather_cluster",
    "gather_fleet",
    "load_fleet_file",
    "member_clients",
    "node_from_api",
    "open_clients",
]

if TYPE_CHECKING:
    from placer.fleet.capacity import PodTally, cluster_from_api, complete_labels, node_from_api
    from placer.fleet.clients import member_clients, open_clients
    from placer.fleet.config import (
        ClusterSource,
        FleetConfig,
        fleet_from_kubeconfigs,
        load_fleet_file,
    )
    from placer.fleet.gather import gather_cluster, gather_fleet
else:
    # reading a fleet file or kubeconfigs does not load the Kubernetes client
    __getattr__ = lazy_exports(
        __name__,
        __all__,
        (
            "placer.fleet.config",
            "placer.fleet.capacity",
            "placer.fleet.clients",
            "placer.fleet.gather",
        ),
    )
