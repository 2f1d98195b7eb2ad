"""Snapshot text: the fast YAML writer gives PyYAML's bytes, and reads back exactly."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import pytest
import yaml

import placer.yamltext
from placer.fleet import PodTally, cluster_from_api
from placer.model import Fleet
from placer.snapshot import fleet_to_dict, load_snapshot
from placer.testing import synthetic_cluster
from placer.yamltext import dump_plain

ROOT = Path(__file__).resolve().parents[2]
ODD = [
    "", "yes", "No", "on", "8", "-3", "1e3", "0x1F", "0o7", "1:20", ".inf", "NaN", "null", "~",
    "2026-11-29", "2026-11-29T12:00:00Z", "a: b", "a #c", "#x", "a,b", "[x]", "{y}", "'q'",
    '"d"', "*ref", "&a", "!tag", "%p", "@x", "`b", "?", "-", "<<", "=", " lead", "trail ",
    "tab\there", "line\nbreak", "é", "\u2028", "\x85", "\ufeff", "😀", "a b c " * 30,
]  # fmt: skip


def pyyaml(data: object) -> str:
    text: str = yaml.safe_dump(data, sort_keys=False, default_flow_style=None, width=120)
    return text


def synthetic_fleet() -> dict[str, Any]:
    objects = list(synthetic_cluster(60, 300, seed=3))
    tally = PodTally()
    tally.add_all(o for o in objects if o["kind"] == "Pod")
    cluster = cluster_from_api("c", [o for o in objects if o["kind"] == "Node"], tally)
    return fleet_to_dict(Fleet((cluster,), "2026-11-29T00:00:00Z"))


def test_snapshots_are_written_exactly_as_pyyaml_writes_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    documents = [fleet_to_dict(load_snapshot(ROOT / "clusters" / "demo.yaml")), synthetic_fleet()]
    expected = [pyyaml(d) for d in documents]

    def refuse(*_: object, **__: object) -> str:
        raise AssertionError("fell back to PyYAML")

    monkeypatch.setattr(placer.yamltext.yaml, "safe_dump", refuse)
    fast = [dump_plain(d) for d in documents]
    assert fast == expected
    assert "gpu-products: 'NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3,NVIDIA-L40S'" in fast[1]
    assert "\n      topology.kubernetes.io/zone" in fast[0]  # wrapped like PyYAML wraps


def test_random_simple_documents_match_pyyaml_byte_for_byte() -> None:
    rng = random.Random(1)
    alphabet = "abcXYZ019_./-:+,"

    def text() -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(14)))

    for _ in range(500):
        data = {
            "labels": {text() or "k": text() for _ in range(rng.randrange(12))},
            "groups": [
                {
                    "names": [text() for _ in range(rng.randrange(60))],
                    "amounts": {"x": rng.randrange(-5, 10**12), "y": text(), "z": True},
                }
            ],
            "value": text(),
            "empty": [],
            "none": None,
        }
        assert dump_plain(data) == pyyaml(data), data


def test_anything_else_is_left_to_pyyaml_and_reads_back() -> None:
    data = {
        "values": ODD,
        "keys": {s: s for s in ODD},
        "nested": [{"list": [1, True, None, "x"]}, [], {}, [[1, 2]]],
        "number": 1.5,
    }
    text = dump_plain(data)
    assert text == pyyaml(data)
    assert yaml.safe_load(text) == data
