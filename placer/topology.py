"""Topology levels: which node labels name a domain a gang can be kept inside.

A **level** is a node label key (``topology.kubernetes.io/zone``, a rack label, an NVLink
domain label); a **domain** of that level is every node carrying one value of it. A
**topology** is a named, ordered list of levels, outermost first, as Kueue's and KAI's
``Topology`` objects write it (``spec.levels: [{nodeLabel: ...}]``).

placer knows the topology ``default`` (:data:`DEFAULT_LEVELS`: the well-known zone labels, the
labels NVIDIA Topograph writes, GKE's and EKS's network topology labels, the GPU operator's
NVLink clique and the hostname), plus whatever the fleet file's ``topologies:`` section adds
(:func:`topologies_from_list`). A definition, annotation or policy naming a level that none of
them knows is an error naming the level and the known ones (:meth:`Topologies.problem`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

__all__ = [
    "DEFAULT_LEVELS",
    "DEFAULT_TOPOLOGY",
    "Topologies",
    "default_topologies",
    "topologies_from_list",
]

DEFAULT_TOPOLOGY = "default"

#: placer's own levels, outermost first (the ``default`` topology).
DEFAULT_LEVELS: tuple[str, ...] = (
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "network.topology.nvidia.com/core",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/leaf",
    "network.topology.nvidia.com/accelerator",
    "cloud.google.com/gce-topology-block",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-host",
    "topology.k8s.aws/network-node-layer-1",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-3",
    "nvidia.com/gpu.clique",
    "kubernetes.io/hostname",
)


@dataclass(frozen=True)
class Topologies:
    """Named topologies: name -> levels, outermost first."""

    levels_by_name: Mapping[str, tuple[str, ...]] = field(
        default_factory=lambda: {DEFAULT_TOPOLOGY: DEFAULT_LEVELS}
    )

    @property
    def known_levels(self) -> tuple[str, ...]:
        """Every level of every topology, each once, in order."""
        return tuple(dict.fromkeys(lv for levels in self.levels_by_name.values() for lv in levels))

    def problem(self, level: str, topology: str = "") -> str | None:
        """Why ``level`` (of topology ``topology``, if named) is not usable, or ``None``.

        A named topology that placer knows must list the level; an unknown name (a member
        cluster's own Topology object) falls back to every known level.
        """
        if not level:
            return None
        levels = self.levels_by_name.get(topology) if topology else None
        if levels is not None:
            if level in levels:
                return None
            return (
                f"topology level {level!r} is not a level of topology {topology!r} "
                f"(levels: {', '.join(levels)}); use one of them or add it to that topology "
                "in the topologies: section of the fleet file (or of the snapshot)"
            )
        if level in self.known_levels:
            return None
        return (
            f"unknown topology level {level!r}: a level is a node label key placer knows "
            f"(known: {', '.join(self.known_levels)}); add it to a topology in the "
            "topologies: section of the fleet file (or of the snapshot)"
        )


def default_topologies() -> Topologies:
    return Topologies()


def topologies_from_list(data: object, *, where: str = "topologies") -> Topologies:
    """The default topology plus the topologies ``data`` lists, in Kueue's form::

        - name: datacenter
          levels: [{nodeLabel: example.com/block}, {nodeLabel: example.com/rack}]

    Raises ``ValueError`` naming the entry and field of a malformed one.
    """
    levels_by_name: dict[str, tuple[str, ...]] = {DEFAULT_TOPOLOGY: DEFAULT_LEVELS}
    if data is None:
        return Topologies(levels_by_name)
    if not isinstance(data, Sequence) or isinstance(data, str):
        raise ValueError(f"{where}: expected a list of {{name, levels}}")
    for index, item in enumerate(data):
        at = f"{where}[{index}]"
        if not isinstance(item, Mapping):
            raise ValueError(f"{at}: expected a mapping with name and levels")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise ValueError(f"{at}.name: a non-empty string is required")
        raw = item.get("levels")
        if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
            raise ValueError(f"{at}.levels: a non-empty list of {{nodeLabel: KEY}} is required")
        levels: list[str] = []
        for position, level in enumerate(raw):
            label = level.get("nodeLabel") if isinstance(level, Mapping) else None
            if not isinstance(label, str) or not label:
                raise ValueError(f"{at}.levels[{position}].nodeLabel: a node label key is required")
            if label in levels:
                raise ValueError(f"{at}.levels[{position}].nodeLabel: {label!r} is listed twice")
            levels.append(label)
        levels_by_name[name] = tuple(levels)
    return Topologies(levels_by_name)
