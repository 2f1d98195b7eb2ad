"""The priority repair in a stream with reservations (``simulate --mode stream`` with queues and
``Settings.reservations``): a gang that started off its reservation gives its room to a
waiting higher priority; a gang that started on its own reservation keeps it (there a
reservation outranks priority, :meth:`placer.simulate.engine._Stream._reserved_starts`); and
the repair never starts a waiting gang on nodes reserved for another."""

from __future__ import annotations

from dataclasses import replace

from placer.model import Fleet, Workload
from placer.simulate import Run, Settings, simulate
from placer.solver.reservations import ANNOTATION_EXPECTED_RUNTIME, ReservationPolicy
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.simulate.conftest import Item
from tests.solver.conftest import cluster, fleet, node

QUEUES = queues(queue_doc("a", nvidia_com__gpu={"quota": 64}))
#: one reservation, for any gang that waits at all
RESERVE = ReservationPolicy(after_s=0.0, max_reservations=1)
TOOK_BACK = "replanned: its room went to a waiting workload of a higher priority"


def _job(name: str, gpus: int, priority: int = 0, expected: str | None = None) -> Workload:
    """One pod of ``gpus`` GPUs in queue ``a``; ``expected``: its expected-runtime annotation
    (else the stream expects its recorded run time)."""
    job = gpu_job(name, "a", 1, gpus, priority=priority)
    if expected is not None:
        job = replace(job, annotations={ANNOTATION_EXPECTED_RUNTIME: expected})
    return job


def _run(items: list[Item], the_fleet: Fleet) -> Run:
    settings = Settings(mode="stream", queues=QUEUES, reservations=RESERVE, time_limit=0.3)
    run = simulate(items, the_fleet, settings)
    assert not [p for d in run.decisions for p in d.problems]
    return run


def _start(run: Run, items: list[Item], name: str) -> float | None:
    (i,) = [k for k, item in enumerate(items) if item.workload.ref.name == name]
    return run.outcomes[i].start_s


def _outcomes(run: Run, items: list[Item], name: str) -> list[str]:
    (i,) = [k for k, item in enumerate(items) if item.workload.ref.name == name]
    return [r.outcome for r in run.reservations if r.workload == i]


def test_a_gang_that_started_off_its_reservation_gives_the_room_to_a_higher_priority() -> None:
    """Three 8-GPU nodes, full from t=0: ``x0`` ends at 100, ``x1`` at 300, ``x2`` at 80 though
    expected to run 1000 s. ``r`` (8 GPUs, priority 0) arrives at t=1 and gets x0's node
    from t=100; ``h`` (8 GPUs, priority 10, 500 s: no backfill) arrives at t=50. At t=80 x2's
    node frees: ``r``, decided first as a reservation's gang, takes it; ``h`` waits though it
    fits there — an inversion. Known answer: the repair gives ``h`` that room at t=80, ``r``
    waits again (its reservation says why), is planned again on x0's node and starts at 100."""
    items = [
        Item(_job("x0", 8), 0.0, 100.0),
        Item(_job("x1", 8), 0.0, 300.0),
        Item(_job("x2", 8, expected="1000"), 0.0, 80.0),
        Item(_job("r", 8), 1.0, 500.0),
        Item(_job("h", 8, priority=10), 50.0, 500.0),
    ]
    run = _run(items, fleet(cluster("c0", node("n0"), node("n1"), node("n2"))))
    assert (_start(run, items, "h"), _start(run, items, "r")) == (80.0, 100.0)
    assert _outcomes(run, items, "r") == [f"{TOOK_BACK} at t=80s", "placed"]
    assert (run.repair_started, run.repair_unstarted) == (1, 1)


def test_a_gang_that_started_on_its_own_reservation_keeps_it() -> None:
    """Two 8-GPU nodes, full from t=0: ``x0`` ends at 100, ``x1`` at 300. ``r`` (priority 0)
    arrives at t=1 and gets x0's node from t=100; ``h`` (priority 10, 500 s) arrives at t=50
    and is kept off that node (it would not end before the reservation's start). At t=100
    ``r`` starts on its reservation while ``h`` waits though it fits there: the one place a
    reservation outranks priority. The repair runs and leaves it: ``h`` starts at 300."""
    items = [
        Item(_job("x0", 8), 0.0, 100.0),
        Item(_job("x1", 8), 0.0, 300.0),
        Item(_job("r", 8), 1.0, 500.0),
        Item(_job("h", 8, priority=10), 50.0, 500.0),
    ]
    run = _run(items, fleet(cluster("c0", node("n0"), node("n1"))))
    assert (_start(run, items, "r"), _start(run, items, "h")) == (100.0, 300.0)
    assert _outcomes(run, items, "r") == ["placed"]
    assert run.repair_calls >= 1 and run.repair_unstarted == 0


def test_the_repair_never_starts_a_waiting_gang_on_another_gangs_reserved_nodes() -> None:
    """n0 (8 GPUs) runs ``x`` (4 GPUs) until t=100; n1 has 2 GPUs. ``r`` (8 GPUs) arrives at
    t=1 and gets n0 from t=100; ``h`` (4 GPUs, priority 10, 500 s) arrives at t=10 and is kept
    off n0's 4 free GPUs; ``low`` (2 GPUs, priority 0) starts on n1 at t=20 while ``h`` waits,
    so the repair runs: ``low``'s room is too small for ``h``, and n0's free GPUs are
    reserved. Known answer: ``h`` waits, ``r`` starts on n0 at t=100 as planned."""
    items = [
        Item(_job("x", 4), 0.0, 100.0),
        Item(_job("r", 8), 1.0, 500.0),
        Item(_job("h", 4, priority=10), 10.0, 500.0),
        Item(_job("low", 2), 20.0, 500.0),
    ]
    run = _run(items, fleet(cluster("c0", node("n0"), node("n1", gpus=2))))
    assert (_start(run, items, "low"), _start(run, items, "r")) == (20.0, 100.0)
    start = _start(run, items, "h")
    assert start is not None and start >= 600.0  # after r, on n0
    assert _outcomes(run, items, "r") == ["placed"]
    assert run.repair_calls >= 1 and run.repair_started == 0
