"""Where workloads already are: placer's own copies on the members, found by their record.

Re-submitting a workload must not create a second copy elsewhere. Before deciding,
:func:`find_existing` lists, per member cluster and per (kind, namespace) of the workloads at
hand, the objects that exist — one list call each, concurrently per cluster — and returns
every copy of each workload with its placement record (``None`` when something of that name
exists there that placer did not place: a user's own object, which placer must not take over).

A cluster that cannot be listed (unreachable, forbidden) is reported in ``unknown``: a copy
there cannot be ruled out. A kind the cluster does not serve simply has no copy there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from placer.dispatch.record import PlacementRecord
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient
from placer.model import WorkloadRef

__all__ = ["Existing", "ExistingCopies", "find_existing"]


@dataclass(frozen=True)
class Existing:
    """A copy of a workload found on a member cluster."""

    cluster: str
    object: Mapping[str, Any]
    #: placer's record on it; ``None`` when placer did not place it.
    record: PlacementRecord | None

    @property
    def uid(self) -> str:
        return str((self.object.get("metadata") or {}).get("uid", ""))


@dataclass(frozen=True)
class ExistingCopies:
    """What :func:`find_existing` found."""

    copies: Mapping[WorkloadRef, tuple[Existing, ...]] = field(default_factory=dict)
    #: cluster -> why it could not be checked.
    unknown: Mapping[str, str] = field(default_factory=dict)

    def of(self, ref: WorkloadRef) -> tuple[Existing, ...]:
        return self.copies.get(ref, ())


def find_existing(clients: Mapping[str, KubeClient], refs: Iterable[WorkloadRef]) -> ExistingCopies:
    """Every copy of ``refs`` on the clusters of ``clients`` (see the module docstring)."""
    wanted = set(refs)
    groups = sorted({(r.api_version, r.kind, r.namespace) for r in wanted})
    if not groups or not clients:
        return ExistingCopies()

    def scan(name: str, client: KubeClient) -> tuple[str, list[tuple[WorkloadRef, Existing]] | str]:
        found: list[tuple[WorkloadRef, Existing]] = []
        for api_version, kind, namespace in groups:
            try:
                items = client.list(api_version, kind, namespace=namespace).items
            except NotFoundError:
                continue
            except KubeError as err:
                prefix = f"cluster {name}: "
                text = err.message
                return name, text[len(prefix) :] if text.startswith(prefix) else text
            for item in items:
                metadata = item.get("metadata") or {}
                ref = WorkloadRef(api_version, kind, namespace, str(metadata.get("name", "")))
                if ref in wanted:
                    found.append((ref, Existing(name, item, PlacementRecord.from_object(item))))
        return name, found

    copies: dict[WorkloadRef, list[Existing]] = {}
    unknown: dict[str, str] = {}
    with ThreadPoolExecutor(max_workers=min(16, len(clients)), thread_name_prefix="find") as pool:
        results = list(pool.map(lambda item: scan(*item), clients.items()))
    for name, result in results:
        if isinstance(result, str):
            unknown[name] = result
            continue
        for ref, existing in result:
            copies.setdefault(ref, []).append(existing)
    return ExistingCopies({k: tuple(v) for k, v in copies.items()}, unknown)
