"""``make results``: the tables of README.md, simulations/README.md and docs/ are the ones the
committed result files give, and the script rewrites exactly the marked tables."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from simulations import results_tables
from simulations.results_tables import DOCUMENTS, REGIONS, ResultError, regions, rewrite, stale

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_tables_are_the_result_files_tables() -> None:
    outdated = stale(ROOT)
    assert outdated == [], (
        f"{', '.join(outdated)}: a marked table differs from what simulations/results gives; "
        "run `make results` and commit the result"
    )


def test_the_readmes_mark_their_tables() -> None:
    found = {name: regions((ROOT / name).read_text()) for name in DOCUMENTS}
    assert set(found["README.md"]) >= {"measured"}
    assert set(found["simulations/README.md"]) >= {"summary", "fgd", "multicluster", "stream"}
    marked = {r for names in found.values() for r in names}
    assert marked == set(REGIONS), "every table the script knows is in a document"


def test_a_hand_edited_figure_is_rewritten_and_the_rest_kept() -> None:
    text = (ROOT / "simulations" / "README.md").read_text()
    fgd = REGIONS["fgd"]()
    assert fgd in text
    figure = re.search(r"\d+\.\d\d", fgd)
    assert figure is not None, fgd
    edited = text.replace(fgd, fgd.replace(figure.group(), "99.99"))
    assert edited != text
    assert rewrite(edited, "simulations/README.md") == text


def test_a_new_result_changes_the_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    results = tmp_path / "results"
    results.mkdir()
    for path in (ROOT / "simulations" / "results").glob("*.json"):
        (results / path.name).write_text(path.read_text())
    data = json.loads((results / "bench_submit.json").read_text())
    data["modes"]["batch"]["workloads_per_s"] = 123.4
    (results / "bench_submit.json").write_text(json.dumps(data))
    monkeypatch.setattr(results_tables, "RESULTS", results)
    results_tables.result.cache_clear()
    try:
        assert "**123.4/s** in one batch" in REGIONS["other-benchmarks"]()
        assert stale(ROOT) != []
    finally:
        results_tables.result.cache_clear()


def test_unknown_tables_and_missing_figures_are_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ResultError, match="unknown results table 'nope'"):
        rewrite("<!-- results:nope -->\nx\n<!-- /results:nope -->\n", "doc.md")
    monkeypatch.setattr(results_tables, "RESULTS", tmp_path)
    results_tables.result.cache_clear()
    try:
        with pytest.raises(ResultError, match=r"bench_fgd\.json"):
            REGIONS["fgd"]()
    finally:
        results_tables.result.cache_clear()
