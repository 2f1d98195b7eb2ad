"""Shared builders of the submit tests: the demo fleet served virtually (clusters/demo.yaml)
through a kubeconfig, and ``placer submit`` run on it.

* ``demo_fleet``: factory ``demo_fleet(pods=False) -> Fleet`` starting the demo fleet (realism
  with or without pods); every fleet is stopped at teardown.
* :func:`submit`: ``placer submit -o json`` in process, its exit code, JSON and stderr.
* :func:`renamed`: the seed JobSet under another name, namespace or GPU count, as a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.dispatch.ledger import LABEL_IN_FLIGHT, LEDGER_NAMESPACE
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "jobset-demo.yaml"


class Fleet:
    """A started virtual demo fleet and its kubeconfig."""

    def __init__(self, virtual: VirtualFleet, kubeconfig: Path) -> None:
        self.virtual = virtual
        self.kubeconfig = kubeconfig

    def jobsets(self, cluster: str, namespace: str | None = None) -> list[dict[str, Any]]:
        return self.virtual.server(cluster).store.list("jobsets.jobset.x-k8s.io", namespace)

    def entries(self, cluster: str) -> list[dict[str, Any]]:
        return self.virtual.server(cluster).store.list(
            "configmaps", LEDGER_NAMESPACE, label_selector=f"{LABEL_IN_FLIGHT}=true"
        )

    def namespaces(self, cluster: str) -> set[str]:
        return {
            n["metadata"]["name"] for n in self.virtual.server(cluster).store.list("namespaces")
        }

    def token(self) -> str:
        data = yaml.safe_load(self.kubeconfig.read_text())
        return str(data["users"][0]["user"]["token"])


@pytest.fixture
def demo_fleet(tmp_path: Path) -> Iterator[Callable[..., Fleet]]:
    started: list[VirtualFleet] = []

    def start(*, pods: bool = False) -> Fleet:
        virtual = VirtualFleet(
            load_snapshot(ROOT / "clusters" / "demo.yaml"), setup=realism_setup(pods=pods)
        ).start()
        started.append(virtual)
        return Fleet(virtual, virtual.write_kubeconfig(tmp_path / f"kc-{len(started)}"))

    yield start
    for virtual in started:
        virtual.stop()


def submit(
    capsys: pytest.CaptureFixture[str],
    fleet: Fleet,
    *files: Path | str,
    extra: tuple[str, ...] = (),
) -> tuple[int, dict[str, Any], str]:
    args = ["submit", "--kubeconfig", str(fleet.kubeconfig), "-o", "json", *extra]
    for file in files:
        args += ["-f", str(file)]
    code = main(args)
    out, err = capsys.readouterr()
    return code, json.loads(out), err


def renamed(tmp_path: Path, name: str, *, namespace: str = "default", gpus: int = 4) -> Path:
    data = yaml.safe_load(SEED.read_text())
    data["metadata"] = {"name": name, "namespace": namespace}
    for job in data["spec"]["replicatedJobs"]:
        pod = job["template"]["spec"]["template"]["spec"]
        pod["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": gpus}
    path = tmp_path / f"{namespace}-{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path
