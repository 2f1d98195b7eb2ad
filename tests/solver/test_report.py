"""The decision's JSON and text forms (``placer plan -o json|text``)."""

from __future__ import annotations

import json
from typing import Any

from placer.solver.report import bound_gap_text, decision_to_dict, render_text


def test_json_has_the_documented_shape(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a0", used=4)), kit.cluster("b", kit.node("b0"))
    )
    jobs = [
        kit.workload("fits", ("worker", 2, kit.pod(gpus=4, cpu=2))),
        kit.workload("huge", ("worker", 1, kit.pod(gpus=16))),
    ]
    data = decision_to_dict(decide(jobs, the_fleet))
    json.dumps(data)  # plain JSON types only
    assert list(data) == ["placements", "unplaced", "summary"]
    placement = data["placements"][0]
    assert placement["workload"] == {"kind": "JobSet", "namespace": "default", "name": "fits"}
    assert placement["cluster"] == "b"
    assert [set(p) for p in placement["pods"]] == [
        {"component", "instance", "index", "node", "devices"}
    ] * 2
    assert placement["requests"] == {"cpu": 4, "memory": 2 * 2**30, "nvidia.com/gpu": 8}
    assert data["unplaced"][0]["reasons"]["b"].startswith("no node can ever hold a pod")
    summary = data["summary"]
    assert {"solver", "mode", "status", "seconds", "workloads", "placed", "demand"} <= set(summary)
    assert summary["placed_requests"]["nvidia.com/gpu"] == 8
    assert summary["bound"]["node_lp_gpu"] == 8.0


def test_text_shows_placements_reasons_and_bound(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")))
    jobs = [
        kit.workload("fits", ("worker", 1, kit.pod(gpus=8))),
        kit.workload("late", ("worker", 1, kit.pod(gpus=1))),
    ]
    blocks = render_text(decide(jobs, the_fleet))
    table = blocks[0]
    assert isinstance(table, list)
    assert table[1][:4] == ["JobSet/default/fits", "a", "1", "8"]
    text = "\n".join(b for b in blocks if isinstance(b, str))
    assert "JobSet/default/late: not placed" in text
    assert "1 of 2 workload(s) placed, 8 GPUs of at most 8 (tightest bound)" in text


def test_a_pod_larger_than_every_node_is_refused_for_good(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a0", used=4), kit.node("a1", used=6)),
        kit.cluster("b", kit.node("b0", gpus=4, cpu=32)),
    )
    jobs = [
        kit.workload("huge", ("worker", 1, kit.pod(gpus=16))),
        kit.workload("fat", ("worker", 1, kit.pod(gpus=1, cpu=100))),
        kit.workload("later", ("worker", 1, kit.pod(gpus=6))),
    ]
    decision = decide(jobs, the_fleet)
    huge = kit.reasons(decision, "huge")
    # compared with what the nodes have allocatable, not what is free now: waiting never helps
    assert huge["a"] == (
        'no node can ever hold a pod of component "worker": it needs 16 nvidia.com/gpu, the '
        "largest node has 8 allocatable (waiting will not help; a larger node would)"
    )
    assert "it needs 16 nvidia.com/gpu, the largest node has 4 allocatable" in huge["b"]
    fat = kit.reasons(decision, "fat")
    assert "it needs 100 cpu, the largest node has 64 allocatable" in fat["a"]
    # 6 GPUs fit an 8-GPU node of a once its pods leave: a shortage of free room, for now
    later = kit.reasons(decision, "later")
    assert later["a"].startswith("no node with enough free nvidia.com/gpu")
    assert later["b"].startswith("no node can ever hold a pod")


def test_an_optimal_decision_below_its_bound_says_why(kit: Any, decide: Any) -> None:
    # two gangs of 3 x 4 GPUs on two 8-GPU nodes: one gang fits (12 GPUs); the LP bounds let
    # a gang split its pods fractionally and reach all 16 GPUs
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0"), kit.node("a1")))
    gang = ("worker", 3, kit.pod(gpus=4))
    decision = decide([kit.workload("one", gang), kit.workload("two", gang)], the_fleet)
    assert decision.summary.status == "optimal" and len(decision.placements) == 1
    text = "\n".join(b for b in render_text(decision) if isinstance(b, str))
    assert "12 GPUs of at most 16 (tightest bound)" in text
    line = next(x for x in text.splitlines() if x.startswith("Below the bound:"))
    assert "the bound is 16 GPUs (" in line and "LP relaxation" in line
    assert "24 GPUs were asked, more than fits all together" in line
    assert "the decision is optimal" in line and "the gap is the bound's slack" in line


def test_a_gap_with_everything_able_to_fit_does_not_say_too_much_was_asked() -> None:
    """A baseline that placed 8 of 28 GPUs when all 28 fit (bound 28): the gap is its own, not
    the demand's."""
    text = bound_gap_text(
        status="feasible", placed_gpus=8, bound_gpus=28, demand_gpus=28, bound_key="class_lp_gpu"
    )
    assert text is not None and "the bound is 28 GPUs" in text
    assert "more than fits" not in text and "a better placement could add" in text
    more = bound_gap_text(
        status="feasible", placed_gpus=8, bound_gpus=28, demand_gpus=30, bound_key="class_lp_gpu"
    )
    assert more is not None and "30 GPUs were asked, more than fits all together" in more


def test_a_decision_at_its_bound_says_nothing_more(kit: Any, decide: Any) -> None:
    the_fleet = kit.fleet(kit.cluster("a", kit.node("a0")))
    decision = decide([kit.workload("fits", ("worker", 2, kit.pod(gpus=4)))], the_fleet)
    assert not any(
        isinstance(b, str) and b.startswith("Below the bound") for b in render_text(decision)
    )


def test_the_bound_names_cover_every_bound_a_decision_reports() -> None:
    from placer.solver.bounds import BOUND_KEYS
    from placer.solver.report import BOUND_NAMES

    assert tuple(BOUND_NAMES) == BOUND_KEYS


def test_a_decision_past_its_limit_explains_without_trial_packings(kit: Any, decide: Any) -> None:
    # a limit far too short for anything (as on a busy machine): the explanation of what was
    # not placed makes no trial packings, and says so instead of claiming that it fits
    the_fleet = kit.fleet(
        kit.cluster("a", kit.node("a1", gpus=8), kit.node("a2", gpus=8)),
        kit.cluster("b", kit.node("b1", gpus=8)),
    )
    jobs = [kit.workload(f"j{i}", ("w", 2, kit.pod(gpus=2, cpu=4))) for i in range(12)]
    decision = decide(jobs, the_fleet, time_limit=1e-9)
    texts = [text for u in decision.unplaced for text in u.reasons.values()]
    assert texts
    assert all("fits, but" not in text for text in texts)
    assert any("was not checked (the decision's time limit ran out)" in text for text in texts)
