"""Fleet configuration: kubeconfig contexts, fleet files, and their bad-input errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.errors import FleetConfigError
from placer.fleet import fleet_from_kubeconfigs, load_fleet_file
from placer.model import Taint


def kubeconfig(path: Path, *contexts: str) -> Path:
    data: dict[str, Any] = {
        "clusters": [{"name": c, "cluster": {"server": f"https://{c}:6443"}} for c in contexts],
        "users": [{"name": c, "user": {"token": "t"}} for c in contexts],
        "contexts": [{"name": c, "context": {"cluster": c, "user": c}} for c in contexts],
    }
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_every_context_is_a_member_unless_contexts_are_given(tmp_path: Path) -> None:
    a = kubeconfig(tmp_path / "a.yaml", "east", "west")
    b = kubeconfig(tmp_path / "b.yaml", "central")
    assert fleet_from_kubeconfigs([a, b]).names == ("east", "west", "central")
    chosen = fleet_from_kubeconfigs([a, b], ["central", "east", "central"], timeout=5)
    assert chosen.names == ("central", "east")
    assert chosen.clusters[0].timeout == 5


def test_unknown_context_on_the_command_line_is_an_error(tmp_path: Path) -> None:
    a = kubeconfig(tmp_path / "a.yaml", "east")
    with pytest.raises(FleetConfigError, match=r"a\.yaml: contexts: unknown context 'north'"):
        fleet_from_kubeconfigs([a], ["north"])


def test_fleet_file(tmp_path: Path) -> None:
    kubeconfig(tmp_path / "kc.yaml", "east-admin", "west")
    fleet_file = tmp_path / "fleet.yaml"
    fleet_file.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "placer.dev/v1alpha1",
                "kind": "Fleet",
                "clusters": [
                    {
                        "name": "east",
                        "kubeconfig": "kc.yaml",
                        "context": "east-admin",
                        "timeout": 7,
                        "labels": {"region": "us-east-1", "cost": 3},
                        "taints": [{"key": "reserved", "value": "a"}],
                    },
                    {"name": "west", "kubeconfig": "kc.yaml"},
                    {"name": "gone", "kubeconfig": "missing.yaml"},
                    {"name": "typo", "kubeconfig": "kc.yaml", "context": "wset"},
                ],
            }
        ),
        encoding="utf-8",
    )
    config = load_fleet_file(fleet_file, timeout=20)
    east, west, gone, typo = config.clusters
    assert (east.context, east.timeout, east.labels) == (
        "east-admin",
        7.0,
        {"region": "us-east-1", "cost": "3"},
    )
    assert east.taints == (Taint("reserved", "a", "NoSchedule"),)
    assert (west.context, west.timeout, west.problem) == ("west", 20.0, "")
    # a bad member is reported, not fatal: the others are still gathered
    assert gone.problem.startswith(f"{fleet_file}: clusters[2].kubeconfig: ")
    assert "no such kubeconfig file" in gone.problem
    assert typo.problem.startswith(f"{fleet_file}: clusters[3].context: ")
    assert "unknown context 'wset'" in typo.problem


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("clusters: [", "not valid YAML: line"),
        ("- a", "must be a mapping with a clusters list"),
        ("clusters: []", "clusters: must be a non-empty list"),
        ("kind: Snapshot\nclusters: [{name: a}]", "kind: is 'Snapshot'"),
        ("clusters: [{context: a}]", "clusters[0].name: must be a non-empty string"),
        ("clusters: [{name: a}, {name: a}]", "clusters[1].name: duplicate cluster name 'a'"),
        ("clusters: [{name: a, timeout: -1}]", "clusters[0].timeout: must be a positive"),
        ("clusters: [{name: a, labels: [x]}]", "clusters[0].labels: must be a mapping"),
        ("clusters: [{name: a, taints: [{key: k, effect: Never}]}]", "taints[0].effect"),
        ("clusters: [{name: a, kubecfg: x}]", "clusters[0]: unknown field(s) kubecfg"),
    ],
)
def test_malformed_fleet_file_names_file_and_field(
    tmp_path: Path, text: str, fragment: str
) -> None:
    path = tmp_path / "fleet.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FleetConfigError) as info:
        load_fleet_file(path, environ={"HOME": str(tmp_path)})
    assert str(info.value).startswith(f"{path}: ")
    assert fragment in str(info.value)


def test_missing_fleet_file(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError, match="no such fleet file"):
        load_fleet_file(tmp_path / "none.yaml")
