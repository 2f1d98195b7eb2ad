"""An empty hub cluster, for running the placement controller on one machine.

``placer fleet up [SNAPSHOT] --hub NAME`` serves, next to the member clusters (or alone), a
loopback API server that is what ``deploy/`` makes of a real hub: it has no nodes and plays no
framework controller (a hub only stores workloads), serves every catalog kind as its
framework's CRD (the frameworks' CRDs without their controllers, as docs/controller.md
recommends), placer's own CRDs — ``PlacementPolicy`` (``placementpolicies.placer.dev``) and
``Karta`` (``kartas.run.ai``), read from ``deploy/crds/`` (shipped in the package as
``placer/virtual/hubcrds``) — and the ``placer-system`` namespace of the controller's Lease.

Its kubeconfig context is marked as a hub (:data:`placer.kube.ROLE_EXTENSION`), so that the
commands reaching member clusters (``placer submit``, ``get``, ``delete``, ``fleet show``,
``controller``'s members) leave it out of a kubeconfig that also holds the members.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from placer.definitions import Catalog
from placer.testing import Store
from placer.virtual.realism import register_catalog_kinds

__all__ = ["HUB_NAMESPACE", "hub_crds", "serve_hub"]

#: the namespace of the controller's Lease and Events (deploy/namespace.yaml).
HUB_NAMESPACE = "placer-system"


def hub_crds() -> list[dict[str, Any]]:
    """placer's CustomResourceDefinitions (``deploy/crds/``), in name order."""
    folder = Path(str(resources.files("placer.virtual").joinpath("hubcrds")))
    documents = []
    for path in sorted(folder.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if isinstance(document, dict):
                documents.append(document)
    return documents


def serve_hub(store: Store, catalog: Catalog | None = None) -> None:
    """Make ``store`` a hub (module docstring): before its server starts."""
    register_catalog_kinds(store, catalog or Catalog.builtin())
    for crd in hub_crds():
        store.create(crd)
    store.seed([{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HUB_NAMESPACE}}])
