"""``placer describe``, ``placer definitions`` and ``placer validate`` end to end."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from placer.cli import main


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


SEED_TEXT = """\
JobSet/demo   namespace: default   definition: jobset-x-k8s-io-jobset-v1alpha2 (catalog)

`-- replicatedjob   replicas: 3   gpu: 12
    |-- leader      replicas: 1   gpu: 4
    `-- worker      replicas: 2   gpu: 8

Phase: Undefined

Resources:
COMPONENT              REPLICAS   GPU   CPU   MEMORY
replicatedjob/leader   1          4     8     64Gi
replicatedjob/worker   2          8     16    128Gi
TOTAL                  3          12    24    192Gi

Gangs:
NAME     MIN   MEMBERS
jobset   3     replicatedjob/leader, replicatedjob/worker
"""


def test_describe_the_seed_example(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["describe", "-f", str(repo / "examples/jobset-demo.yaml")], capsys)
    assert (code, err) == (0, "")
    assert out == SEED_TEXT


def test_describe_json(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(
        ["describe", "-f", str(repo / "examples/jobset-demo.yaml"), "-o", "json"], capsys
    )
    assert code == 0
    (item,) = json.loads(out)
    assert item["workload"] == {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "namespace": "default",
        "name": "demo",
    }
    assert item["definition"] == {"name": "jobset-x-k8s-io-jobset-v1alpha2", "origin": "catalog"}
    assert item["phase"] == ["Undefined"]
    leader, worker = item["components"]
    assert leader == {
        "name": "replicatedjob",
        "instance": "leader",
        "replicas": 1,
        "pod": {"requests": {"cpu": 8, "memory": 64 * 2**30, "nvidia.com/gpu": 4}},
        "total": {"cpu": 8, "memory": 64 * 2**30, "nvidia.com/gpu": 4},
    }
    assert worker["total"] == {"cpu": 16, "memory": 128 * 2**30, "nvidia.com/gpu": 8}
    assert item["gangs"] == [
        {
            "name": "jobset",
            "members": ["replicatedjob/leader", "replicatedjob/worker"],
            "minMember": 3,
        }
    ]
    assert item["total"] == {"pods": 3, "cpu": 24, "memory": 192 * 2**30, "nvidia.com/gpu": 12}


def test_describe_json_cpu_in_cores_and_every_resource(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo / "tests/definitions/samples/jobset.yaml"
    code, out, _ = run(["describe", "-f", str(path), "-o", "json"], capsys)
    assert code == 0
    first, second = json.loads(out)
    assert first["components"][0]["pod"]["requests"]["cpu"] == 4.5
    assert first["total"]["rdma/ib"] == 8
    assert second["workload"]["namespace"] == "default"


def test_describe_text_shows_extra_resources_and_pod_bearing_roots(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["describe", "-f", str(repo / "tests/definitions/samples/job.yaml")], capsys)
    assert code == 0
    assert "COMPONENT   REPLICAS   GPU   CPU    MEMORY    NVIDIA.COM/MIG-1G.10GB" not in out
    assert "nvidia.com/mig-1g.10gb" in out
    assert "`-- job   replicas: 4" in out
    assert "job         4          0     4400m" in out
    # two workloads, separated by a blank line
    assert out.count("Resources:") == 2


def test_describe_stdin(repo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    text = (repo / "tests/definitions/samples/leaderworkerset.yaml").read_text()
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, _ = run(["describe", "-f", "-", "-o", "json"], capsys)
    assert code == 0
    assert [w["workload"]["name"] for w in json.loads(out)] == ["vllm-multinode", "pairs"]


def test_describe_without_definition_exits_4(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "gizmo.yaml"
    path.write_text("apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g}\n")
    code, out, err = run(["describe", "-f", str(path)], capsys)
    assert (code, out) == (4, "")
    assert f"error: {path}: no workload definition covers example.com/v1 Gizmo" in err
    assert "--catalog DIR" in err
    assert "Traceback" not in err


def test_describe_skips_the_objects_that_travel_with_workloads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A ConfigMap or PersistentVolumeClaim next to the workload (as ``placer submit`` takes,
    and as upstream's own samples ship) is not a workload to describe: no exit 4 for it."""
    path = tmp_path / "with-claim.yaml"
    path.write_text(
        "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {name: models}\n"
        "spec: {accessModes: [ReadWriteOnce], resources: {requests: {storage: 1Gi}}}\n---\n"
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: uses-them}\n"
        "spec: {template: {spec: {containers: [{name: c, image: c}]}}}\n"
    )
    code, out, err = run(["describe", "-f", str(path), "-o", "json"], capsys)
    assert (code, err) == (0, "")
    assert [w["workload"]["name"] for w in json.loads(out)] == ["uses-them"]
    only = tmp_path / "only-config.yaml"
    only.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\n")
    code, out, err = run(["describe", "-f", str(only)], capsys)
    assert (code, out) == (1, "")
    assert f"error: {only}: no workloads found" in err


def test_a_pod_path_that_finds_nothing_is_a_warning_naming_it(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A definition whose pod template path misses the object (a typo) leaves pods with no
    containers: they were counted as asking for nothing, silently (0 GPUs for a GPU job)."""
    example = repo / "deploy/examples/definitions/training-example-com-trainingrun-v1.yaml"
    catalog = tmp_path / "definitions"
    catalog.mkdir()
    (catalog / "typo.yaml").write_text(
        example.read_text().replace(
            "podTemplateSpecPath: .spec.worker.template",
            "podTemplateSpecPath: .spec.workers.template",
        )
    )
    workload = str(repo / "deploy/examples/trainingrun.yaml")
    code, _, err = run(["describe", "-f", workload, "--catalog", str(catalog)], capsys)
    assert code == 0
    assert (
        "warning: " + workload + ": TrainingRun/resnet: definition "
        "'training-example-com-trainingrun-v1': component 'worker': the pod template has no "
        "containers (specDefinition.podTemplateSpecPath '.spec.workers.template' found none in "
        "this object): its 4 pod(s) are counted as asking for nothing"
    ) in err
    code, _, err = run(
        ["describe", "-f", workload, "--catalog", str(repo / "deploy/examples/definitions")],
        capsys,
    )
    assert (code, err) == (0, "")


def test_a_definition_given_as_a_workload_says_what_it_is(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`placer describe -f` on a Karta file (upstream's docs samples are Karta objects) was told
    to write a definition for the kind Karta."""
    path = str(repo / "catalog" / "batch-job-v1.yaml")
    code, out, err = run(["describe", "-f", path], capsys)
    assert (code, out) == (4, "")
    assert f"error: {path}: no workload definition covers run.ai/v1alpha1 Karta" in err
    assert "this is a Workload Map definition, not a workload: check it with `placer" in err
    assert "rootComponent.kind" not in err


def test_describe_malformed_yaml_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("kind: JobSet\nmetadata: {name: [\n")
    code, out, err = run(["describe", "-f", str(path)], capsys)
    assert (code, out) == (2, "")
    assert "not valid YAML: line 3" in err


def test_describe_reports_every_broken_object_and_prints_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "two.yaml"
    path.write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: ok}\nspec: {}\n---\n"
        "apiVersion: batch/v1\nkind: Job\nmetadata: {name: bad}\n"
        "spec: {template: {spec: {containers: [{name: c, resources: {requests: {cpu: lots}}}]}}}\n"
        "---\napiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g}\n"
    )
    code, out, err = run(["describe", "-f", str(path)], capsys)
    assert (code, out) == (1, "")
    assert f"{path}#2: Job/bad: definition 'batch-job-v1': component 'job'" in err
    assert "not a quantity: 'lots'" in err
    assert f"{path}#3: no workload definition covers" in err


def test_describe_with_a_user_catalog(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    catalog = tmp_path / "defs"
    catalog.mkdir()
    (catalog / "gizmo.yaml").write_text(
        "apiVersion: run.ai/v1alpha1\nkind: Karta\nmetadata: {name: gizmos}\nspec:\n"
        "  structureDefinition:\n    rootComponent:\n      name: gizmo\n"
        "      kind: {group: example.com, version: v1, kind: Gizmo}\n"
        "      specDefinition: {podSpecPath: .spec.pod}\n"
        "      scaleDefinition: {replicasPath: .spec.count}\n"
        "      statusDefinition: {statusMappings: {}}\n"
    )
    manifest = tmp_path / "g.yaml"
    manifest.write_text(
        "apiVersion: example.com/v1\nkind: Gizmo\nmetadata: {name: g, namespace: lab}\n"
        "spec:\n  count: 2\n"
        "  pod: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 2}}}]}\n"
    )
    code, out, _ = run(
        ["describe", "-f", str(manifest), "--catalog", str(catalog), "-o", "json"], capsys
    )
    assert code == 0
    (item,) = json.loads(out)
    assert item["definition"] == {"name": "gizmos", "origin": "file"}
    assert item["total"] == {"pods": 2, "nvidia.com/gpu": 4}


def test_definitions_list_and_show(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["definitions"], capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "ORIGIN", "COMPONENTS"]
    assert len(lines) == 24
    assert any("milvus, standalone, proxy, mixcoord, +15 more" in line for line in lines)
    code, out, _ = run(["definitions", "-o", "json"], capsys)
    items = json.loads(out)
    assert {
        "name": "batch-job-v1",
        "group": "batch",
        "version": "v1",
        "kind": "Job",
    }.items() <= next(i for i in items if i["name"] == "batch-job-v1").items()
    code, out, _ = run(["definitions", "ray-io-rayjob-v1"], capsys)
    assert code == 0
    assert "Kind:        ray.io/v1 RayJob" in out
    assert "`-- submitter" in out
    code, out, _ = run(["definitions", "ray-io-rayjob-v1", "-o", "json"], capsys)
    assert json.loads(out)["kind"] == "Karta"
    code, _, err = run(["definitions", "nope"], capsys)
    assert code == 4 and "no definition named 'nope'" in err


def test_validate(repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = repo / "catalog" / "batch-job-v1.yaml"
    code, out, err = run(["validate", str(good)], capsys)
    assert (code, err) == (0, "")
    assert out == f"OK: {good} is a valid definition (batch-job-v1: batch/v1 Job)\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        good.read_text().replace(
            "replicasPath: (.spec.parallelism // 1) as $p", "replicasPath: range(1) as $p"
        )
    )
    notdef = tmp_path / "pod.yaml"
    notdef.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    code, out, err = run(["validate", str(good), str(bad), str(notdef)], capsys)
    assert code == 1
    assert f"INVALID: {bad}\n  component 'job' spec.structureDefinition.rootComponent" in out
    assert "function 'range' may produce excessive output" in out
    assert f"INVALID: {notdef}\n  not a Workload Map definition: found v1 Pod" in out
    assert f"1 finding(s) in {bad}" in err
    broken = tmp_path / "broken.yaml"
    broken.write_text("a: [\n")
    code, _, err = run(["validate", str(broken)], capsys)
    assert code == 2 and "not valid YAML" in err


def test_validate_checks_every_file_of_a_directory(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A malformed file in a directory is reported and the others are still checked (it used
    to end the directory: upstream's resourceinterface-examples/ has one such file)."""
    (tmp_path / "a-broken.yaml").write_text("a: [\n")
    (tmp_path / "b-job.yaml").write_text((repo / "catalog" / "batch-job-v1.yaml").read_text())
    code, out, err = run(["validate", str(tmp_path)], capsys)
    assert code == 2
    assert f"error: {tmp_path / 'a-broken.yaml'}: not valid YAML" in err
    assert (
        out == f"OK: {tmp_path / 'b-job.yaml'} is a valid definition (batch-job-v1: batch/v1 Job)\n"
    )


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["describe"])
    assert info.value.code == 2
    assert "-f/--filename" in capsys.readouterr().err
