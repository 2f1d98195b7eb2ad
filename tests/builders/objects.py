"""Kubernetes objects for tests, as the API serves them (plain dicts); every argument has the
value most tests want, so a test names only what it is about.

* :func:`node` — a Ready ``v1`` Node with GPUs (allocatable = capacity).
* :func:`pod` — a ``v1`` Pod with one container's requests, bound to a node or pending.
* :func:`jobset` — a JobSet (``jobset.x-k8s.io/v1alpha2``), with a GPU pod template or none.
* :func:`custom_object` — an object of a made-up kind (``example.com/v1``) with ``spec.replicas``
  and ``spec.template``, the shape :func:`karta` describes.
* :func:`karta` — a Workload Map definition (``run.ai/v1alpha1`` Karta) of one root component.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["JOBSET_API_VERSION", "custom_object", "jobset", "karta", "node", "pod"]

JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
GPU = "nvidia.com/gpu"


def node(
    name: str,
    *,
    gpus: int | None = 8,
    cpu: str = "64",
    memory: str = "512Gi",
    pods: str = "110",
    extra: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    ready: str = "True",
    spec: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Node with ``gpus`` device-plugin GPUs (``None``: no GPU entry) and ``extra``
    allocatable resources; labels default to ``kubernetes.io/hostname``."""
    allocatable = {"cpu": cpu, "memory": memory, "pods": pods}
    if gpus is not None:
        allocatable[GPU] = str(gpus)
    allocatable.update(extra or {})
    metadata: dict[str, Any] = {
        "name": name,
        "labels": dict(labels) if labels is not None else {"kubernetes.io/hostname": name},
    }
    if annotations:
        metadata["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": metadata,
        "spec": dict(spec or {}),
        "status": {
            "allocatable": allocatable,
            "capacity": dict(allocatable),
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


def pod(
    name: str = "p",
    *,
    node: str | None = None,
    namespace: str = "default",
    phase: str | None = None,
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    extra: Mapping[str, str] | None = None,
    requests: Mapping[str, str] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    deleting: bool = False,
    container: str = "main",
    **spec: Any,
) -> dict[str, Any]:
    """A Pod requesting ``cpu``, ``memory``, ``gpus`` and ``extra`` in one container (or exactly
    ``requests``), bound to ``node`` (``None``: not scheduled), ``Running`` when bound and
    ``Pending`` when not unless ``phase`` says otherwise; ``deleting`` gives it a
    deletionTimestamp and a finalizer that holds it; further keyword arguments are ``spec``
    fields (``resourceClaims=[...]``)."""
    if requests is None:
        requests = {"cpu": cpu, "memory": memory}
        if gpus:
            requests[GPU] = str(gpus)
        requests.update(extra or {})
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-29T12:00:00Z"
        metadata["finalizers"] = ["example.com/hold"]
    pod_spec: dict[str, Any] = {
        "containers": [
            {"name": container, "image": "x", "resources": {"requests": dict(requests)}}
        ],
        **spec,
    }
    if node:
        pod_spec["nodeName"] = node
    if phase is None:
        phase = "Running" if node else "Pending"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": pod_spec,
        "status": {"phase": phase},
    }


def jobset(
    name: str,
    *,
    replicas: int = 1,
    gpus: int | None = None,
    cpu: str | None = None,
    namespace: str | None = "default",
    labels: Mapping[str, str] | None = None,
    suspend: bool | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A JobSet with one replicated job ``w`` of ``replicas`` Jobs of one pod each.

    With ``gpus`` or ``cpu`` the Jobs carry a pod template (one container ``main``, ``cpu``
    requested, ``gpus`` as a limit); without, the JobSet has no template (enough for API
    round trips). ``namespace=None`` leaves it to the client's default."""
    replicated: dict[str, Any] = {"name": "w", "replicas": replicas}
    if gpus is not None or cpu is not None:
        resources: dict[str, Any] = {}
        if cpu is not None:
            resources["requests"] = {"cpu": cpu}
        if gpus is not None:
            resources["limits"] = {GPU: str(gpus)}
        pod_spec = {
            "restartPolicy": "Never",
            "containers": [{"name": "main", "image": "trainer:1", "resources": resources}],
        }
        job = {"parallelism": 1, "completions": 1, "template": {"spec": pod_spec}}
        replicated["template"] = {"spec": job}
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if labels:
        metadata["labels"] = dict(labels)
    body_spec: dict[str, Any] = {"replicatedJobs": [replicated], **spec}
    if suspend is not None:
        body_spec = {"suspend": suspend, **body_spec}
    return {
        "apiVersion": JOBSET_API_VERSION,
        "kind": "JobSet",
        "metadata": metadata,
        "spec": body_spec,
    }


def custom_object(
    kind: str,
    name: str,
    *,
    api_version: str = "example.com/v1",
    namespace: str = "team-a",
    labels: Mapping[str, str] | None = None,
    replicas: Any = 1,
    gpus: str = "1",
    **spec: Any,
) -> dict[str, Any]:
    """An object of a made-up kind: ``spec.replicas`` pods of ``spec.template`` (one container
    with ``gpus`` as its limit) — what :func:`karta` describes."""
    template = {
        "spec": {"containers": [{"name": "c", "image": "c", "resources": {"limits": {GPU: gpus}}}]}
    }
    return {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels) if labels is not None else {"placer.dev/queue": "q"},
        },
        "spec": {"replicas": replicas, "template": template, **spec},
    }


def crd(
    group: str,
    kind: str,
    plural: str,
    *,
    scope: str = "Namespaced",
    schema: Mapping[str, Any] | None = None,
    versions: list[dict[str, Any]] | None = None,
    **names: str,
) -> dict[str, Any]:
    """A CustomResourceDefinition of ``plural.group``: by default one served and stored
    version ``v1``, with ``schema`` as its ``openAPIV3Schema`` when given; ``names`` adds to
    ``spec.names`` (``singular``, ...)."""
    if versions is None:
        version: dict[str, Any] = {"name": "v1", "served": True, "storage": True}
        if schema is not None:
            version["schema"] = {"openAPIV3Schema": dict(schema)}
        versions = [version]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": plural, "kind": kind, **names},
            "scope": scope,
            "versions": versions,
        },
    }


def karta(
    name: str = "x",
    *,
    kind: str = "X",
    group: str = "example.com",
    version: str = "v1",
    component: str = "root",
    replicas_path: str = ".spec.replicas",
    template_path: str = ".spec.template",
    running: str = ".status.ready == true",
) -> dict[str, Any]:
    """A Karta of one root component of ``group/version kind``: its pods at ``template_path``,
    their count at ``replicas_path``, running when ``running`` yields true."""
    return {
        "apiVersion": "run.ai/v1alpha1",
        "kind": "Karta",
        "metadata": {"name": name},
        "spec": {
            "structureDefinition": {
                "rootComponent": {
                    "name": component,
                    "kind": {"group": group, "version": version, "kind": kind},
                    "specDefinition": {"podTemplateSpecPath": template_path},
                    "scaleDefinition": {"replicasPath": replicas_path},
                    "statusDefinition": {
                        "statusMappings": {
                            "running": [
                                {"byExpression": {"expression": running, "expectedResult": "true"}}
                            ]
                        }
                    },
                }
            }
        },
    }
