"""Fair-share rebalancing (:mod:`placer.solver.rebalance`): the over-quota split it aims at,
and the evictions it makes in a stream on hand-built fleets with a known answer."""

from __future__ import annotations

import json
from typing import Any

import pytest

from placer.cli import main
from placer.queues import QueueSet
from placer.simulate import Settings, simulate
from placer.simulate.engine import Run
from placer.solver.rebalance import REBALANCE, RebalancePolicy, over_quota_split, water_fill
from tests.queues.conftest import gpu_job, queue_doc, queues
from tests.simulate.conftest import Item
from tests.solver.conftest import cluster, fleet, node


def two(weight_a: int = 1, weight_b: int = 1) -> QueueSet:
    """Queues a and b, nothing deserved (every GPU they use is over quota)."""
    return queues(
        queue_doc("a", nvidia_com__gpu={"quota": 0, "overQuotaWeight": weight_a}),
        queue_doc("b", nvidia_com__gpu={"quota": 0, "overQuotaWeight": weight_b}),
    )


def test_water_fill_divides_by_weight_and_caps_by_what_each_asks() -> None:
    assert water_fill(16, {"a": 16, "b": 16}, {"a": 1, "b": 3}) == {"a": 4.0, "b": 12.0}
    # b asks for 2 only: a gets what b leaves
    assert water_fill(16, {"a": 16, "b": 2}, {"a": 1, "b": 3}) == {"a": 14.0, "b": 2.0}


def test_the_split_counts_leaf_queues_whose_demand_passes_their_quota() -> None:
    the_queues = queues(
        queue_doc("a", nvidia_com__gpu={"quota": 4, "overQuotaWeight": 1}),
        queue_doc("b", nvidia_com__gpu={"quota": 0, "overQuotaWeight": 3}),
        queue_doc("c", nvidia_com__gpu={"quota": 8}),
    )
    # a holds 12 (8 over its quota), b waits for 8; c holds 2 of its 8 and asks no more
    split = over_quota_split(the_queues, {"a": 12, "b": 0, "c": 2}, {"b": 8})
    assert split is not None
    assert split.pool == 8 and dict(split.over) == {"a": 8, "b": 0}
    assert dict(split.target) == {"a": 2.0, "b": 6.0}
    assert split.gap("a") == 0.75 and split.gap("b") == -0.75 and split.worst == 0.75
    # one queue alone, or nothing over quota: no split
    assert over_quota_split(the_queues, {"a": 12}, {}) is None
    assert over_quota_split(the_queues, {"a": 4}, {"b": 8}) is None


def test_a_bad_policy_is_refused() -> None:
    with pytest.raises(ValueError, match="tolerance"):
        RebalancePolicy(tolerance=1.5)
    with pytest.raises(ValueError, match="max_evictions"):
        RebalancePolicy(max_evictions=0)


def _stream(
    the_queues: QueueSet,
    policy: RebalancePolicy | None,
    b_jobs: int = 2,
    a_priority: int | None = None,
    protect: bool = False,
) -> tuple[list[Item], Run]:
    """a's four 4-GPU jobs start at t = 0, 1, 2, 3 on 16 GPUs (one cluster, two 8-GPU nodes)
    and run for 1000 s; b's ``b_jobs`` 4-GPU jobs arrive at t = 10 and run for 100 s."""
    items = []
    for i in range(4):
        job = gpu_job(f"a{i}", "a", 1, 4, priority=a_priority, protected=protect)
        items.append(Item(job, arrival_s=float(i), duration_s=1000.0))
    items += [
        Item(gpu_job(f"b{i}", "b", 1, 4), arrival_s=10.0, duration_s=100.0) for i in range(b_jobs)
    ]
    settings = Settings(
        mode="stream", queues=the_queues, preemption=True, rebalance=policy, time_limit=0.2
    )
    return items, simulate(items, fleet(cluster("c0", node("n0"), node("n1"))), settings)


def _names(items: list[Item], run: Run) -> list[list[str]]:
    """Each eviction's victims by name, in order."""
    return [[items[i].workload.ref.name for i, _ in r.victims] for r in run.preemptions]


def test_rebalancing_evicts_the_youngest_over_share_work_until_the_weights_split() -> None:
    """Equal weights, nothing deserved: a holds all 16 GPUs, b asks for 8. The fair split is
    8 and 8; at b's arrival two moves evict a's two youngest jobs (the least work lost) and
    start b's two jobs at once. Reclaim alone does nothing (b is not in quota)."""
    items, run = _stream(two(), RebalancePolicy(tolerance=0.05))
    starts = {items[i].workload.ref.name: o.start_s for i, o in enumerate(run.outcomes)}
    assert starts["b0"] == 10.0 and starts["b1"] == 10.0
    assert _names(items, run) == [["a3"], ["a2"]]
    assert all(reason == REBALANCE for r in run.preemptions for _, reason in r.victims)
    assert [r.time_s for r in run.preemptions] == [10.0, 10.0]
    # the victims lose what they had run (4 GPUs for 7 and 8 s), and start over when b leaves
    assert [r.lost_gpu_seconds for r in run.preemptions] == [28.0, 32.0]
    assert starts["a3"] == 110.0 and starts["a2"] == 110.0
    assert all(not d.problems for d in run.decisions)
    _, without = _stream(two(), None)
    assert without.preemptions == ()


def test_the_weights_decide_how_far_it_goes() -> None:
    """Weights 1 (a) and 3 (b): b's fair share of 16 GPUs is 12, so three of a's jobs go."""
    items, run = _stream(two(1, 3), RebalancePolicy(tolerance=0.05), b_jobs=4)
    assert _names(items, run) == [["a3"], ["a2"], ["a1"]]
    started = [items[i].workload.ref.name for i, o in enumerate(run.outcomes) if o.start_s == 10]
    assert sorted(started) == ["b0", "b1", "b2"]


def test_a_gap_within_the_tolerance_is_left_alone() -> None:
    """Tolerance 0.3 of the pool: the first move takes the gap from 0.5 to 0.25, within it."""
    items, run = _stream(two(), RebalancePolicy(tolerance=0.3))
    assert _names(items, run) == [["a3"]]


def test_only_young_enough_work_is_evicted() -> None:
    """max_age_s 7.5: at t = 10 only a3 (started at 3) is young enough."""
    items, run = _stream(two(), RebalancePolicy(tolerance=0.05, max_age_s=7.5))
    assert _names(items, run) == [["a3"]]
    _, none = _stream(two(), RebalancePolicy(tolerance=0.05, max_age_s=5.0))
    assert none.preemptions == ()


def test_higher_priorities_and_protected_work_are_never_evicted() -> None:
    _, higher = _stream(two(), RebalancePolicy(), a_priority=10)
    assert higher.preemptions == ()
    _, protected = _stream(two(), RebalancePolicy(), protect=True)
    assert protected.preemptions == ()


EXAMPLE = [
    *["--snapshot", "clusters/demo.yaml", "--workloads", "deploy/examples/queues/shares.yaml"],
    *["--queues", "deploy/examples/queues/queues.yaml", "--mode", "stream"],
]


def _cli(capsys: Any, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_simulate_rebalance_evicts_the_early_over_quota_job_for_the_heavier_weight(
    capsys: Any,
) -> None:
    """The documented example: team-a (weight 1) holds 8 GPUs over its quota when team-b
    (weight 3) asks for more than its quota; with --rebalance 0.1 team-a's youngest Job goes
    for team-b's, without it nothing is evicted."""
    code, raw, _ = _cli(capsys, *EXAMPLE, "--allow-preemption", "--rebalance", "0.1", "-o", "json")
    assert code == 0
    (eviction,) = json.loads(raw)["runs"][0]["preemptions"]
    assert eviction["preemptor"].startswith("Job/default/b-late-")
    assert eviction["victims"] == [{"workload": "Job/default/a-early-3", "reason": REBALANCE}]
    code, raw, _ = _cli(capsys, *EXAMPLE, "--allow-preemption", "-o", "json")
    assert code == 0 and json.loads(raw)["runs"][0]["preemptions"] == []


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--rebalance", "0.1"], "--rebalance goes with --allow-preemption"),
        (["--allow-preemption", "--rebalance", "1.5"], "--rebalance 1.5"),
        (["--allow-preemption", "--rebalance-max-age", "60"], "goes with --rebalance"),
    ],
)
def test_rebalance_options_are_checked(capsys: Any, extra: list[str], message: str) -> None:
    code, _, err = _cli(capsys, *EXAMPLE, *extra)
    assert code != 0 and message in err
