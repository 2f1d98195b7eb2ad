"""Why a unit does not fit a cluster, in words a platform engineer can act on.

:func:`why_not` looks at one cluster's free capacity and returns the first reason, from the
most specific to the least:

1. no node accepts the pods of a component (selector, affinity, taints, cordon, NotReady),
   summarised over the nodes (``node selector gpu=h100 matches no node``);
2. a resource no eligible node has at all (``no node has example.com/fpga``);
3. no eligible node could ever hold one pod, even empty: the pod asks more of a resource
   than any node's allocatable (``no node can ever hold a pod of component "worker": it needs
   16 nvidia.com/gpu, the largest node has 8 allocatable (waiting will not help; a larger node
   would)``) — unlike the next reasons, no pod leaving makes room, only a larger node does;
4. no single node has enough of one resource for one pod (``no node with enough free
   nvidia.com/gpu for a pod of component "worker" (needs 8, largest free block 4)``), or of
   all of them together;
5. the cluster total of a resource is below the unit's demand (``total free GPUs too low``);
6. fewer replicas fit node by node than the component has;
7. the packer could not place all pods together.

``None`` means the unit would fit now. The decision compares the answer on the capacity left
at the end with the answer before the decision started, to tell "cannot fit here" from
"displaced by higher-priority workloads" or "capacity taken by this decision's other picks".
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from placer.model import GPU_SHARE
from placer.podspec import node_mismatch
from placer.quantity import CPU, GPU, MEMORY, format_quantity, to_base
from placer.solver.packer import PackFailure, PodRun, pack
from placer.solver.problem import Unit, quote
from placer.solver.state import ClusterState, PodShape
from placer.solver.topology import domain_reason

__all__ = ["why_not"]


def _amount(resource: str, amount: int) -> str:
    if resource == CPU:
        return str(to_base(CPU, amount))
    if resource == MEMORY:
        return format_quantity(MEMORY, amount)
    return str(amount)


def _component(run: PodRun) -> str:
    return f"component {quote(run.component.label)}"


#: stands for the component's name in the per-shape reasons kept in the cache.
_PLACEHOLDER = "\x00component\x00"
#: reasons already found: per state, version and pod shape (a text with ``_PLACEHOLDER``, or
#: None), and per state, version and unit signature (``Unit.runs_key``).
RunReasons = dict[tuple[object, ...], "str | None"]


def why_not(
    state: ClusterState,
    unit: Unit,
    *,
    try_pack: bool = True,
    cache: RunReasons | None = None,
) -> str | None:
    """The reason ``unit`` cannot be placed on ``state`` now, or ``None`` (see module doc).

    ``try_pack=False`` skips the last, costly check (a trial packing). ``cache`` keeps the
    per-run reasons across calls (many units share pod shapes) and whole answers for units
    with the same pod runs (shapes, counts, component labels: the text names them only).
    """
    whole: tuple[object, ...] | None = None
    if cache is not None:
        whole = (id(state), state.version, try_pack, unit.runs_key)
        if whole in cache:
            return cache[whole]
    reason = _why_not(state, unit, try_pack, cache)
    if whole is not None and cache is not None:
        cache[whole] = reason
    return reason


def _why_not(
    state: ClusterState, unit: Unit, try_pack: bool, cache: RunReasons | None
) -> str | None:
    for check in (_no_eligible_node, _no_node_with_room):
        for run in unit.runs:
            # per shape, with the component's name filled in after (the text names it only)
            key = (id(state), state.version, check.__name__, id(run.shape))
            if cache is not None and key in cache:
                reason = cache[key]
            else:
                reason = check(state, run.shape, _PLACEHOLDER)
                if cache is not None:
                    cache[key] = reason
            if reason:
                return reason.replace(_PLACEHOLDER, _component(run))
    reason = _totals_too_low(state, unit)
    if reason:
        return reason
    for run in unit.runs:
        fit = state.copies_total(run.shape)
        if fit < run.count:
            return (
                f"only {fit} of the {run.count} pods of {_component(run)} fit on the nodes' "
                "free capacity"
            )
    if any(r.topology for r in unit.runs):
        reason = domain_reason(state, unit.runs)
        if reason is not None or not try_pack:
            return reason
    if not try_pack:
        return None
    if (
        len(unit.runs) == 1
        and not unit.runs[0].topology
        and not (unit.runs[0].shape.gpus and unit.runs[0].shape.share)
    ):
        # one run: the best-fit packer fills nodes with as many replicas as fit, so it
        # places them all exactly when the node-by-node count above allows them
        return None
    pack_key = (
        id(state),
        state.version,
        "pack",
        tuple((r.shape.ident, r.count, tuple(n.key for n in r.topology)) for r in unit.runs),
    )
    if cache is not None and cache.get(pack_key, "") is None:
        return None  # an identical unit packed on this capacity
    mark = state.mark()
    result = pack(state, unit.runs)
    state.undo(mark)
    if cache is not None and not isinstance(result, PackFailure):
        cache[pack_key] = None
    if isinstance(result, PackFailure):
        failed = result.run
        return (
            f"the pods do not fit on the nodes all together: {result.placed} of the "
            f"{failed.count} pods of {_component(failed)} found a node after the others"
        )
    return None


def _no_eligible_node(state: ClusterState, shape: PodShape, component: str) -> str | None:
    if (state.eligible(shape) & state.usable).any():
        return None
    pod = shape.demand
    reasons: Counter[str] = Counter()
    for node in state.nodes:
        reasons[node_mismatch(pod, node) or "node is cordoned or NotReady"] += 1
    if len(reasons) == 1:
        ((text, count),) = reasons.items()
        if text.startswith("node selector") and text.endswith("not matched"):
            selector = text.removeprefix("node selector ").removesuffix(" not matched")
            return f"node selector {selector} of {component} matches no node"
        if text == "required node affinity not matched":
            return f"required node affinity of {component} matches no node"
        if text.startswith("taint"):
            return f"{text} by {component} (on all {count} nodes)"
        return f"no node accepts {component}: {text} (all {count} nodes)"
    parts = ", ".join(f"{count} node(s): {text}" for text, count in reasons.most_common(3))
    return f"no node accepts {component} ({parts})"


def _no_node_with_room(state: ClusterState, shape: PodShape, component: str) -> str | None:
    mask = state.eligible(shape) & state.usable
    most = np.where(mask[:, None], state.free, -1).max(axis=0)
    for k, resource in enumerate(state.names):
        need = int(shape.req[k])
        largest = int(most[k])
        if need <= 0 or largest >= need:
            continue
        allocatable = [
            n.allocatable.get(resource, 0) for n, ok in zip(state.nodes, mask, strict=True) if ok
        ]
        if not any(allocatable):
            return _too_small(component, resource, _amount(resource, need), "0", True)
        if max(allocatable) < need:
            return _never(
                component, resource, _amount(resource, need), _amount(resource, max(allocatable))
            )
        return _too_small(
            component, resource, _amount(resource, need), _amount(resource, largest), False
        )
    if shape.gpus:
        largest = int(state.full[mask].max())
        if largest < shape.gpus:
            devices = int(state.ndev[mask].max())
            if not devices:
                return _too_small(component, GPU, str(shape.gpus), "0", True)
            if devices < shape.gpus:
                return _never(component, GPU, str(shape.gpus), str(devices))
            return _too_small(component, GPU, str(shape.gpus), str(largest), False)
    if shape.share:
        largest = int(state.dev[mask].max())
        if largest < shape.share:
            return (
                f"no GPU device with {shape.share} thousandths free for a pod of "
                f"{component} ({GPU_SHARE}; the most free on one device is "
                f"{max(largest, 0)})"
            )
    if not state.fits(shape)[mask].any():
        return (
            f"no single node has room for a pod of {component} in all resources "
            "together (each resource alone fits somewhere)"
        )
    return None


def _never(component: str, resource: str, need: str, allocatable: str) -> str:
    return (
        f"no node can ever hold a pod of {component}: it needs {need} {resource}, the "
        f"largest node has {allocatable} allocatable (waiting will not help; a larger node would)"
    )


def _too_small(component: str, resource: str, need: str, largest: str, absent: bool) -> str:
    if absent:
        return f"no node has {resource} ({component} needs {need})"
    return (
        f"no node with enough free {resource} for a pod of {component} "
        f"(needs {need}, largest free block {largest})"
    )


def _totals_too_low(state: ClusterState, unit: Unit) -> str | None:
    need = unit.demand
    free, have, idle = state.totals()
    whole = sum(r.shape.gpus * r.count for r in unit.runs)
    if whole > idle:
        return f"total free GPUs too low (needs {whole}, {idle} free)"
    if unit.milli > have:
        return (
            f"total free GPU capacity too low (needs {unit.milli / 1000:g} GPUs, "
            f"{have / 1000:g} free)"
        )
    for k, resource in enumerate(state.names):
        if need[k] > free[k]:
            return (
                f"total free {resource} too low (needs {_amount(resource, int(need[k]))}, "
                f"{_amount(resource, int(free[k]))} free)"
            )
    return None
