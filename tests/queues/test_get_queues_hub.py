"""``placer get queues`` against a hub that has no Queue: an empty listing with a hint (exit 0),
whether placer's Queue CRD is missing or installed and empty; a real API error is an error
naming the hub's context (loopback hub over HTTPS, real kubeconfig)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from placer.cli import main
from placer.testing import ApiServer, write_kubeconfig
from placer.virtual.hub import hub_crds


def _get(kubeconfig: Path, *extra: str) -> list[str]:
    return ["get", "queues", "--hub-context", "hub", "--kubeconfig", str(kubeconfig), *extra]


def _queue_crd() -> dict[str, object]:
    (crd,) = [c for c in hub_crds() if c["metadata"]["name"] == "queues.placer.dev"]
    return crd


@pytest.mark.parametrize("installed", [False, True], ids=["no-crd", "empty"])
def test_a_hub_without_queues_lists_none(
    start_apiserver: Callable[..., ApiServer],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    installed: bool,
) -> None:
    hub = start_apiserver("hub")
    if installed:
        hub.store.create(_queue_crd())
    kubeconfig = write_kubeconfig(tmp_path / "hub.kubeconfig", {"hub": hub})
    assert main(_get(kubeconfig, "-o", "json")) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out) == {"queues": []}
    assert "hub hub: no Queue" in captured.err and "kubectl apply -f" in captured.err
    assert ("queues.placer.dev.yaml" in captured.err) is not installed
    assert main(_get(kubeconfig)) == 0
    captured = capsys.readouterr()
    assert captured.out == "" and "docs/queues.md" in captured.err


def test_an_api_error_names_the_hub(
    start_apiserver: Callable[..., ApiServer], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    hub = start_apiserver("hub")
    hub.store.create(_queue_crd())
    kubeconfig = write_kubeconfig(tmp_path / "hub.kubeconfig", {"hub": hub})
    hub.faults.fail(403, times=None, resource="queues")
    assert main(_get(kubeconfig)) == 1
    err = capsys.readouterr().err
    assert "cluster hub: list queues: 403 Forbidden" in err and "RBAC" in err
    hub.faults.clear()
    hub.stop()
    assert main(_get(kubeconfig)) == 1
    err = capsys.readouterr().err
    assert "cluster hub:" in err and "unreachable" in err
