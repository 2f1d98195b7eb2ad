"""The real kubectl against the virtual fleet that ``placer fleet up`` serves: apply without
``--validate=false``, ``get`` with the usual columns (nodes, pods ``-o wide``, a CRD's printer
columns), ``explain`` from the OpenAPI v3 and v2 documents, short names from the CRDs.

Skipped when kubectl is absent. Every call uses a fresh ``--cache-dir`` (kubectl caches
discovery and OpenAPI per host and port, and ports are reused between tests)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

KUBECTL = shutil.which("kubectl")
ROOT = Path(__file__).resolve().parents[2]
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed"),
]

Kubectl = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VirtualFleet, Path]]:
    with VirtualFleet(load_snapshot(ROOT / "clusters" / "demo.yaml"), setup=realism_setup()) as v:
        yield v, v.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kubeconfig")


@pytest.fixture
def kubectl(fleet: tuple[VirtualFleet, Path], tmp_path: Path) -> Kubectl:
    _, kubeconfig = fleet
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}

    def run(*args: str, check: bool = True, context: str = "central") -> Any:
        assert KUBECTL is not None
        cmd = [KUBECTL, f"--cache-dir={tmp_path / 'cache'}", f"--context={context}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        if check:
            assert done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
        return done

    return run


def columns(text: str) -> list[str]:
    """The header of a kubectl table, as column names (two spaces or more between them)."""
    header = text.splitlines()[0]
    return [c for c in (part.strip() for part in header.split("  ")) if c]


def test_apply_the_demo_jobset_without_extra_flags(
    fleet: tuple[VirtualFleet, Path], kubectl: Kubectl
) -> None:
    done = kubectl("apply", "-f", str(ROOT / "examples" / "jobset-demo.yaml"))
    assert done.stdout.strip() == "jobset.jobset.x-k8s.io/demo created"
    virtual, _ = fleet
    stored = virtual.server("central").store.get("jobsets", "demo", "default")
    assert stored["spec"]["replicatedJobs"][0]["name"] == "leader"
    again = kubectl("apply", "-f", str(ROOT / "examples" / "jobset-demo.yaml"))
    assert again.stdout.strip() == "jobset.jobset.x-k8s.io/demo unchanged"


def test_the_server_validates_fields_for_kubectl(kubectl: Kubectl, tmp_path: Path) -> None:
    """kubectl finds ``fieldValidation`` in the OpenAPI v3 document and lets the server
    validate (Strict): an unknown metadata field is refused, as a real server refuses it."""
    odd = tmp_path / "odd.yaml"
    odd.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: odd\n  colour: red\n")
    done = kubectl("apply", "-f", str(odd), check=False)
    assert done.returncode == 1
    assert 'strict decoding error: unknown field "metadata.colour"' in done.stderr
    assert "failed to download openapi" not in done.stderr


def test_get_nodes_has_the_usual_columns(kubectl: Kubectl) -> None:
    out = kubectl("get", "nodes").stdout
    assert columns(out) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [r[0] for r in rows] == [
        "central-cpu-0",
        "central-l40s-0",
        "central-l40s-1",
        "central-l40s-2",
    ]
    assert all(r[1] == "Ready" and r[2] == "<none>" and r[4] == "v1.31.0" for r in rows)
    wide = kubectl("get", "nodes", "-o", "wide").stdout
    assert columns(wide)[5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]


def test_get_pods_wide_shows_ready_ip_and_node(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(ROOT / "examples" / "jobset-demo.yaml"))
    out = kubectl("get", "pods", "-o", "wide", "-l", "jobset.sigs.k8s.io/jobset-name=demo").stdout
    assert columns(out) == [
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
        "IP",
        "NODE",
        "NOMINATED NODE",
        "READINESS GATES",
    ]
    rows = [line.split() for line in out.splitlines()[1:]]
    assert len(rows) == 3
    for row in rows:
        assert row[1:4] == ["1/1", "Running", "0"]
        assert row[5].startswith("10.244.") and row[6].startswith("central-l40s-")
    assert columns(kubectl("get", "pods", "-A").stdout) == [
        "NAMESPACE",
        "NAME",
        "READY",
        "STATUS",
        "RESTARTS",
        "AGE",
    ]


def test_sort_by_keeps_the_kinds_columns(kubectl: Kubectl) -> None:
    """``--sort-by`` asks for the whole objects in the Table's rows (includeObject=Object) and
    decodes them by kind: each carries its kind and apiVersion, as a real server's do, so the
    kind's own columns are printed, in the asked order."""
    kubectl("apply", "-f", str(ROOT / "examples" / "jobset-demo.yaml"))
    nodes = kubectl("get", "nodes", "--sort-by=.metadata.name").stdout
    assert columns(nodes) == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    names = [line.split()[0] for line in nodes.splitlines()[1:]]
    assert names == sorted(names) and len(names) == 4
    pods = kubectl("get", "pods", "-A", "--sort-by=.spec.nodeName").stdout
    assert columns(pods)[:4] == ["NAMESPACE", "NAME", "READY", "STATUS"]
    assert len(pods.splitlines()) > 1


def test_logs_of_a_virtual_pod(kubectl: Kubectl) -> None:
    """``kubectl logs`` gets the pod/log subresource: what the server knows of the container
    (no process runs), with the real server's errors for a missing or unknown container."""
    kubectl("apply", "-f", str(ROOT / "examples" / "jobset-demo.yaml"))
    pod = kubectl(
        "get", "pods", "-l", "jobset.sigs.k8s.io/jobset-name=demo", "-o", "name"
    ).stdout.split()[0]
    out = kubectl("logs", pod).stdout
    assert "container trainer of pod default/" in out and "started on node central-" in out
    stamped = kubectl("logs", pod, "--timestamps").stdout
    assert stamped.split()[0].endswith("Z") and stamped.split()[1] == "placer"
    assert kubectl("logs", pod, "--tail=0").stdout == ""
    wrong = kubectl("logs", pod, "-c", "sidecar", check=False)
    assert wrong.returncode == 1 and "container sidecar is not valid for pod" in wrong.stderr
    previous = kubectl("logs", pod, "--previous", check=False)
    assert previous.returncode == 1 and "previous terminated container" in previous.stderr


def test_get_jobsets_shows_the_crd_columns(kubectl: Kubectl) -> None:
    kubectl("apply", "-f", str(ROOT / "examples" / "jobset-demo.yaml"))
    kubectl(
        "patch",
        "jobset",
        "demo",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"terminalState":"Completed","restarts":1,'
        '"conditions":[{"type":"Completed","status":"True","reason":"AllJobsCompleted",'
        '"message":"done","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}',
    )
    out = kubectl("get", "jobsets").stdout
    assert columns(out) == ["NAME", "TERMINALSTATE", "RESTARTS", "COMPLETED", "SUSPENDED", "AGE"]
    row = out.splitlines()[1].split()
    assert row[:4] == ["demo", "Completed", "1", "True"]


def test_short_names_and_explain(kubectl: Kubectl) -> None:
    kubectl("create", "namespace", "team-b", context="west")
    kubectl("apply", "-f", str(ROOT / "examples" / "leaderworkerset-serving.yaml"), context="west")
    assert "llm-serving" in kubectl("get", "lws", "-n", "team-b", context="west").stdout
    explained = kubectl("explain", "jobsets").stdout
    assert "KIND:       JobSet" in explained and "VERSION:    v1alpha2" in explained
    for field in ("apiVersion", "kind", "metadata", "spec", "status"):
        assert f"\n  {field}\t<" in explained
    labels = kubectl("explain", "pods.metadata.labels").stdout
    assert "FIELD: labels <map[string]string>" in labels
    legacy = kubectl("explain", "pods", "--output=plaintext-openapiv2").stdout
    assert "KIND:     Pod" in legacy and "collection of containers" in legacy
