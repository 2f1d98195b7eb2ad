"""Snapshot text: the fast YAML writer reads back exactly, whatever the strings hold."""

from __future__ import annotations

import random
import string
from pathlib import Path

import pytest
import yaml

from placer.snapshot import dumps_snapshot, fleet_to_dict, load_snapshot, loads_snapshot
from placer.yamltext import dump_plain

ROOT = Path(__file__).resolve().parents[2]
ODD = [
    "",
    "yes",
    "No",
    "on",
    "8",
    "-3",
    "1e3",
    "0x1F",
    "0o7",
    "1:20",
    ".inf",
    "NaN",
    "null",
    "~",
    "2026-11-29",
    "2026-11-29T12:00:00Z",
    "a: b",
    "a #c",
    "#x",
    "a,b",
    "[x]",
    "{y}",
    "'q'",
    '"d"',
    "*ref",
    "&a",
    "!tag",
    "%p",
    "@x",
    "`b",
    "?",
    "-",
    "<<",
    "=",
    " lead",
    "trail ",
    "tab\there",
    "line\nbreak",
    "é",
    "\u2028",
    "\x85",
    "\ufeff",
    "😀",
    "\x00",
]


def test_odd_strings_round_trip_as_keys_and_values() -> None:
    data = {
        "values": ODD,
        "keys": {s: s for s in ODD},
        "nested": [{"list": [1, True, None, "x"]}, [], {}],
        "taints": [{"key": "a", "value": "", "effect": "NoSchedule"}],
    }
    assert yaml.safe_load(dump_plain(data)) == data


def test_random_strings_round_trip() -> None:
    rng = random.Random(7)
    alphabet = string.printable + "éü—\u2028\x85😀"
    for _ in range(3000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(8)))
        data = {text: [text, {text: text}]}
        assert yaml.safe_load(dump_plain(data)) == data, repr(text)


def test_layout_is_readable_and_wrapped() -> None:
    text = dumps_snapshot(load_snapshot(ROOT / "clusters" / "demo.yaml"))
    assert text.startswith("apiVersion: placer.dev/v1alpha1\nkind: FleetSnapshot\n")
    assert "- name: east\n  reachable: true\n" in text
    assert "    requested: {cpu: '48', memory: 256Gi, nvidia.com/gpu: '4', pods: '4'}\n" in text
    assert max(len(line) for line in text.splitlines()) <= 120
    assert loads_snapshot(text) == load_snapshot(ROOT / "clusters" / "demo.yaml")
    assert yaml.safe_load(text) == fleet_to_dict(load_snapshot(ROOT / "clusters" / "demo.yaml"))


def test_non_plain_values_are_refused() -> None:
    with pytest.raises(TypeError, match="float"):
        dump_plain({"x": 1.5})
