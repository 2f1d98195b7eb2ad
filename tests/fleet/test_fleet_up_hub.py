"""``placer fleet up`` as users run it (a process), with the real kubectl and no extra flags;
and ``--hub NAME``: an empty hub cluster for ``placer controller`` beside the members, its
context marked as a hub (the current one), which commands reaching members leave out."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from placer.errors import FleetConfigError
from placer.fleet.config import fleet_from_kubeconfigs
from placer.kube import ROLE_EXTENSION, ROLE_HUB
from placer.model import Fleet
from placer.snapshot import load_snapshot
from placer.testing import ApiServer, write_kubeconfig
from placer.virtual.fleet import VirtualFleet
from placer.virtual.hub import hub_crds
from tests.fleet.processes import read_until

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "clusters" / "demo.yaml"
KUBECTL = shutil.which("kubectl")
needs_kubectl = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")


@contextmanager
def fleet_up(*args: str) -> Iterator[str]:
    """``placer fleet up ARGS`` as a process, until it says ``serving``; yields its output so
    far; stops it with SIGINT (as Ctrl-C does) and checks that it stopped cleanly."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "placer", "fleet", "up", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        cwd=ROOT,
    )
    try:
        yield read_until(proc, b"serving", timeout=90).decode()
    finally:
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    assert proc.returncode == 0, stderr
    assert b"Traceback" not in stderr


def kubectl(kubeconfig: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """kubectl exactly as a user types it: KUBECONFIG set, no other flag (a fresh HOME, so no
    discovery cache of another run on the same port)."""
    assert KUBECTL is not None
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(home)}
    return subprocess.run(
        [KUBECTL, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60
    )


@pytest.mark.kubectl
@needs_kubectl
def test_kubectl_apply_and_get_nodes_against_fleet_up_without_extra_flags(tmp_path: Path) -> None:
    """Issue 13's acceptance: ``kubectl apply -f examples/jobset-demo.yaml`` and ``kubectl get
    nodes`` against ``placer fleet up`` (its current context, the first cluster: east)."""
    kubeconfig = tmp_path / "demo.kubeconfig"
    with fleet_up(str(DEMO), "--kubeconfig-out", str(kubeconfig)):
        applied = kubectl(kubeconfig, tmp_path, "apply", "-f", "examples/jobset-demo.yaml")
        assert applied.returncode == 0, applied.stderr
        assert applied.stdout.strip() == "jobset.jobset.x-k8s.io/demo created"

        nodes = kubectl(kubeconfig, tmp_path, "get", "nodes")
        assert nodes.returncode == 0, nodes.stderr
        header, *rows = nodes.stdout.splitlines()
        assert header.split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        east = load_snapshot(DEMO).cluster("east")
        assert len(rows) == len(east.nodes) > 0
        assert {row.split()[0] for row in rows} == {node.name for node in east.nodes}
        assert all(row.split()[1] == "Ready" for row in rows)

        jobsets = kubectl(kubeconfig, tmp_path, "get", "jobsets")
        assert jobsets.returncode == 0, jobsets.stderr
        assert jobsets.stdout.splitlines()[1].split()[0] == "demo"


@pytest.mark.kubectl
@needs_kubectl
def test_fleet_up_hub_serves_an_empty_hub_beside_the_members(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    kubeconfig = tmp_path / "local.kubeconfig"
    with fleet_up(str(DEMO), "--hub", "hub", "--kubeconfig-out", str(kubeconfig)) as said:
        assert "hub hub: https://127.0.0.1:" in said and "cluster central: https://" in said
        written = yaml.safe_load(kubeconfig.read_text())
        assert [c["name"] for c in written["contexts"]] == ["east", "west", "central", "hub"]
        assert written["current-context"] == "hub"
        hub_context = written["contexts"][3]["context"]
        assert hub_context["extensions"] == [
            {"name": ROLE_EXTENSION, "extension": {"role": ROLE_HUB}}
        ]

        # kubectl talks to the hub: no nodes, placer's CRDs and the frameworks' served
        nodes = kubectl(kubeconfig, tmp_path, "get", "nodes")
        assert nodes.returncode == 0, nodes.stderr
        assert nodes.stdout == "" and "No resources found" in nodes.stderr
        crds = kubectl(kubeconfig, tmp_path, "get", "crd", "-o", "name")
        assert crds.returncode == 0, crds.stderr
        names = set(crds.stdout.split())
        assert {
            "customresourcedefinition.apiextensions.k8s.io/placementpolicies.placer.dev",
            "customresourcedefinition.apiextensions.k8s.io/kartas.run.ai",
            "customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io",
        } <= names
        policy = kubectl(
            kubeconfig, tmp_path, "apply", "-f", "deploy/examples/placementpolicy.yaml"
        )
        assert policy.returncode == 0, policy.stderr
        assert "placementpolicy.placer.dev/default created" in policy.stdout
        lease_ns = kubectl(kubeconfig, tmp_path, "get", "namespace", "placer-system")
        assert lease_ns.returncode == 0, lease_ns.stderr

        # placer's commands reaching members leave the hub out
        code = main(["get", "-A", "--kubeconfig", str(kubeconfig), "-o", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert "hub" not in err
        code = main(["fleet", "show", "--kubeconfig", str(kubeconfig), "-o", "json"])
        out, err = capsys.readouterr()
        assert code == 0, err
        assert [c["name"] for c in yaml.safe_load(out)["clusters"]] == ["east", "west", "central"]


def test_a_hub_alone_without_a_snapshot(tmp_path: Path) -> None:
    with VirtualFleet(Fleet(()), hub="hub") as virtual:
        assert list(virtual.urls) == ["hub"]
        written = yaml.safe_load(virtual.write_kubeconfig(tmp_path / "k").read_text())
        assert written["current-context"] == "hub"
        store = virtual.server("hub").store
        assert store.list("nodes") == []
        assert store.get("customresourcedefinitions", "placementpolicies.placer.dev")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([str(DEMO), "--hub", "east"], "--hub east: the snapshot has a cluster of that name"),
        ([], "give a SNAPSHOT to serve, or --hub NAME"),
        (["--hub", "hub", "--fleet-out", "{tmp}/f.yaml"], "--fleet-out lists member clusters"),
    ],
)
def test_fleet_up_usage_errors(
    args: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["fleet", "up", *(a.format(tmp=tmp_path) for a in args)]
    code = main([*argv, "--kubeconfig-out", str(tmp_path / "k")])
    _, err = capsys.readouterr()
    assert code == 2 and message in err
    assert not (tmp_path / "k").exists()


def test_kubeconfig_contexts_marked_as_hub_are_not_members(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    hub_mark = {ROLE_EXTENSION: {"role": ROLE_HUB}}
    both = write_kubeconfig(
        tmp_path / "both", {"a": apiserver, "hub": apiserver}, extensions={"hub": hub_mark}
    )
    assert fleet_from_kubeconfigs([both]).names == ("a",)
    # named, a hub context is a member like any other
    assert fleet_from_kubeconfigs([both], ["hub", "a"]).names == ("hub", "a")
    only = write_kubeconfig(tmp_path / "only", {"hub": apiserver}, extensions={"hub": hub_mark})
    with pytest.raises(FleetConfigError, match=r"the kubeconfig's only contexts are hubs \(hub\)"):
        fleet_from_kubeconfigs([only])


def test_the_hub_serves_the_crds_deploy_installs() -> None:
    shipped = sorted((ROOT / "deploy" / "crds").glob("*.yaml"))
    assert [crd["metadata"]["name"] + ".yaml" for crd in hub_crds()] == [p.name for p in shipped]
    assert hub_crds() == [yaml.safe_load(p.read_text()) for p in shipped]
