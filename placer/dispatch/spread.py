"""Dispatching spread workloads: one workload, a copy per cluster, all copies or none.

A workload whose PlacementPolicy has ``replicaScheduling`` (:mod:`placer.spread`) is decided
as one placement per cluster (:func:`placer.solver.spread.solve_spread`). Each placement is a
**copy**: the workload's own object (same kind, namespace and name) with

* its share of the replicas written through the definition's replicas path
  (:func:`placer.definitions.replicas.with_replicas`; no framework code: only kinds whose
  definition names a plain replicas field can be divided);
* the policy's ``overrideRules`` for that cluster applied (image registry rewrite, JSON patch,
  merge patch: :func:`placer.spread.apply_overrides`);
* the annotation :data:`ANNOTATION_SPREAD`: the workload's copies (cluster -> replicas of each
  divided component) and the hash of the object as the user wrote it, so that ``placer get``
  and ``describe`` show every copy and a later ``placer submit`` of the same file knows the
  copies are its own and unchanged.

:func:`dispatch_spread` dispatches the copies of every spread workload of a decision, each on
its cluster through the ordinary :class:`~placer.dispatch.dispatcher.Dispatcher` restricted to
that cluster: its claim, its in-flight ledger entry, its placement record, the hand-off to the
member's scheduler. A copy is pinned to its cluster: a cluster that refuses it is not replaced
by another (the division was made for these clusters). **All or nothing**: when any copy of a
workload fails (or another decider holds it), the copies already applied on the other
clusters are removed again with their ledger entries, and the workload is ``failed`` with the
reason of every cluster. A clean-up that fails is said in the error (the copy left there keeps
its record, so ``placer delete`` finds it).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from placer.definitions.replicas import replicas_field, with_replicas
from placer.dispatch.outcomes import (
    DISPATCHED,
    DRY_RUN,
    FAILED,
    IN_FLIGHT,
    UNCHANGED,
    UNPLACED,
    Manifest,
    Outcome,
    unplaced_text,
)
from placer.dispatch.record import dispatch_manifest
from placer.model import (
    ANNOTATION_PREFIX,
    Decision,
    Fleet,
    Placement,
    Workload,
    WorkloadRef,
)
from placer.objects import meta
from placer.policy import PlacementPolicy, policy_for
from placer.spread import apply_overrides

if TYPE_CHECKING:  # what reads a copy's mark (get, describe) loads no client nor solver
    from placer.dispatch.existing import Existing
    from placer.dispatch.ledger import Ledger
    from placer.dispatch.options import DispatchOptions
    from placer.kube import KubeClient

__all__ = [
    "ANNOTATION_SPREAD",
    "SpreadCopies",
    "copy_manifest",
    "copy_replicas",
    "dispatch_spread",
    "outcome_shares",
    "settle_spread",
    "source_hash",
    "spread_annotation",
    "spread_copies_of",
    "spreads",
]

#: on every copy of a spread workload: ``{"copies": {cluster: {component: replicas}},
#: "source": <hash of the object as written>}`` (compact JSON).
ANNOTATION_SPREAD = f"{ANNOTATION_PREFIX}spread"


def spreads(workload: Workload, policies: Sequence[PlacementPolicy]) -> bool:
    """Whether ``workload``'s policy spreads it over clusters (``replicaScheduling``)."""
    policy = policy_for(workload, policies)
    return policy is not None and policy.spread is not None and policy.spread.scheduling is not None


def source_hash(manifest: Mapping[str, Any], ref: WorkloadRef) -> str:
    """The hash of a spread workload's object as the user wrote it (24 hex digits)."""
    body = dispatch_manifest(manifest, ref, None)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def copy_replicas(placement: Placement, workload: Workload) -> dict[str, int]:
    """Replicas of each divided (scalable) component in the copy ``placement`` places."""
    replicas: dict[str, int] = {}
    for pod in placement.pods:
        label = f"{pod.component}/{pod.instance}" if pod.instance else pod.component
        if label in workload.scalable:
            replicas[label] = replicas.get(label, 0) + 1
    return replicas


def copy_manifest(
    manifest: Manifest,
    placement: Placement,
    fleet: Fleet,
    policies: Sequence[PlacementPolicy],
    copies: Mapping[str, Mapping[str, int]] | None = None,
) -> Manifest:
    """The copy of a spread workload its cluster gets (see the module docstring).

    ``copies``: every copy's replicas, by cluster, for :data:`ANNOTATION_SPREAD` (none: the
    body is not annotated, as ``placer plan`` shows it).

    Raises:
        ValueError: an override does not apply (the message names the cluster and path).
    """
    from placer.solver.spread import copy_workload

    workload = manifest.workload
    body: dict[str, Any] = dict(manifest.body)
    replicas = copy_replicas(placement, workload)
    keys = replicas_field(manifest.decomposition.definition)
    if keys is not None and replicas:
        body = with_replicas(body, keys, next(iter(replicas.values())))
    policy = policy_for(workload, policies)
    rules = policy.spread.overrides if policy is not None and policy.spread is not None else ()
    body = apply_overrides(body, fleet.cluster(placement.cluster), rules)
    if copies is not None:
        metadata = dict(meta(body))
        annotations = dict(metadata.get("annotations") or {})
        annotations[ANNOTATION_SPREAD] = spread_annotation(copies, manifest)
        metadata["annotations"] = annotations
        body["metadata"] = metadata
    pods: dict[str, int] = {}
    for pod in placement.pods:
        label = f"{pod.component}/{pod.instance}" if pod.instance else pod.component
        pods[label] = pods.get(label, 0) + 1
    copied = copy_workload(workload, placement.cluster, pods, ref=workload.ref)
    decomposition = replace(manifest.decomposition, workload=copied)
    return replace(manifest, body=body, decomposition=decomposition)


def spread_annotation(copies: Mapping[str, Mapping[str, int]], manifest: Manifest) -> str:
    """The value of :data:`ANNOTATION_SPREAD` for the copies ``copies`` (cluster -> divided
    component -> replicas) of ``manifest``."""
    return json.dumps(
        {
            "copies": {c: dict(r) for c, r in sorted(copies.items())},
            "source": source_hash(manifest.body, manifest.ref),
        },
        separators=(",", ":"),
        sort_keys=True,
    )


def outcome_shares(outcome: Outcome, workload: Workload) -> dict[str, dict[str, int]]:
    """Cluster -> divided component -> replicas of a spread workload's placed copies."""
    return {
        c.cluster: copy_replicas(c.placement, workload)
        for c in outcome.copies
        if c.cluster and c.placement is not None
    }


@dataclass(frozen=True)
class SpreadCopies:
    """What :data:`ANNOTATION_SPREAD` on a live copy says."""

    #: cluster -> divided component -> replicas (empty for a duplicated workload).
    copies: Mapping[str, Mapping[str, int]] = field(default_factory=dict)
    #: hash of the object as the user wrote it (:func:`source_hash`).
    source: str = ""


def spread_copies_of(obj: Mapping[str, Any]) -> SpreadCopies | None:
    """The spread annotation of a live object, or ``None`` (not a copy of a spread workload,
    or an annotation edited beyond reading)."""
    annotations = meta(obj).get("annotations") or {}
    text = annotations.get(ANNOTATION_SPREAD) if isinstance(annotations, Mapping) else None
    if not isinstance(text, str):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if not isinstance(data, Mapping) or not isinstance(data.get("copies"), Mapping):
        return None
    copies: dict[str, dict[str, int]] = {}
    for cluster, replicas in data["copies"].items():
        if not isinstance(replicas, Mapping):
            return None
        copies[str(cluster)] = {
            str(k): int(v) for k, v in replicas.items() if isinstance(v, int) and v >= 0
        }
    return SpreadCopies(copies, str(data.get("source", "")))


# --------------------------------------------------------------------------------------------
# re-submission


def settle_spread(
    manifest: Manifest, found: Sequence[Existing], reachable: Sequence[str]
) -> Outcome | None:
    """The outcome of a spread workload that already has copies on the members, or ``None``
    when it has none (it is to be decided).

    Its own copies (placer's record, :data:`ANNOTATION_SPREAD` with the same source hash) on
    every cluster their annotation names: ``unchanged``, with every copy. Anything else —
    someone else's object of that name, copies of a changed object, a copy missing on a
    reachable cluster — ``failed``, with what to do: changing the copies of a spread workload
    in place is not built; ``placer delete`` it and submit it again.
    """
    if not found:
        return None
    ref = manifest.ref
    foreign = [c.cluster for c in found if c.record is None]
    if foreign:
        return Outcome(
            ref,
            FAILED,
            cluster=foreign[0],
            error=(
                f"already exists on cluster {', '.join(foreign)} without placer's placement "
                "record (created by someone else); not placed anywhere, so that it cannot run "
                "twice: delete it there, or rename the workload"
            ),
        )
    marks = [spread_copies_of(c.object) for c in found]
    source = source_hash(manifest.body, ref)
    if any(m is None for m in marks):
        where = ", ".join(c.cluster for c, m in zip(found, marks, strict=True) if m is None)
        return Outcome(
            ref,
            FAILED,
            cluster=found[0].cluster,
            error=(
                f"placed on {where} whole (not as copies of a spread workload); a policy now "
                "spreads it: `placer delete` it, then submit it again"
            ),
        )
    if any(m is not None and m.source != source for m in marks):
        return Outcome(
            ref,
            FAILED,
            cluster=found[0].cluster,
            error=(
                "its copies on "
                + ", ".join(c.cluster for c in found)
                + " were placed from a different object; changing the copies of a spread "
                "workload in place is not supported yet: `placer delete` it, then submit it "
                "again"
            ),
        )
    expected = set(marks[0].copies) if marks[0] is not None else set()
    missing = sorted((expected - {c.cluster for c in found}) & set(reachable))
    copies = tuple(
        Outcome(
            ref,
            UNCHANGED,
            cluster=c.cluster,
            placement=_recorded(manifest, c, m),
            record=c.record,
            uid=c.uid,
        )
        for c, m in zip(found, marks, strict=True)
        if m is not None
    )
    if missing:
        return Outcome(
            ref,
            FAILED,
            cluster=found[0].cluster,
            error=(
                f"its copy on {', '.join(missing)} is gone (copies on "
                f"{', '.join(c.cluster for c in found)}); `placer delete` it, then submit it "
                "again"
            ),
            copies=copies,
        )
    return replace(copies[0], copies=copies)


def _recorded(manifest: Manifest, found: Existing, mark: SpreadCopies) -> Placement | None:
    """The placement a live copy's record describes (its replicas from its spread mark)."""
    from placer.dispatch.existing import placement_from_record
    from placer.solver.spread import copy_workload

    if found.record is None:
        return None
    workload = manifest.workload
    copied = copy_workload(
        workload, found.cluster, dict(mark.copies.get(found.cluster, {})), ref=workload.ref
    )
    as_copy = replace(manifest, decomposition=replace(manifest.decomposition, workload=copied))
    return placement_from_record(as_copy, found.cluster, found.record)


# --------------------------------------------------------------------------------------------
# dispatch


def dispatch_spread(
    manifests: Sequence[Manifest],
    decision: Decision,
    fleet: Fleet,
    clients: Mapping[str, KubeClient],
    options: DispatchOptions,
    *,
    ledger: Ledger | None,
    decision_id: str,
) -> tuple[dict[WorkloadRef, Outcome], list[str]]:
    """Dispatch the copies of the spread workloads ``manifests`` as ``decision`` places them
    (several placements per workload), all copies or none (module docstring).

    Returns one outcome per manifest — ``dispatched`` (or ``dry-run``) with
    :attr:`~placer.dispatch.outcomes.Outcome.copies`, ``failed``, ``in-flight`` or
    ``unplaced`` — and warnings.
    """
    from placer.dispatch.dispatcher import Dispatcher

    by_ref = {m.ref: m for m in manifests}
    placements: dict[WorkloadRef, list[Placement]] = {}
    for placement in decision.placements:
        if placement.workload in by_ref:
            placements.setdefault(placement.workload, []).append(placement)
    outcomes: dict[WorkloadRef, Outcome] = {}
    per_cluster: dict[str, list[tuple[Manifest, Placement]]] = {}
    for ref, copies in placements.items():
        manifest = by_ref[ref]
        shares = {p.cluster: copy_replicas(p, manifest.workload) for p in copies}
        try:
            copied = [
                (copy_manifest(manifest, p, fleet, options.policies, shares), p) for p in copies
            ]
        except ValueError as err:
            outcomes[ref] = Outcome(ref, FAILED, error=str(err))
            continue
        for item in copied:
            per_cluster.setdefault(item[1].cluster, []).append(item)

    def run(cluster: str) -> tuple[str, dict[WorkloadRef, Outcome], list[str]]:
        client = clients.get(cluster)
        todo = per_cluster[cluster]
        if client is None:
            failed = {
                m.ref: Outcome(m.ref, FAILED, cluster=cluster, error="no client for this cluster")
                for m, _ in todo
            }
            return cluster, failed, []
        dispatcher = Dispatcher({cluster: client}, options, ledger=ledger)
        local = Decision(
            tuple(p for _, p in todo),
            (),
            replace(decision.summary, workloads=len(todo), placed=len(todo)),
        )
        result = dispatcher.dispatch(
            [m for m, _ in todo],
            local,
            Fleet(tuple(c for c in fleet.clusters if c.name == cluster)),
            decision_id=decision_id,
        )
        return cluster, {o.workload: o for o in result.outcomes}, list(result.warnings)

    warnings: list[str] = []
    results: dict[WorkloadRef, dict[str, Outcome]] = {}
    if per_cluster:
        workers = options.max_workers or min(16, len(per_cluster))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="spread") as pool:
            for cluster, found, said in pool.map(run, sorted(per_cluster)):
                warnings += said
                for ref, outcome in found.items():
                    results.setdefault(ref, {})[cluster] = replace(outcome, cluster=cluster)
    for ref, by_cluster in results.items():
        outcomes[ref] = _settle(by_ref[ref], placements[ref], by_cluster, clients, ledger, options)
    reasons = {u.workload: u.reasons for u in decision.unplaced}
    for manifest in manifests:
        if manifest.ref not in outcomes:
            text = unplaced_text(reasons.get(manifest.ref, {}))
            outcomes[manifest.ref] = Outcome(manifest.ref, UNPLACED, error=text)
    return outcomes, warnings


def _settle(
    manifest: Manifest,
    placements: Sequence[Placement],
    by_cluster: Mapping[str, Outcome],
    clients: Mapping[str, KubeClient],
    ledger: Ledger | None,
    options: DispatchOptions,
) -> Outcome:
    """One spread workload's outcome from its copies' outcomes; a failure removes the copies
    this dispatch applied elsewhere."""
    from placer.dispatch.removal import remove_copy, retire_entry

    ref = manifest.ref
    ordered = [by_cluster[p.cluster] for p in placements if p.cluster in by_cluster]
    placed = [o for o in ordered if o.placed]
    if len(placed) == len(placements):
        first = placed[0]
        state = DRY_RUN if options.dry_run else DISPATCHED
        if all(o.state == UNCHANGED for o in placed):
            state = UNCHANGED
        return replace(first, state=state, copies=tuple(placed))
    bad = [o for o in ordered if not o.placed]
    problems: list[str] = []
    undone: list[Outcome] = []
    for outcome in placed:
        if outcome.state != DISPATCHED or outcome.cluster is None:
            undone.append(outcome)
            continue
        client = clients[outcome.cluster]
        removal = remove_copy(client, ref, uid=outcome.uid)
        if not removal.accepted:
            problems.append(
                f"its copy on {outcome.cluster} could not be removed ({removal.problem}): "
                "`placer delete` it"
            )
            undone.append(outcome)
            continue
        if ledger is not None:
            ledger.discard(outcome.cluster, ref)
        retired = retire_entry(client, ref)
        if retired:
            problems.append(f"{outcome.cluster}: {retired}")
        undone.append(replace(outcome, state=FAILED, error="removed again: another copy failed"))
    errors = "; ".join(f"{o.cluster}: {o.error or o.state}" for o in bad)
    state = IN_FLIGHT if all(o.state == IN_FLIGHT for o in bad) else FAILED
    text = f"{len(bad)} of {len(placements)} copies not placed ({errors})"
    if placed:
        text += (
            f"; the copies on {', '.join(o.cluster or '' for o in placed)} were removed again "
            "(a spread workload is placed whole or not at all)"
        )
    if problems:
        text += "; " + "; ".join(problems)
    attempts = tuple(a for o in bad for a in o.attempts)
    return Outcome(
        ref,
        state,
        cluster=bad[0].cluster,
        attempts=attempts,
        error=text,
        copies=(*undone, *bad),
    )
