"""What the frameworks' own CustomResourceDefinitions declare beyond group, version and kind.

A virtual fleet (``placer fleet up``, :mod:`placer.virtual.realism`) serves every catalog kind as
a CRD. The catalog's definitions name the kind only; what kubectl shows of a kind — short names
(``kubectl get lws``), the columns of ``kubectl get`` (a version's
``additionalPrinterColumns``) and the subresources — comes from the framework's CRD. These are
copied here as facts from the upstream CRDs (kubernetes-sigs/jobset
``jobset.x-k8s.io_jobsets.yaml``, kubernetes-sigs/lws ``leaderworkerset.x-k8s.io_leaderworkersets
.yaml``, ray-project/kuberay ``ray.io_rayclusters.yaml``, kubeflow's ``pytorchjobs.kubeflow.org``;
KServe's and Knative's short names ``isvc`` and ``ksvc``). A kind not listed gets a CRD with its
names only, which is what kubectl then shows (NAME and AGE). Schemas and subresources other
than ``status`` are not copied: the virtual CRDs preserve unknown fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["UPSTREAM_CRDS", "CrdFacts", "crd_facts"]


@dataclass(frozen=True)
class CrdFacts:
    """The parts of an upstream CRD a virtual fleet serves (see the module docstring)."""

    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    printer_columns: tuple[Mapping[str, Any], ...] = ()


def _column(name: str, path: str, kind: str = "string", **more: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "jsonPath": path, **more}


_AGE = _column("Age", ".metadata.creationTimestamp", "date")

#: (group, kind) -> facts.
UPSTREAM_CRDS: Mapping[tuple[str, str], CrdFacts] = {
    ("jobset.x-k8s.io", "JobSet"): CrdFacts(
        printer_columns=(
            _column("TerminalState", ".status.terminalState", description="Final state of JobSet"),
            _column("Restarts", ".status.restarts", description="Number of restarts"),
            _column("Completed", '.status.conditions[?(@.type=="Completed")].status'),
            _column("Suspended", ".spec.suspend", description="JobSet suspended"),
            {**_AGE, "description": "Time this JobSet was created"},
        ),
    ),
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): CrdFacts(short_names=("lws",)),
    ("ray.io", "RayCluster"): CrdFacts(
        printer_columns=(
            _column("desired workers", ".status.desiredWorkerReplicas", "integer"),
            _column("available workers", ".status.availableWorkerReplicas", "integer"),
            _column("status", ".status.state"),
            _column("age", ".metadata.creationTimestamp", "date"),
            _column("head pod IP", ".status.head.podIP", priority=1),
            _column("head service IP", ".status.head.serviceIP", priority=1),
        ),
    ),
    ("kubeflow.org", "PyTorchJob"): CrdFacts(
        printer_columns=(_column("State", ".status.conditions[-1:].type"), _AGE),
    ),
    ("serving.kserve.io", "InferenceService"): CrdFacts(short_names=("isvc",)),
    ("serving.knative.dev", "Service"): CrdFacts(
        short_names=("kservice", "ksvc"), categories=("all", "knative", "serving")
    ),
}


def crd_facts(group: str, kind: str) -> CrdFacts:
    """The upstream facts of a kind (empty facts when none are recorded)."""
    return UPSTREAM_CRDS.get((group, kind), CrdFacts())
