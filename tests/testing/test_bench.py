"""``python -m placer.testing bench`` measures what it says (tiny sizes: correctness only)."""

from __future__ import annotations

from placer.testing._bench import run_bench


def test_bench_lists_every_pod_in_pages() -> None:
    report = run_bench(nodes=2, pods=5, page=2, requests=3, repeat=1, process=False)
    assert report["list_raw_ms"]["pods"] == report["list_typed_ms"]["pods"] == 5
    assert report["list_raw_ms"]["pages"] == 3
    assert report["get_ms"]["p50"] > 0 and report["seed_ms"] >= 0
