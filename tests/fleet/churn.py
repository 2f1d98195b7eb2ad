"""Random churn of a member's objects, for the capacity cache's tests and benchmark.

:class:`Churn` holds a member's Node, Pod, ResourceSlice and ResourceClaim objects (as a
watch would show them) and changes them at random the ways a cluster does: pods created
(bound or pending, some with GPU fractions), bound, finished, deleted or being deleted; nodes
cordoned, uncordoned, not ready, added and removed, their per-device GPU annotation
(``placer.dev/gpu-devices``, on every third node: the devices before its pods, some held out
of band) rewritten; DRA slices published, republished and removed, claims allocated and
released. Each change is returned as ``(kind, old, new)``.
"""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator
from typing import Any

from placer.fleet.capacity import GPU_DEVICES_ANNOTATION
from placer.fleet.devices import DRA_API_VERSION
from placer.testing import synthetic_cluster

JSON = dict[str, Any]
Change = tuple[str, JSON | None, JSON | None]
KINDS = ("Node", "Pod", "ResourceSlice", "ResourceClaim")
#: per-device baselines of annotated nodes (8 GPUs): all free, some held outside Kubernetes.
_BASELINES = (
    "1000,1000,1000,1000,1000,1000,1000,1000",
    "1000,1000,1000,1000,1000,1000,500,0",
    "0,1000,1000,1000,1000,1000,1000,1000",
    "1000,1000,1000,1000,750,1000,1000,1000",
)


def _key(obj: JSON) -> tuple[str, str]:
    meta = obj["metadata"]
    return meta.get("namespace") or "", meta["name"]


class Churn:
    """A member's objects and random changes to them (see the module docstring)."""

    def __init__(self, nodes: int = 40, pods: int = 300, *, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.objects: dict[str, dict[tuple[str, str], JSON]] = {k: {} for k in KINDS}
        self._serial = 0
        for obj in synthetic_cluster(nodes, pods, seed=seed, namespaces=3):
            self.objects[obj["kind"]][_key(obj)] = obj
        for name in list(self.node_names())[: max(1, nodes // 4)]:
            self.objects["ResourceSlice"][("", f"{name}-gpu")] = self._slice(name, 1, 4)
        for index, name in enumerate(self.node_names()):
            if index % 3 == 1:
                node = self.objects["Node"][("", name)]
                node["metadata"]["annotations"] = {GPU_DEVICES_ANNOTATION: _BASELINES[index % 4]}

    def node_names(self) -> list[str]:
        return sorted(name for _, name in self.objects["Node"])

    def items(self, kind: str) -> list[JSON]:
        return list(self.objects[kind].values())

    def _next(self) -> int:
        self._serial += 1
        return self._serial

    # -- building objects ------------------------------------------------------------------------

    def _slice(self, node: str, generation: int, count: int) -> JSON:
        return {
            "apiVersion": DRA_API_VERSION,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-gpu"},
            "spec": {
                "driver": "gpu.nvidia.com",
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{i}",
                        "attributes": {
                            "type": {"string": "gpu"},
                            "productName": {"string": "NVIDIA H200"},
                        },
                    }
                    for i in range(count)
                ],
            },
        }

    def _claim(self, node: str, devices: list[str]) -> JSON:
        return {
            "apiVersion": DRA_API_VERSION,
            "kind": "ResourceClaim",
            "metadata": {"name": f"claim-{self._next()}", "namespace": "team-0"},
            "spec": {"devices": {"requests": [{"name": "gpus"}]}},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {
                                "request": "gpus",
                                "driver": "gpu.nvidia.com",
                                "pool": node,
                                "device": d,
                            }
                            for d in devices
                        ]
                    }
                }
            },
        }

    def _pod(self) -> JSON:
        rng = self.rng
        name = f"churn-{self._next()}"
        requests: JSON = {"cpu": f"{rng.randint(1, 4)}", "memory": f"{rng.randint(1, 16)}Gi"}
        annotations: JSON = {}
        labels: JSON = {"app": "churn"}
        roll = rng.random()
        if roll < 0.3:
            requests["nvidia.com/gpu"] = str(rng.randint(1, 2))
        elif roll < 0.45:
            annotations["gpu-fraction"] = rng.choice(["0.25", "0.5", "0.75", "1"])
            if rng.random() < 0.5:
                labels["runai-gpu-group"] = f"g{rng.randint(1, 3)}"
        spec: JSON = {"containers": [{"name": "main", "resources": {"requests": requests}}]}
        phase = "Pending"
        if rng.random() < 0.8:
            spec["nodeName"] = rng.choice(self.node_names())
            phase = "Running"
        meta: JSON = {"name": name, "namespace": f"team-{rng.randint(0, 2)}", "labels": labels}
        if annotations:
            meta["annotations"] = annotations
        meta["uid"] = f"uid-{name}"
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": spec,
            "status": {"phase": phase},
        }

    # -- changes ---------------------------------------------------------------------------------

    def changes(self, count: int) -> Iterator[Change]:
        """``count`` random changes, applied to :attr:`objects` as they are yielded."""
        moves = (
            (self._add_pod, 30),
            (self._delete_pod, 20),
            (self._phase, 20),
            (self._deleting, 5),
            (self._cordon, 6),
            (self._ready, 3),
            (self._add_node, 3),
            (self._annotate, 2),
            (self._remove_node, 3),
            (self._slice_change, 5),
            (self._claim_change, 5),
        )
        weights = [w for _, w in moves]
        done = 0
        while done < count:
            move = self.rng.choices([m for m, _ in moves], weights)[0]
            change = move()
            if change is None:
                continue
            kind, old, new = change
            store = self.objects[kind]
            if new is None:
                assert old is not None
                store.pop(_key(old), None)
            else:
                store[_key(new)] = new
            done += 1
            yield change

    def _pick(self, kind: str) -> JSON | None:
        items = self.objects[kind]
        if not items:
            return None
        return items[self.rng.choice(sorted(items))]

    def _add_pod(self) -> Change:
        return "Pod", None, self._pod()

    def _delete_pod(self) -> Change | None:
        pod = self._pick("Pod")
        return None if pod is None else ("Pod", pod, None)

    def _phase(self) -> Change | None:
        pod = self._pick("Pod")
        if pod is None:
            return None
        new = copy.deepcopy(pod)
        if new["status"].get("phase") == "Pending" and not new["spec"].get("nodeName"):
            new["spec"]["nodeName"] = self.rng.choice(self.node_names())
            new["status"]["phase"] = "Running"
        else:
            new["status"]["phase"] = self.rng.choice(["Running", "Succeeded", "Failed"])
        return "Pod", pod, new

    def _deleting(self) -> Change | None:
        pod = self._pick("Pod")
        if pod is None:
            return None
        new = copy.deepcopy(pod)
        new["metadata"]["deletionTimestamp"] = "2026-12-01T20:00:00Z"
        return "Pod", pod, new

    def _cordon(self) -> Change | None:
        node = self._pick("Node")
        if node is None:
            return None
        new = copy.deepcopy(node)
        new["spec"]["unschedulable"] = not node["spec"].get("unschedulable", False)
        return "Node", node, new

    def _ready(self) -> Change | None:
        node = self._pick("Node")
        if node is None:
            return None
        new = copy.deepcopy(node)
        for condition in new["status"].get("conditions") or []:
            if condition.get("type") == "Ready":
                condition["status"] = "False" if condition["status"] == "True" else "True"
        return "Node", node, new

    def _annotate(self) -> Change | None:
        node = self._pick("Node")
        if node is None:
            return None
        new = copy.deepcopy(node)
        annotations = new["metadata"].setdefault("annotations", {})
        if GPU_DEVICES_ANNOTATION in annotations and self.rng.random() < 0.3:
            del annotations[GPU_DEVICES_ANNOTATION]
        else:
            annotations[GPU_DEVICES_ANNOTATION] = self.rng.choice(_BASELINES)
        return "Node", node, new

    def _add_node(self) -> Change:
        template = self._pick("Node")
        assert template is not None
        new = copy.deepcopy(template)
        name = f"added-{self._next()}"
        new["metadata"]["name"] = name
        new["metadata"].setdefault("labels", {})["kubernetes.io/hostname"] = name
        return "Node", None, new

    def _remove_node(self) -> Change | None:
        if len(self.objects["Node"]) < 3:
            return None
        node = self._pick("Node")
        return None if node is None else ("Node", node, None)

    def _slice_change(self) -> Change | None:
        node = self.rng.choice(self.node_names())
        old = self.objects["ResourceSlice"].get(("", f"{node}-gpu"))
        if old is not None and self.rng.random() < 0.3:
            return "ResourceSlice", old, None
        generation = (old["spec"]["pool"]["generation"] + 1) if old else 1
        return "ResourceSlice", old, self._slice(node, generation, self.rng.randint(1, 8))

    def _claim_change(self) -> Change | None:
        claims = self.objects["ResourceClaim"]
        if claims and self.rng.random() < 0.4:
            claim = self._pick("ResourceClaim")
            return None if claim is None else ("ResourceClaim", claim, None)
        sliced = self.objects["ResourceSlice"]
        if not sliced:
            return None
        found = self._pick("ResourceSlice")
        assert found is not None
        devices = [d["name"] for d in found["spec"]["devices"]]
        taken = self.rng.sample(devices, self.rng.randint(1, len(devices)))
        return "ResourceClaim", None, self._claim(found["spec"]["nodeName"], taken)
