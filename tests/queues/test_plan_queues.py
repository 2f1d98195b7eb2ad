"""``placer plan --queues``: refusals for a queue in ``unplaced[].reasons`` (queue name and
``limit`` or ``quota``), the queues after the decision in the JSON, bad files as errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.cli import main

ROOT = Path(__file__).resolve().parents[2]
JOBS = str(ROOT / "deploy" / "examples" / "queues" / "jobs.yaml")
QUEUES = ROOT / "deploy" / "examples" / "queues" / "queues.yaml"
FLEET = str(ROOT / "clusters" / "demo.yaml")


def _plan(capsys: pytest.CaptureFixture[str], queues: str) -> tuple[int, dict[str, object]]:
    code = main(["plan", "-f", JOBS, "--snapshot", FLEET, "--queues", queues, "-o", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_plan_json_names_the_queue_and_quota_or_limit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tight = tmp_path / "queues.yaml"
    tight.write_text(QUEUES.read_text().replace("{quota: 8, limit: 16,", "{quota: 8, limit: 8,"))
    code, data = _plan(capsys, str(tight))
    assert code == 1
    unplaced = {u["workload"]["name"]: u["reasons"] for u in data["unplaced"]}  # type: ignore[attr-defined]
    for name in ("a-finetune", "a-sweep"):
        for text in unplaced[name].values():
            assert "queue team-a is at its limit for nvidia.com/gpu" in text
    for text in unplaced["c-typo"].values():
        assert "queue team-c (label placer.dev/queue) is not defined" in text
    rows = {row["name"]: row for row in data["queues"]}  # type: ignore[attr-defined]
    assert rows["team-a"]["resources"]["nvidia.com/gpu"]["allocated"] == 8
    assert rows["team-a"]["resources"]["nvidia.com/gpu"]["pending"] == 16


def test_plan_json_says_over_quota(capsys: pytest.CaptureFixture[str]) -> None:
    code, data = _plan(capsys, str(QUEUES))
    assert code == 1
    unplaced = {u["workload"]["name"]: u["reasons"] for u in data["unplaced"]}  # type: ignore[attr-defined]
    assert all("over the quota of queue team-a" in t for t in unplaced["a-finetune"].values())
    placed = {p["workload"]["name"]: p["cluster"] for p in data["placements"]}  # type: ignore[attr-defined]
    # team-b's cluster limit on east (8 GPUs) holds: one 8-GPU job at most there
    assert [n for n, c in placed.items() if c == "east" and n.startswith("b-")] in (
        [],
        ["b-train"],
        ["b-eval"],
    )


def test_plan_json_lists_each_queues_pending_work_in_its_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # no creationTimestamp in the file: the documents' order (a-finetune before a-sweep)
    code, data = _plan(capsys, str(QUEUES))
    assert code == 1
    order = {row["name"]: row["pendingOrder"] for row in data["queues"]}  # type: ignore[attr-defined]
    assert order == {
        "research": [],
        "team-a": ["default/a-finetune", "default/a-sweep"],
        "team-b": [],
    }


def test_a_bad_queues_file_is_an_error_naming_queue_and_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "queues.yaml"
    bad.write_text(QUEUES.read_text().replace("overQuotaWeight: 3", "overQuotaWeight: -3"))
    assert main(["plan", "-f", JOBS, "--snapshot", FLEET, "--queues", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"error: {bad} (document 3): queue team-b: spec.resources.nvidia.com/gpu" in err
    assert "overQuotaWeight: must be a number >= 0, got -3" in err
