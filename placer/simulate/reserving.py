"""Reservations in the stream simulation: the bookkeeping around :mod:`placer.solver.reservations`.

The stream (:mod:`placer.simulate.engine`) calls a :class:`Reserver` at three points of every
decision epoch:

1. :meth:`Reserver.review` before deciding: reservations whose gang is gone are released,
   those the fleet changed under (:func:`~placer.solver.reservations.stale`) dropped to be
   planned again; the stream retries its whole queue when one was dropped (room came back
   for work kept off those nodes);
2. :meth:`Reserver.view` for the decision itself: reserved nodes tainted, each candidate
   tolerating the reservations it may backfill (:func:`~placer.solver.reservations.backfill_view`);
3. after it, :meth:`Reserver.placed` releases the reservations of the gangs it started and
   :meth:`Reserver.expire` drops those whose start came while their gang still waits (an
   estimate was too short); then :meth:`Reserver.reserve`: the waiting workloads that
   qualify, longest waiting first
   (highest priority first), get reservations up to the policy's maximum
   (:func:`~placer.solver.reservations.plan` on the running work's expected ends).

When the priority repair takes back a gang that started in this epoch off its reservation
(:mod:`placer.simulate.engine`), :meth:`Reserver.taken_back` records why on its released
reservation, and the gang may be planned again.

With ``ReservationPolicy.preempt_after_s``, :meth:`Reserver.forcing` names the reservations
due for eviction (the stream forces them, :mod:`placer.solver.reservation_preemption`),
:meth:`Reserver.forced` drops the others after one was forced (to be planned again on what
the eviction left) and :meth:`Reserver.wakeup` tells the stream when the next one becomes due.

Expected run times: the workload's annotation ``placer.dev/expected-runtime`` first; else, with
``Settings.trace_estimates``, the trace's recorded run time, multiplied by a factor drawn
uniformly from ``[1 − noise, 1 + noise]`` (``Settings.runtime_noise``), one per workload, from
the seed and the workload's input position (deterministic, independent of the order of events).

Every reservation is recorded (:class:`ReservationRecord`): who, where, the planned start, and
how it ended. Pure: no I/O.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from placer.model import Fleet, Placement, Workload
from placer.policy import PlacementPolicy
from placer.solver.reservation_preemption import deadline, due
from placer.solver.reservations import (
    Reservation,
    ReservationPolicy,
    RunningWork,
    backfill_view,
    expected_runtime,
    expired,
    horizon_view,
    plan,
    qualifies,
    stale,
)

__all__ = ["ReservationRecord", "Reserver", "runtime_estimates"]


@dataclass(frozen=True)
class ReservationRecord:
    """One reservation of a stream, from planning to its end."""

    #: the gang (input index).
    workload: int
    reservation: Reservation
    #: when it ended (``None``: still held when the stream ended).
    ended_s: float | None = None
    #: ``placed`` (its gang started), ``replanned: <why>`` or ``gone`` (the gang left the queue).
    outcome: str = "held"

    @property
    def cluster(self) -> str:
        return self.reservation.cluster

    @property
    def nodes(self) -> tuple[str, ...]:
        return self.reservation.nodes

    @property
    def planned_s(self) -> float:
        return self.reservation.planned_s

    @property
    def start_s(self) -> float:
        """The start it was planned for."""
        return self.reservation.start_s

    @property
    def reason(self) -> str:
        return self.reservation.reason


def runtime_estimates(
    workloads: Sequence[Workload],
    durations: Sequence[float | None],
    *,
    trace: bool,
    noise: float,
    seed: int,
) -> list[float | None]:
    """Each workload's expected run time (see the module docstring).

    Raises:
        ValueError: a workload's annotation is not a duration (named), or noise is not in [0, 1).
    """
    if not 0 <= noise < 1:
        raise ValueError(f"runtime noise must be in [0, 1), got {noise:g}")
    estimates: list[float | None] = []
    for index, (workload, duration) in enumerate(zip(workloads, durations, strict=True)):
        try:
            declared = expected_runtime(workload.annotations)
        except ValueError as error:
            raise ValueError(f"{workload.ref}: {error}") from None
        if declared is not None:
            estimates.append(declared)
        elif trace and duration is not None:
            factor = 1.0
            if noise:
                factor = random.Random(f"{seed}:{index}").uniform(1 - noise, 1 + noise)
            estimates.append(duration * factor)
        else:
            estimates.append(None)
    return estimates


class Reserver:
    """The reservations of one stream (see the module docstring)."""

    def __init__(
        self,
        workloads: Sequence[Workload],
        arrivals: Sequence[float],
        runtimes: Sequence[float | None],
        policy: ReservationPolicy,
        policies: Sequence[PlacementPolicy],
        seed: int,
    ) -> None:
        self.workloads = workloads
        self.arrivals = arrivals
        self.runtimes = runtimes
        self.policy = policy
        self.policies = policies
        self.seed = seed
        #: held now: gang index -> (reservation, its record's position).
        self.held: dict[int, tuple[Reservation, int]] = {}
        self.records: list[ReservationRecord] = []
        #: gangs planning found no start for, until work leaves or a reservation ends.
        self.hopeless: set[int] = set()
        #: a reservation ended without its gang placed since :meth:`loosened` was last asked.
        self._loosened = False

    def loosened(self) -> bool:
        """Whether a reservation ended without its gang placed since the last call: room it
        held came back, so work kept off it may fit now (the stream retries its queue)."""
        answer, self._loosened = self._loosened, False
        return answer

    @property
    def reservations(self) -> list[Reservation]:
        return [reservation for reservation, _ in self.held.values()]

    def review(self, fleet: Fleet, queue: Sequence[int], now: float) -> bool:
        """Before a decision: release reservations whose gang left the queue, drop those the
        fleet changed under; True when any was (room came back)."""
        waiting = set(queue)
        changed = False
        for index, (reservation, _) in list(self.held.items()):
            if index not in waiting:
                self._end(index, now, "gone")
                changed = True
                continue
            why = stale(reservation, fleet)
            if why is not None:
                self._end(index, now, f"replanned: {why}")
                changed = True
        return changed

    def expire(self, now: float) -> bool:
        """After a decision: drop the reservations whose start came and whose gang still
        waits (:func:`~placer.solver.reservations.expired`); True when any was."""
        changed = False
        for index, (reservation, _) in list(self.held.items()):
            why = expired(reservation, now, self.policy.grace_s)
            if why is not None:
                self._end(index, now, f"replanned: {why}")
                changed = True
        return changed

    def view(
        self, fleet: Fleet, indices: Sequence[int], now: float
    ) -> tuple[Fleet, list[Workload]]:
        """The fleet and the candidates' workloads a decision at ``now`` takes: reservations
        and the policy's drain horizon applied."""
        runtimes = [self.runtimes[i] for i in indices]
        viewed, workloads = backfill_view(
            fleet, [self.workloads[i] for i in indices], runtimes, self.reservations, now
        )
        return horizon_view(viewed, workloads, runtimes, self.policy)

    def forcing(self, now: float) -> list[int]:
        """The gangs whose reservation is to be forced now by eviction
        (:func:`~placer.solver.reservation_preemption.due`), in the order they were planned;
        none without ``ReservationPolicy.preempt_after_s``."""
        after = self.policy.preempt_after_s
        if after is None:
            return []
        return [
            index
            for index, (reservation, _) in sorted(self.held.items(), key=lambda kv: kv[1][1])
            if due(reservation, self.arrivals[index], now, after, self.policy.preempt_slack_s)
        ]

    def forced(self, now: float) -> None:
        """A reservation was forced at ``now``: the others are dropped, to be planned again on
        the fleet the eviction left (the stream plans them at once)."""
        for index in list(self.held):
            self._end(index, now, f"replanned: a reservation was forced at t={now:g}s")

    def wakeup(self, now: float) -> float | None:
        """The next time after ``now`` a held reservation becomes due for eviction (the stream
        decides then), or ``None``."""
        after = self.policy.preempt_after_s
        if after is None:
            return None
        slack = self.policy.preempt_slack_s
        times = [
            deadline(reservation, self.arrivals[index], after, slack)
            for index, (reservation, _) in self.held.items()
        ]
        return min((t for t in times if now < t < math.inf), default=None)

    def due(self, now: float) -> bool:
        """Whether a held reservation's start has come (its gang should be decided now)."""
        return any(r.start_s <= now for r, _ in self.held.values())

    def placed(self, indices: set[int], now: float) -> None:
        """The gangs ``indices`` started: their reservations are released. One that started
        after its planned start (the stream decides at epochs) may run past the start of
        reservations planned after it in its cluster, which were planned around its expected
        end: those are planned again."""
        for index in sorted(indices & set(self.held), key=lambda i: self.held[i][1]):
            if index not in self.held:
                continue
            reservation, position = self.held[index]
            self._end(index, now, "placed")
            if now <= reservation.start_s:
                continue
            for later, (other, at) in list(self.held.items()):
                if at > position and other.cluster == reservation.cluster:
                    why = f"replanned: {reservation.workload} started late, at t={now:g}s"
                    self._end(later, now, why)

    def taken_back(self, index: int, now: float, why: str) -> None:
        """Gang ``index``, started at ``now`` and its reservation released as placed, waits
        again (the priority repair gave its room to a higher priority): that record says so,
        and the gang may be planned again."""
        for position in range(len(self.records) - 1, -1, -1):
            record = self.records[position]
            if record.workload == index and record.outcome == "placed" and record.ended_s == now:
                self.records[position] = replace(record, outcome=f"replanned: {why}")
                break
        self.hopeless.discard(index)

    def freed(self) -> None:
        """Running work left: gangs found hopeless may find a start now."""
        self.hopeless.clear()

    def reserve(
        self,
        fleet: Fleet,
        queue: Sequence[int],
        running: Mapping[int, Placement],
        starts: Mapping[int, float],
        now: float,
    ) -> bool:
        """Plan reservations for the waiting workloads that qualify; True when one was made."""
        room = self.policy.max_reservations - len(self.held)
        if room <= 0:
            return False
        ranked = sorted(
            (i for i in queue if i not in self.held and i not in self.hopeless),
            key=lambda i: (-self.workloads[i].priority, self.arrivals[i], i),
        )
        work: list[RunningWork] | None = None
        made = False
        for index in ranked:
            if room <= 0:
                break
            reason = qualifies(self.workloads[index], now - self.arrivals[index], self.policy)
            if reason is None:
                continue
            if work is None:
                work = [RunningWork(p, self._end_of(i, starts)) for i, p in running.items()]
            # planned on the fleet as the gang's decisions will see it (the drain horizon's
            # cluster only for a gang expected to end within the horizon)
            viewed, (workload,) = horizon_view(
                fleet, [self.workloads[index]], [self.runtimes[index]], self.policy
            )
            reservation = plan(
                workload,
                viewed,
                work,
                now,
                reason=reason,
                runtime_s=self.runtimes[index],
                held=self.reservations,
                policies=self.policies,
                policy=self.policy,
                seed=self.seed,
            )
            if reservation is None:
                self.hopeless.add(index)
                continue
            self.held[index] = (reservation, len(self.records))
            self.records.append(ReservationRecord(index, reservation))
            room -= 1
            made = True
        return made

    def _end_of(self, index: int, starts: Mapping[int, float]) -> float | None:
        runtime = self.runtimes[index]
        return None if runtime is None else starts[index] + runtime

    def _end(self, index: int, now: float, outcome: str) -> None:
        _, position = self.held.pop(index)
        self._loosened = self._loosened or outcome != "placed"
        self.hopeless.clear()  # its nodes are no longer held: a start may be found now
        record = self.records[position]
        self.records[position] = replace(record, ended_s=now, outcome=outcome)
