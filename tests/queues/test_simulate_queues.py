"""``simulate --mode stream`` with queues: at every decision the running work counts toward its
queue, so no limit is passed at any moment of the replay, and freed capacity goes by weight."""

from __future__ import annotations

import random

from placer.simulate import Settings, simulate
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.simulate.conftest import Item
from tests.solver.conftest import cluster, fleet, node


def test_a_stream_never_passes_a_limit_at_any_moment() -> None:
    the_queues = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 8, "limit": 12, "overQuotaWeight": 1}),
        queue_doc("b", nvidia_com__gpu={"quota": 8, "limit": 24, "overQuotaWeight": 2}),
    )
    rng = random.Random(3)
    items = [
        Item(
            gpu_job(f"j{i}", rng.choice(["a", "b"]), 1, rng.choice([1, 2, 4])),
            arrival_s=float(rng.randint(0, 300)),
            duration_s=float(rng.randint(30, 200)),
        )
        for i in range(60)
    ]
    the_fleet = fleet(cluster("c0", *(node(f"n{i}") for i in range(2))), cluster("c1", node("m0")))
    run = simulate(items, the_fleet, Settings(mode="stream", queues=the_queues, time_limit=0.2))
    assert all(not record.problems for record in run.decisions)
    # replay the outcomes: at every start time, each queue's running GPUs within its limit
    spans = [
        (o.start_s, o.end_s, items[i].workload.labels["placer.dev/queue"], items[i].workload.gpus)
        for i, o in enumerate(run.outcomes)
        if o.start_s is not None
    ]
    assert len(spans) > 30
    for start, _, _, _ in spans:
        for queue, limit in (("a", 12), ("b", 24)):
            held = sum(
                g
                for s, e, q, g in spans
                if q == queue and s is not None and s <= start and (e is None or e > start)
            )
            assert held <= limit, (queue, start, held)
