"""The controller's decisions about one hub object or one member copy, as pure functions.

Everything here is a function of data the controller already holds — the hub object, its
placement record, the member copies seen, the members' health, the clock — and returns what to
do as small action values. The I/O (patches, applies, deletes, Events) happens in
:mod:`placer.controller.reconciler` and :mod:`placer.controller.actions`, which carry the actions
out. Tests call these functions directly.

Rules for a hub object (:func:`reconcile`):

1. **Deleting** (``deletionTimestamp`` set): once every reachable member's copies are listed,
   delete every copy on a reachable member, then remove placer's finalizer (nothing more once
   it is gone: another finalizer may keep the object a while). Copies on members that cannot
   be listed are left to the stale-copy rule.
2. **No record**: nothing happens while a copy may be on a member whose copies are not
   listed (:func:`blocking_members`): on any such member for an object listed when this leader
   started (an earlier one may have dispatched it and died before recording it), only on the
   members this leader dispatched it to otherwise. When such a member cannot be listed (it
   is unreachable, refuses placer's credentials, forbids listing the kind) the object *waits*
   (a condition and an Event say for which member and why) until it can be listed again, or
   until it has been out of sight for the grace period (then it is given up on, as failover
   does). Other objects go on without that member. If copies of this object exist on
   reachable members (a crash after an apply, or a lost member came back before the object was
   placed again), *adopt* one — the first in fleet order — and delete the others; otherwise the
   object waits for a placement cycle (if it opted in). A copy *parked* by an eviction
   (suspended, annotated ``placer.dev/preempted-by``: :func:`placer.dispatch.eviction.
   is_parked`) is never adopted: the object waits for a cycle, which resumes that copy when it
   places the object on its member again, or deletes it before placing the object elsewhere.
3. **Recorded on cluster C**:

   * copies on other reachable members are stale: *delete* them (the member that was lost
     came back after the object was placed elsewhere);
   * C is no longer a member, or unreachable for longer than the grace period → *fail over*:
     forget the record, so the next cycle places it elsewhere (the old copy becomes stale);
   * C reachable and its copies listed: no copy and not finished → *place* it again (the copy
     was deleted on the member, or never landed: the hub is the source of truth); a copy →
     *confirm* an unconfirmed record (a crash between the two record writes), *re-apply* to C
     when the hub object's generation moved past the one applied (a user edited it: the copy
     follows, it does not move) or a label of it is missing or different on the copy (a user
     labelled it), *mirror* its status and phase when they differ.

Rules for a workload **spread** over clusters (its record names every copy:
:mod:`placer.controller.spread`), instead of rule 3:

* a copy's cluster no longer a member, or unreachable for longer than the grace period → *fail
  over*: the record is forgotten and the next cycle divides the workload again over the
  clusters it can use — the copies still there are applied again with their new share, the
  lost cluster's copy is stale (deleted when it comes back), so no replica runs twice;
* copies on reachable members not in the record are stale: *delete* them;
* while a copy's cluster is unreachable (within the grace period) or its copies not listed,
  nothing else happens;
* a copy gone (and the workload not finished), or the hub object edited (a new generation) →
  *place* it again: divided again and every copy applied again (a copy is not edited alone:
  its share may change);
* otherwise *confirm* an unconfirmed record, and *mirror* the copies' **aggregated** status
  and phase when they differ.

A spread workload's copies without a record (a crash between the applies and the record, or
after a failover) are not adopted one by one: the object is *placed* again, and its copies
applied over.

Rule for a new member of a co-placement group (:func:`group_clusters`): a pending object whose
``placer.dev/group`` already has a member placed on a reachable cluster is pinned there, so a
group whose members arrive in different cycles still ends up in one cluster (as ``placer
submit`` does with existing copies).

Rule for a member copy (:func:`is_stale`): a copy marked by this hub is stale when its hub
object is gone (by uid) or records another cluster. Staleness is only judged once the hub's
objects of that kind are listed, and never for an object with work in flight.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from placer.backoff import doubling
from placer.controller.records import (
    CONDITION,
    Record,
    condition_of,
    copied_labels,
    has_finalizer,
    hub_uid_of,
    record_of,
)
from placer.dispatch.eviction import is_parked
from placer.dispatch.spread import spread_copies_of
from placer.model import LABEL_GROUP
from placer.objects import generation_of, is_deleting, labels_of, name_key

__all__ = [
    "Action",
    "Adopt",
    "Backoff",
    "Confirm",
    "DeleteCopy",
    "Failover",
    "Finalize",
    "Health",
    "Mirror",
    "MirrorSpread",
    "Place",
    "Reapply",
    "Wait",
    "blocking_members",
    "group_clusters",
    "is_stale",
    "labels_behind",
    "mirror_differs",
    "reconcile",
]


@dataclass(frozen=True)
class Health:
    """A member cluster as the controller sees it (for the kind of the object at hand)."""

    #: whether its capacity could be gathered (it answers placer's credentials).
    reachable: bool = True
    #: when reachability last changed (seconds, the controller's clock).
    since: float = 0.0
    #: whether the member's copies (of the kind at hand) have been listed.
    synced: bool = False
    #: why its copies (of the kind at hand) cannot be listed now: unreachable, 401, 403...
    #: (``""`` when they can, or while the first list is under way).
    problem: str = ""
    #: since when ``problem`` holds (the controller's clock).
    problem_since: float = 0.0

    def out_of_sight_for(self, now: float) -> float:
        """Seconds this member has been unreachable or unlistable (0 when it is neither)."""
        if not self.reachable:
            return now - self.since
        if self.problem:
            return now - self.problem_since
        return 0.0


@dataclass(frozen=True)
class Place:
    """Wait for the next placement cycle."""

    reason: str = ""


@dataclass(frozen=True)
class Reapply:
    """Apply the changed hub object to ``cluster``, where its copy is."""

    cluster: str
    reason: str


@dataclass(frozen=True)
class Confirm:
    """The copy exists on ``cluster``: set ``Placed=True``."""

    cluster: str


@dataclass(frozen=True)
class Adopt:
    """Record ``cluster``, whose existing copy becomes the placement."""

    cluster: str


@dataclass(frozen=True)
class Failover:
    """Forget the placement on ``cluster`` so that a cycle places the object elsewhere."""

    cluster: str
    reason: str
    #: a copy of a spread workload: the cycle divides it again over the other clusters.
    spread: bool = False


@dataclass(frozen=True)
class Wait:
    """Not placed yet: a copy may be on these members, whose copies cannot be listed.

    ``blockers`` are ``(cluster, problem)`` pairs.
    """

    blockers: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class DeleteCopy:
    """Delete the copy on ``cluster`` (``reason``: ``stale``, or why else, for the log)."""

    cluster: str
    reason: str = "stale"


@dataclass(frozen=True)
class Finalize:
    """Remove placer's finalizer (every reachable copy is gone)."""


@dataclass(frozen=True)
class Mirror:
    """Copy the member's status (and phase) to the hub object."""

    cluster: str


@dataclass(frozen=True)
class MirrorSpread:
    """Write the spread copies' aggregated status (and phase) to the hub object."""

    status: Mapping[str, Any] = field(default_factory=dict)
    phase: str = ""


Action = (
    Place
    | Reapply
    | Confirm
    | Adopt
    | Failover
    | DeleteCopy
    | Finalize
    | Mirror
    | MirrorSpread
    | Wait
)


def reconcile(
    obj: Mapping[str, Any],
    *,
    opted_in: bool,
    copies: Mapping[str, Mapping[str, Any]],
    health: Mapping[str, Health],
    members: Sequence[str],
    now: float,
    grace_period: float,
    copy_phase: Mapping[str, str] | None = None,
    suspects: Collection[str] | None = None,
    aggregate: tuple[Mapping[str, Any], str] | None = None,
) -> list[Action]:
    """What to do about one hub object (see the module docstring).

    Args:
        obj: the hub object as last seen.
        opted_in: whether it asks to be placed (queue label or a hub policy selects it).
        copies: its copies by member cluster (only members whose copies are listed).
        health: every member's health.
        members: member cluster names in fleet order.
        now: the controller's clock.
        grace_period: seconds a member may be unreachable before failover.
        copy_phase: the phase of each copy through its definition (for mirroring).
        suspects: the members where a copy of an unrecorded object may be without the
            controller having seen it (those it dispatched the object to); ``None`` for any
            member (an earlier leader may have dispatched it).
        aggregate: a spread workload's copies' aggregated status and its phase (for
            mirroring; :mod:`placer.controller.spread`).
    """
    reachable = {c for c in members if health.get(c, Health()).reachable}
    if is_deleting(obj):
        actions: list[Action] = [
            DeleteCopy(c, reason="its hub object is being deleted")
            for c in members
            if c in copies and c in reachable
        ]
        if actions:
            return actions
        if not has_finalizer(obj):
            return []
        states = {c: health.get(c, Health()) for c in reachable}
        listing = [c for c, h in states.items() if not h.synced and not h.problem]
        return [] if listing else [Finalize()]
    record = record_of(obj)
    if record is None:
        blocked = blocking_members(health, members, suspects, now, grace_period)
        if blocked:  # a copy may exist where we cannot look (yet)
            problems = tuple((c, health[c].problem) for c in blocked if health[c].problem)
            return [Wait(problems)] if problems and opted_in else []
        present = [c for c in members if c in copies and c in reachable]
        if present and any(spread_copies_of(copies[c]) is not None for c in present):
            # a spread workload's copies: divided again and applied over, not adopted
            return (
                [Place("its spread copies have no record; dividing it again")] if opted_in else []
            )
        running = [c for c in present if not is_parked(copies[c])]
        if running:
            return [Adopt(running[0]), *(DeleteCopy(c) for c in present if c != running[0])]
        if present:  # parked by an eviction: the cycle resumes or replaces them
            return [Place("it was evicted; it waits to be placed again")] if opted_in else []
        return [Place()] if opted_in else []
    if record.copies:
        return _recorded_spread(obj, record, copies, health, members, now, grace_period, aggregate)
    return _recorded(obj, record, copies, health, members, now, grace_period, copy_phase or {})


def _recorded_spread(
    obj: Mapping[str, Any],
    record: Record,
    copies: Mapping[str, Mapping[str, Any]],
    health: Mapping[str, Health],
    members: Sequence[str],
    now: float,
    grace_period: float,
    aggregate: tuple[Mapping[str, Any], str] | None,
) -> list[Action]:
    """Rules for a spread workload's record (see the module docstring)."""
    lost: list[tuple[str, str]] = []
    waiting = False
    for cluster in record.copies:
        state = health.get(cluster, Health())
        if cluster not in members:
            lost.append((cluster, f"cluster {cluster} is no longer a member of the fleet"))
        elif not state.reachable:
            lost_for = now - state.since
            if lost_for >= grace_period:
                lost.append(
                    (
                        cluster,
                        f"cluster {cluster} has been unreachable for {_duration(lost_for)} "
                        f"(grace period {_duration(grace_period)})",
                    )
                )
            else:
                waiting = True
        elif not state.synced:
            waiting = True
    if lost:
        reason = "; ".join(text for _, text in lost)
        return [Failover(lost[0][0], reason, spread=True)]
    if waiting:
        return []
    stale: list[Action] = [
        DeleteCopy(c)
        for c in members
        if c not in record.copies and c in copies and health.get(c, Health()).reachable
    ]
    gone = [c for c in record.copies if c not in copies]
    if gone:
        if record.terminal:
            return stale
        return [*stale, Place(f"its copy on {', '.join(gone)} is gone; dividing it again")]
    generation = generation_of(obj)
    applied = (condition_of(obj) or {}).get("observedGeneration")
    if isinstance(generation, int) and isinstance(applied, int) and generation > applied:
        return [*stale, Place(f"the hub object changed (generation {generation}); dividing again")]
    actions: list[Action] = list(stale)
    if not record.confirmed:
        actions.append(Confirm(record.cluster))
    elif aggregate is not None and mirror_differs(
        obj, {"status": aggregate[0]}, record, aggregate[1]
    ):
        actions.append(MirrorSpread(aggregate[0], aggregate[1]))
    return actions


def _recorded(
    obj: Mapping[str, Any],
    record: Record,
    copies: Mapping[str, Mapping[str, Any]],
    health: Mapping[str, Health],
    members: Sequence[str],
    now: float,
    grace_period: float,
    copy_phase: Mapping[str, str],
) -> list[Action]:
    cluster = record.cluster
    if cluster not in members:
        return [Failover(cluster, f"cluster {cluster} is no longer a member of the fleet")]
    state = health.get(cluster, Health())
    if not state.reachable:
        lost_for = now - state.since
        if lost_for >= grace_period:
            return [
                Failover(
                    cluster,
                    f"cluster {cluster} has been unreachable for {_duration(lost_for)} "
                    f"(grace period {_duration(grace_period)})",
                )
            ]
        return []
    if not state.synced:
        return []
    stale: list[Action] = [
        DeleteCopy(c)
        for c in members
        if c != cluster and c in copies and health.get(c, Health()).reachable
    ]
    copy = copies.get(cluster)
    if copy is None:
        if record.terminal:
            return stale
        return [*stale, Place(f"its copy on cluster {cluster} is gone; placing it again")]
    actions: list[Action] = list(stale)
    generation = generation_of(obj)
    applied = (condition_of(obj) or {}).get("observedGeneration")
    if not record.confirmed:
        actions.append(Confirm(cluster))
    elif isinstance(generation, int) and isinstance(applied, int) and generation > applied:
        actions.append(Reapply(cluster, f"the hub object changed (generation {generation})"))
    elif labels_behind(obj, copy):
        actions.append(Reapply(cluster, "the hub object's labels changed"))
    elif mirror_differs(obj, copy, record, copy_phase.get(cluster, "")):
        actions.append(Mirror(cluster))
    return actions


def blocking_members(
    health: Mapping[str, Health],
    members: Sequence[str],
    suspects: Collection[str] | None,
    now: float,
    grace_period: float,
) -> list[str]:
    """The members an unrecorded object must wait for (see the module docstring, rule 2).

    A member whose copies are listed now rules a copy there in or out. Otherwise a copy can
    only be there if the object was dispatched there: to one of ``suspects`` by this leader
    (``None``: possibly anywhere, by an earlier leader). Copies listed since this leader
    started, though no longer current (the member stopped answering or refuses), still rule
    out what an earlier leader did, not what this one did since. A suspect member out of sight
    for the grace period is given up on, as failover does.
    """
    blocked = []
    for cluster in members:
        state = health.get(cluster, Health())
        if state.synced and state.reachable and not state.problem:
            continue
        if suspects is None:
            if state.synced:
                continue
        elif cluster not in suspects:
            continue
        lost = not state.reachable or bool(state.problem)
        if lost and state.out_of_sight_for(now) >= grace_period:
            continue
        blocked.append(cluster)
    return blocked


def group_clusters(
    objects: Sequence[Mapping[str, Any]], reachable: Sequence[str]
) -> dict[str, str]:
    """``placer.dev/group`` value -> the cluster where a member of that group is recorded.

    Only live objects recorded on a reachable member count (a group whose cluster was lost is
    placed again as a whole); when members disagree (a pin moved one), the first in name order
    wins, so the answer does not depend on the order objects were seen.
    """
    usable = set(reachable)
    found: dict[str, tuple[tuple[str, str], str]] = {}
    for obj in objects:
        if is_deleting(obj):
            continue
        group = labels_of(obj).get(LABEL_GROUP)
        record = record_of(obj)
        if not group or record is None or record.cluster not in usable:
            continue
        key = name_key(obj)
        if group not in found or key < found[group][0]:
            found[group] = (key, record.cluster)
    return {group: cluster for group, (_, cluster) in found.items()}


def labels_behind(obj: Mapping[str, Any], copy: Mapping[str, Any]) -> bool:
    """Whether a label of the hub object is missing on its copy or has another value there (a
    user labelled it — a queue, a team — which changes no generation: the copy follows, as it
    follows an edit), or a label the copy was given from the hub (:func:`copied_labels`) is
    gone from the hub but still on the copy (re-applying without it removes it: placer's
    server-side apply owns it). Labels the member's frameworks or people put on the copy are
    not looked at. A copy not cached whole yet (no ``spec``: just written) is not judged."""
    if not copy.get("spec"):
        return False
    theirs, ours = labels_of(copy), labels_of(obj)
    if any(theirs.get(key) != value for key, value in ours.items()):
        return True
    return any(key in theirs and key not in ours for key in copied_labels(copy))


def mirror_differs(
    obj: Mapping[str, Any], copy: Mapping[str, Any], record: Record, phase: str
) -> bool:
    """Whether the hub object's mirrored status or phase is behind the copy's."""
    if record.phase != phase:
        return True
    hub = obj.get("status")
    hub = hub if isinstance(hub, Mapping) else {}
    member = copy.get("status")
    member = member if isinstance(member, Mapping) else {}
    hub_rest = {k: v for k, v in hub.items() if k != "conditions"}
    member_rest = {k: v for k, v in member.items() if k != "conditions"}
    if hub_rest != member_rest:
        return True
    hub_conditions = [c for c in hub.get("conditions") or () if _type(c) != CONDITION]
    member_conditions = [c for c in member.get("conditions") or () if _type(c) != CONDITION]
    return bool(hub_conditions != member_conditions)


def _type(condition: object) -> object:
    return condition.get("type") if isinstance(condition, Mapping) else None


def is_stale(
    copy: Mapping[str, Any],
    cluster: str,
    hub_objects_by_uid: Mapping[str, Mapping[str, Any]],
) -> bool:
    """Whether a member copy marked by this hub must go (see the module docstring).

    Args:
        copy: the member copy.
        cluster: the member it is on.
        hub_objects_by_uid: the hub objects of the copy's kind, by uid (complete list).
    """
    uid = hub_uid_of(copy)
    if not uid:
        return False
    obj = hub_objects_by_uid.get(uid)
    if obj is None:
        return True
    record = record_of(obj)
    return record is not None and cluster not in record.clusters


def _duration(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 120:
        return f"{seconds:.0f}s"
    return f"{seconds / 60:.0f}m"


@dataclass
class _Attempt:
    failures: int
    last: float
    #: capacity epoch of the attempt (``None``: it did not fail for want of room).
    epoch: int | None


@dataclass
class Backoff:
    """When unschedulable workloads may be tried again (pure bookkeeping, no clock of its own).

    A workload that did not fit is retried once its backoff (``initial · 2^(n-1)``, at most
    ``maximum``) has passed **and** capacity changed since the attempt (``epoch`` moved: more
    room gathered, a member back, a placed workload gone, a policy or definition changed) — or
    after ``maximum`` anyway. An attempt that did not fail for want of room (another placer
    process held the workload's claim) waits for its backoff only. A changed workload (new
    resourceVersion) starts over.
    """

    initial: float = 5.0
    maximum: float = 300.0
    _attempts: dict[Any, _Attempt] = field(default_factory=dict)

    def failed(self, key: Any, now: float, epoch: int, *, room: bool = True) -> float:
        """Record a failed attempt (``room=False``: not for want of room); returns the
        earliest next attempt time."""
        previous = self._attempts.get(key)
        failures = previous.failures + 1 if previous else 1
        self._attempts[key] = _Attempt(failures, now, epoch if room else None)
        return now + self.delay(failures)

    def delay(self, failures: int) -> float:
        return doubling(failures, self.initial, self.maximum)

    def forget(self, key: Any) -> None:
        """The workload was placed, changed or deleted."""
        self._attempts.pop(key, None)

    def ready(self, key: Any, now: float, epoch: int) -> bool:
        """Whether ``key`` may be tried in a cycle at ``now`` with capacity ``epoch``."""
        attempt = self._attempts.get(key)
        if attempt is None:
            return True
        waited = now - attempt.last
        if waited >= self.maximum:
            return True
        return waited >= self.delay(attempt.failures) and epoch != attempt.epoch

    def next_time(self, key: Any, epoch: int) -> float | None:
        """When ``key`` becomes ready at the latest (``None`` when it is ready now)."""
        attempt = self._attempts.get(key)
        if attempt is None:
            return None
        if epoch != attempt.epoch:
            return attempt.last + self.delay(attempt.failures)
        return attempt.last + self.maximum

    def waiting(self) -> int:
        return len(self._attempts)

    def __contains__(self, key: object) -> bool:
        return key in self._attempts
