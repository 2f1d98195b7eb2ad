"""`placer get` and live `placer describe TYPE/NAME` across the virtual demo fleet."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from placer.cli import main
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "examples" / "jobset-demo.yaml"
DEPLOYMENT = ROOT / "tests" / "definitions" / "samples" / "deployment.yaml"
LWS = ROOT / "examples" / "leaderworkerset-serving.yaml"


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[VirtualFleet, str]]:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=realism_setup()) as virtual:
        kubeconfig = str(virtual.write_kubeconfig(tmp_path_factory.mktemp("kc") / "kc"))
        assert (
            main(
                [
                    *("submit", "-f", str(SEED), "-f", str(DEPLOYMENT), "-f", str(LWS)),
                    *("--kubeconfig", kubeconfig),
                ]
            )
            == 0
        )
        yield virtual, kubeconfig


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_get_lists_every_type_across_the_fleet(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, kubeconfig = fleet
    code, out, err = run(capsys, "get", "-A", "--kubeconfig", kubeconfig)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == [
        "CLUSTER",
        "NAMESPACE",
        "NAME",
        "KIND",
        "PHASE",
        "COMPONENTS",
        "GPU",
        "AGE",
    ]
    rows = {tuple(line.split()[:4]): line for line in lines[1:]}
    demo = rows[("central", "default", "demo", "JobSet")]
    assert "Running   leader(1), worker(2)   12" in demo
    names = sorted(key[2] for key in rows)
    assert names == ["demo", "embedder", "gateway", "llm-serving"]  # no usage, no owned pods
    embedder = next(line for key, line in rows.items() if key[2] == "embedder")
    assert embedder.split()[1] == "serving" and "deployment(3)" in embedder


def test_get_by_type_namespace_and_json(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, kubeconfig = fleet
    code, out, _ = run(capsys, "get", "jobsets", "--kubeconfig", kubeconfig, "-o", "json")
    data = json.loads(out)
    assert code == 0 and data["count"] == 1
    [item] = data["items"]
    assert (item["cluster"], item["name"], item["phase"]) == ("central", "demo", ["Running"])
    assert item["placement"]["cluster"] == "central" and item["gpus"] == 12
    code, out, err = run(capsys, "get", "deployment", "-n", "team-x", "--kubeconfig", kubeconfig)
    assert code == 0 and out == "" and "No workloads found in namespace team-x." in err
    code, _, err = run(capsys, "get", "frobnicator", "--kubeconfig", kubeconfig)
    assert code == 4 and "no workload definition covers type 'frobnicator'" in err
    code, _, err = run(capsys, "get", "-A", "-n", "x", "--kubeconfig", kubeconfig)
    assert code == 2


def test_short_names_come_from_the_members_discovery(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``deploy`` is no kind, plural or definition name: the API servers publish it."""
    _, kubeconfig = fleet
    code, out, err = run(capsys, "get", "deploy", "-A", "--kubeconfig", kubeconfig)
    assert code == 0 and err == ""
    assert sorted(line.split()[2] for line in out.splitlines()[1:]) == ["embedder", "gateway"]
    code, out, _ = run(capsys, "get", "deploy.apps", "-A", "--kubeconfig", kubeconfig)
    assert code == 0 and len(out.splitlines()) == 3
    code, _, err = run(capsys, "get", "deploy.batch", "-A", "--kubeconfig", kubeconfig)
    assert code == 4 and "no workload definition covers type 'deploy.batch'" in err
    code, out, _ = run(
        capsys, "describe", "deploy/embedder", "-n", "serving", "--kubeconfig", kubeconfig
    )
    assert code == 0 and out.startswith("Deployment/embedder   namespace: serving")


def test_the_short_names_the_readme_uses(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """``lws`` is LeaderWorkerSet's short name in its CRD: the virtual fleet serves it so."""
    _, kubeconfig = fleet
    code, out, err = run(capsys, "get", "lws", "-A", "--kubeconfig", kubeconfig)
    assert code == 0, err
    [row] = out.splitlines()[1:]
    assert row.split()[1:4] == ["team-b", "llm-serving", "LeaderWorkerSet"]
    code, out, _ = run(
        capsys, "describe", "lws/llm-serving", "-n", "team-b", "--kubeconfig", kubeconfig
    )
    assert code == 0 and out.startswith("LeaderWorkerSet/llm-serving   namespace: team-b")


@pytest.mark.parametrize("args", [["get", "-A"], ["describe", "jobset/demo"]], ids=lambda a: a[0])
def test_live_yaml_is_the_json_document(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str], args: list[str]
) -> None:
    _, kubeconfig = fleet
    code, as_json, _ = run(capsys, *args, "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 0
    code, as_yaml, _ = run(capsys, *args, "--kubeconfig", kubeconfig, "-o", "yaml")
    assert code == 0
    assert yaml.safe_load(as_yaml) == json.loads(as_json)


def test_describe_live_shows_pods_nodes_cluster_and_record(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, kubeconfig = fleet
    code, out, _ = run(capsys, "describe", "jobset/demo", "--kubeconfig", kubeconfig)
    assert code == 0
    assert out.startswith("JobSet/demo   namespace: default   cluster: central")
    assert "|-- leader                            1/1 ready   gpu: 4    central-l40s-0" in out
    assert "demo-replicatedjob-worker-1   Running     gpu: 4    central-l40s-2" in out
    assert "Phase: Running" in out
    assert "Placement: placed by placer on central, decision " in out
    code, out, _ = run(
        capsys,
        "describe",
        "Deployment",
        "embedder",
        "-n",
        "serving",
        "--kubeconfig",
        kubeconfig,
        "-o",
        "json",
    )
    data = json.loads(out)
    assert code == 0 and data["cluster"] == "west" and data["phase"] == ["Running"]
    assert [p["ready"] for p in data["pods"]["deployment"]] == [True, True, True]
    assert all(p["node"].startswith("west-") for p in data["pods"]["deployment"])


def test_describe_errors(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, kubeconfig = fleet
    code, _, err = run(capsys, "describe", "jobset/nope", "--kubeconfig", kubeconfig)
    assert code == 3 and "jobset/nope not found in namespace default" in err
    code, _, err = run(capsys, "describe", "jobset/demo", "-f", str(SEED))
    assert code == 2 and "either -f FILE or TYPE/NAME" in err
    code, out, _ = run(capsys, "describe", "-f", str(SEED))  # file mode unchanged
    assert code == 0 and "replicas: 3" in out


def test_an_unreachable_cluster_is_a_warning_not_a_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = load_snapshot(ROOT / "clusters" / "demo.yaml")
    with VirtualFleet(snapshot, setup=realism_setup()) as virtual:
        kubeconfig = str(virtual.write_kubeconfig(tmp_path / "kc"))
        assert main(["submit", "-f", str(SEED), "--kubeconfig", kubeconfig]) == 0
        virtual.server("west").stop()
        capsys.readouterr()
        code, out, err = run(capsys, "get", "-A", "--kubeconfig", kubeconfig)
    assert code == 0 and "central   default     demo" in out
    assert "warning: cluster west:" in err and "unreachable" in err


def test_plan_gathers_live_and_counts_what_is_running(
    fleet: tuple[VirtualFleet, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """`placer plan` with fleet options decides on the members as they are: the seed JobSet
    already runs on central (submitted by the fixture), so a second one fits nowhere."""
    _, kubeconfig = fleet
    code, out, err = run(capsys, "plan", "-f", str(SEED), "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 1, err  # not placed
    data = json.loads(out)
    assert data["placements"] == []
    [unplaced] = data["unplaced"]
    assert set(unplaced["reasons"]) == {"east", "west", "central"}
    code, _, err = run(
        capsys, "plan", "-f", str(SEED), "--kubeconfig", kubeconfig, "--snapshot", "x.yaml"
    )
    assert code == 2 and "either --snapshot or fleet options" in err
