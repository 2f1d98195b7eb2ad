"""``-o yaml`` wherever ``-o json`` exists, with the same document."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from placer.cli import build_parser, main

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "clusters" / "demo.yaml")
SEED = str(ROOT / "examples" / "jobset-demo.yaml")


def _output_choices(parser: argparse.ArgumentParser, path: str = "placer") -> dict[str, list[str]]:
    """Command path -> the choices of its -o/--output option (when it has one), recursively."""
    found: dict[str, list[str]] = {}
    for action in parser._actions:
        if "--output" in action.option_strings and action.choices is not None:
            found[path] = list(action.choices)
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found.update(_output_choices(sub, f"{path} {name}"))
    return found


def test_every_command_with_json_output_also_has_yaml() -> None:
    choices = _output_choices(build_parser())
    with_json = {command for command, formats in choices.items() if "json" in formats}
    assert {"placer get", "placer plan", "placer submit", "placer simulate"} <= with_json
    assert {command for command in with_json if "yaml" not in choices[command]} == set()


@pytest.mark.parametrize(
    "args",
    [
        ["definitions"],
        ["definitions", "jobset-x-k8s-io-jobset-v1alpha2"],
        ["describe", "-f", SEED],
        ["fleet", "show", DEMO],
        ["plan", "-f", SEED, "--snapshot", DEMO],
        ["simulate", "--snapshot", DEMO, "--workloads", SEED],
    ],
    ids=lambda args: " ".join(args[:2]),
)
def test_yaml_is_the_json_document(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*args, "-o", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main([*args, "-o", "yaml"]) == 0
    as_yaml = yaml.safe_load(capsys.readouterr().out)
    assert _timeless(as_yaml) == _timeless(as_json)


def _timeless(data: object) -> object:
    """``data`` without the timings, which differ between two runs (``seconds``, ``*_s``)."""
    if isinstance(data, dict):
        return {k: _timeless(v) for k, v in data.items() if k != "seconds" and not k.endswith("_s")}
    if isinstance(data, list):
        return [_timeless(v) for v in data]
    return data
