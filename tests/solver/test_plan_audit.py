"""The audit's cases on ``placer plan``: a tight elastic bound and a proven empty answer."""

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


def test_nothing_placeable_under_a_zero_bound_is_optimal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 8-GPU pods: no demo node has 8 free, the bound is 0, so placing nothing is proven best
    pytest.importorskip("placer.definitions")
    demo = (ROOT / "examples" / "jobset-demo.yaml").read_text()
    assert "nvidia.com/gpu: 4" in demo
    big = tmp_path / "big.yaml"
    big.write_text(demo.replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 8"))
    main(["plan", "-f", str(big), "--snapshot", FLEET])
    out = capsys.readouterr().out
    assert "0 of 1 workload(s) placed, 0 GPUs of at most 0 (tightest bound)" in out
    assert "batch mode, optimal," in out
    assert "fallback" not in out
