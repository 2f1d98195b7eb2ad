"""The CLI's warnings are ``warning:`` lines, reasons included: a member whose kubeconfig entry
cannot become a client (here a ``certificate-authority-data`` that is not base64) is named with
its reason, never as a bare log line; placer's log records are printed the same way.

Live commands run in-process against a virtual fleet over HTTPS."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from placer.cli import WarningLines, main
from placer.model import Fleet
from placer.virtual.fleet import VirtualFleet
from tests.builders.fleets import cluster, node

NOT_BASE64 = "certificate-authority-data: is not base64"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def spoil(kubeconfig: Path, names: set[str], target: Path) -> str:
    """``kubeconfig`` with the CA data of the clusters ``names`` no longer base64."""
    data = yaml.safe_load(kubeconfig.read_text())
    for entry in data["clusters"]:
        if entry["name"] in names:
            entry["cluster"]["certificate-authority-data"] = "not base64!"
    target.write_text(yaml.safe_dump(data))
    return str(target)


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    fleet = Fleet(clusters=(cluster("east", node("e1")), cluster("west", node("w1"))))
    with VirtualFleet(fleet) as virtual:
        yield virtual.write_kubeconfig(tmp_path_factory.mktemp("warnings") / "kubeconfig")


def test_a_member_without_client_is_a_warning_with_its_reason(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, tmp_path: Path
) -> None:
    path = spoil(kubeconfig, {"east"}, tmp_path / "kubeconfig")
    code, _, err = run(capsys, "get", "-A", "--kubeconfig", path)
    assert code == 0, err
    lines = err.splitlines()
    assert not [line for line in lines if line.startswith("cluster east")], err
    east = [line for line in lines if line.startswith("warning: cluster east:")]
    assert len(east) == 1, err
    assert "no usable kubeconfig entry" in east[0] and NOT_BASE64 in east[0], err


def test_no_usable_member_fails_with_each_reason(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, tmp_path: Path
) -> None:
    path = spoil(kubeconfig, {"east", "west"}, tmp_path / "kubeconfig")
    for command in (["get", "-A"], ["delete", "job/nothing"], ["describe", "job/nothing"]):
        code, _, err = run(capsys, *command, "--kubeconfig", path)
        assert code == 3, (command, err)
        for name in ("east", "west"):
            reason = [
                line for line in err.splitlines() if line.startswith(f"warning: cluster {name}:")
            ]
            assert len(reason) == 1 and NOT_BASE64 in reason[0], (command, err)
        assert "error: no cluster of the fleet could be reached" in err, (command, err)


def test_fleet_check_names_the_reason(
    capsys: pytest.CaptureFixture[str], kubeconfig: Path, tmp_path: Path
) -> None:
    path = spoil(kubeconfig, {"east"}, tmp_path / "kubeconfig")
    _, _, err = run(capsys, "fleet", "check", "--kubeconfig", path)
    east = [line for line in err.splitlines() if "cluster east" in line]
    assert len(east) == 1 and east[0].startswith("warning: ") and NOT_BASE64 in east[0], err


def test_log_records_are_warning_lines_on_the_current_stderr(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    for _ in range(2):  # the handler is installed once, however often main runs
        run(capsys, "definitions")
    handlers = logging.getLogger("placer").handlers
    assert sum(isinstance(h, WarningLines) for h in handlers) == 1
    logging.getLogger("placer.fleet.gather").warning("cluster %s: slow", "east")
    logging.getLogger("placer.kube").error("broken")
    _, err = capsys.readouterr()
    assert err.splitlines() == ["warning: cluster east: slow", "error: broken"]
