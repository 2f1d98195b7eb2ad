"""Following a dispatched workload's phase until it runs, completes or fails.

``placer submit --wait`` polls each workload on its cluster (one GET per workload per
interval; a watch per kind would need list rights on the whole namespace and gains nothing for
a handful of objects) and reads the phase through the definition's status mapping
(:func:`placer.definitions.phases_of`), exactly as ``placer get`` shows it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from placer.definitions import Definition, phases_of
from placer.errors import KubeError, NotFoundError, PlacerError
from placer.kube import KubeClient
from placer.model import WorkloadRef

__all__ = ["SETTLED", "Waited", "wait_for"]

#: phases that end the wait.
SETTLED = ("Running", "Completed", "Failed")


@dataclass(frozen=True)
class Waited:
    """How a wait ended for one workload."""

    workload: WorkloadRef
    cluster: str
    phases: tuple[str, ...]
    #: the workload reached one of :data:`SETTLED`.
    settled: bool
    #: why the wait ended without it (timeout, deleted, unreadable).
    problem: str = ""


def wait_for(
    targets: Sequence[tuple[WorkloadRef, str, Definition]],
    clients: Mapping[str, KubeClient],
    *,
    timeout: float,
    interval: float = 1.0,
    on_change: Callable[[WorkloadRef, str, tuple[str, ...]], None] | None = None,
) -> list[Waited]:
    """Poll every target (ref, cluster, definition) until all settled or ``timeout`` (a
    workload spread over clusters is one target per copy).

    ``on_change(ref, cluster, phases)`` is called whenever a workload's phases change.
    """
    deadline = time.monotonic() + timeout
    last: dict[tuple[WorkloadRef, str], tuple[str, ...]] = {}
    finished: dict[tuple[WorkloadRef, str], Waited] = {}
    while True:
        for ref, cluster, definition in targets:
            key = (ref, cluster)
            if key in finished:
                continue
            client = clients[cluster]
            try:
                obj = client.get(ref.api_version, ref.kind, ref.name, namespace=ref.namespace)
                phases = phases_of(obj, definition)
            except NotFoundError:
                finished[key] = Waited(ref, cluster, (), False, "deleted from the cluster")
                continue
            except KubeError as err:
                phases = last.get(key, ())
                if time.monotonic() >= deadline:
                    finished[key] = Waited(ref, cluster, phases, False, err.message)
                continue
            except PlacerError as err:
                finished[key] = Waited(ref, cluster, (), False, err.message)
                continue
            if phases != last.get(key):
                last[key] = phases
                if on_change is not None:
                    on_change(ref, cluster, phases)
            if any(p in SETTLED for p in phases):
                finished[key] = Waited(ref, cluster, phases, True)
        if len(finished) == len(targets):
            break
        left = deadline - time.monotonic()
        if left <= 0:
            for ref, cluster, _ in targets:
                if (ref, cluster) not in finished:
                    finished[(ref, cluster)] = Waited(
                        ref,
                        cluster,
                        last.get((ref, cluster), ()),
                        False,
                        f"timed out after {timeout:g}s",
                    )
            break
        time.sleep(min(interval, left))
    return [finished[(ref, cluster)] for ref, cluster, _ in targets]
