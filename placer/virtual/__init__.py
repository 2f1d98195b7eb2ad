"""The virtual fleet: clusters emulated in-process, for ``placer fleet up``, the demo and tests.

A capacity snapshot is served by one loopback API server per cluster (:mod:`placer.testing`),
seeded so that gathering from it gives the snapshot's capacity back, with a reactor that plays
the framework controllers, kube-scheduler and kubelet for every workload kind of the catalog.
It is a tool around placer, not part of placing: nothing of the placing path (fleet gathering,
dispatch, the controller) imports it.

* :mod:`~placer.virtual.fleet` — :class:`VirtualFleet`: the servers, a kubeconfig with one
  context per cluster and, if asked, a fleet file;
* :mod:`~placer.virtual.seeding` — a captured cluster back to Node, Pod and DRA objects (pure);
* :mod:`~placer.virtual.realism` — applied workloads get pods bound to nodes, and a status
  (:func:`realism_setup`);
* :mod:`~placer.virtual.crds` — what the frameworks' own CRDs declare (short names, printer
  columns), so that kubectl shows virtual workloads as it shows real ones.
"""

from placer.virtual.fleet import Setup, VirtualFleet
from placer.virtual.realism import Realism, realism_setup, register_catalog_kinds

__all__ = ["Realism", "Setup", "VirtualFleet", "realism_setup", "register_catalog_kinds"]
