"""The decision's JSON and text forms (``placer plan -o json|text``)."""

from __future__ import annotations

import json
from typing import Any

from placer.solver.report import decision_to_dict, render_text


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
    assert data["unplaced"][0]["reasons"]["b"].startswith("no node with enough free nvidia.com/gpu")
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
