"""``placer simulate`` end to end: text and JSON agree, drains, reports, bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from placer.cli import main

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "clusters" / "demo.yaml"
OPENB4 = str(ROOT / "clusters" / "openb-4.yaml")
SPEC = "synthetic:gangs?seed=5&count=30"
FPGA_POD = """\
apiVersion: v1
kind: Pod
metadata: {name: fpga-job, namespace: default}
spec:
  containers:
  - name: main
    image: busybox
    resources:
      requests: {cpu: "1", example.com/fpga: "1"}
      limits: {example.com/fpga: "1"}
"""


def simulate(capsys: Any, *args: str) -> tuple[int, str, str]:
    code = main(["simulate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_carries_what_the_text_says(capsys: Any) -> None:
    args = ["--snapshot", OPENB4, "--workloads", SPEC, "--solver", "cpsat,first-fit"]
    code, text, _ = simulate(capsys, *args)
    assert code == 0
    code, raw, _ = simulate(capsys, *args, "-o", "json")
    assert code == 0
    doc = json.loads(raw)
    assert [r["solver"] for r in doc["runs"]] == ["cpsat", "first-fit"]
    for row in doc["comparison"]:
        line = next(x for x in text.splitlines() if x.startswith(row["solver"] + " "))
        assert f"{row['placed']}/{row['workloads']}" in line
        assert f"{row['placed_of_bound_pct']:.2f}%" in line
        gpus = row["gpus_placed"]
        assert (str(int(gpus)) if float(gpus).is_integer() else f"{gpus:g}") in line
    for run in doc["runs"]:
        section = text.split(f"== {run['solver']} ({run['mode']}) ==")[1]
        summary = run["summary"]
        assert f"{summary['placed']} of {summary['workloads']} workloads" in section
        assert f"{summary['placed_of_bound_pct']:.2f}% of the tightest bound" in section
        assert f"{summary['fragmentation']['whole_free_8gpu_nodes']} whole free 8-GPU" in section
        for cluster in run["clusters"]:
            assert re.search(rf"^{re.escape(cluster['name'])}\s+ready\s", section, re.M)
    table = text.split("\n\n")[2]
    for i, entry in enumerate(doc["runs"][0]["workloads"]):
        row = table.splitlines()[i + 1].split()
        ref = entry["workload"]
        assert row[0] == f"{ref['kind']}/{ref['namespace']}/{ref['name']}"
        assert row[2:] == [r["workloads"][i]["cluster"] or "-" for r in doc["runs"]]


def test_drain_turns_placements_into_refusals(capsys: Any) -> None:
    base = ["--snapshot", OPENB4, "--workloads", "synthetic:gangs?seed=5&count=60", "-o", "json"]
    _, raw, _ = simulate(capsys, *base)
    used = {w["cluster"] for w in json.loads(raw)["runs"][0]["workloads"]} - {None}
    drained = ["aws-use1", "gcp-usc1", "azure-weu"]  # the three 8-GPU clusters
    assert used & set(drained)
    args = [a for name in drained for a in ("--drain", name)]
    code, raw, _ = simulate(capsys, *base, *args)
    assert code == 0
    run = json.loads(raw)["runs"][0]
    assert {w["cluster"] for w in run["workloads"]}.isdisjoint(drained)
    states = {c["name"]: c["state"] for c in run["clusters"]}
    assert all(states[name] == "drained" for name in drained)
    refused = [w for w in run["workloads"] if w["cluster"] is None]
    assert refused, "only the T4/P100/V100 cluster is left: the big gangs cannot fit"
    for entry in refused:
        for name in drained:
            assert "drained (what-if: placer simulate --drain)" in entry["reasons"][name]


def test_report_writes_json_markdown_and_plots(capsys: Any, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    report = tmp_path / "report"
    code, _, err = simulate(
        capsys,
        *["--snapshot", OPENB4, "--workloads", SPEC, "--solver", "greedy,karmada"],
        *["--mode", "stream", "--report", str(report)],
    )
    assert code == 0
    assert "report:" in err
    doc = json.loads((report / "simulation.json").read_text())
    markdown = (report / "summary.md").read_text()
    for row in doc["comparison"]:
        assert f"| {row['solver']} | {row['placed']}/{row['workloads']} |" in markdown
    for name in ("placed.png", "admission.png", "utilisation.png"):
        data = (report / name).read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 5000
        assert f"![{name}]({name})" in markdown
    assert doc["runs"][0]["timeline"], "a stream report has a timeline"


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["--workloads", "trace:openb:nosuch"], 1, "unknown openb task list 'nosuch'"),
        (["--workloads", "trace:alibaba"], 1, "unknown workload source 'trace:alibaba'"),
        (["--workloads", SPEC, "--drain", "mars"], 1, "--drain mars: no such cluster"),
        (["--workloads", SPEC, "--solver", "magic"], 2, "unknown solver magic"),
        (["--workloads", SPEC, "--time-limit", "0"], 2, "--time-limit: must be a positive number"),
        (["--workloads", "missing-dir/"], 1, "missing-dir: no such file or directory"),
    ],
)
def test_bad_input_gets_a_clear_message(
    capsys: Any, args: list[str], code: int, message: str
) -> None:
    got, out, err = simulate(capsys, "--snapshot", OPENB4, *args)
    assert got == code
    assert message in err
    assert "Traceback" not in err and out == ""


def test_an_empty_workload_set_is_refused(capsys: Any, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a manifest")
    code, out, err = simulate(capsys, "--snapshot", OPENB4, "--workloads", str(tmp_path))
    assert code == 1
    assert f"{tmp_path}: holds no workload" in err and out == ""


def test_resources_no_node_offers_are_named(capsys: Any, tmp_path: Path) -> None:
    snapshot = tmp_path / "typo.yaml"
    snapshot.write_text(
        "apiVersion: placer.dev/v1alpha1\nkind: FleetSnapshot\nclusters:\n"
        "- name: only\n  nodeGroups:\n  - namePrefix: n\n    count: 2\n"
        "    allocatable: {cpu: '64', memory: 256Gi, nvidia.com/gpus: '8', pods: '110'}\n"
    )
    code, out, err = simulate(
        capsys,
        "--snapshot",
        str(snapshot),
        "--workloads",
        "synthetic:gangs?seed=1&count=5&max_gpus=8",
    )
    assert code == 0
    warning = next(line for line in err.splitlines() if "nvidia.com/gpu," in line)
    assert "which no node of" in warning and str(snapshot) in warning
    assert "did you mean nvidia.com/gpus?" in warning
    assert "warning: " in out  # the text output repeats it
    assert "Not placed: 5" in out


def test_demo_fleet_and_examples(capsys: Any) -> None:
    examples = str(ROOT / "examples")
    code, text, _ = simulate(capsys, "--snapshot", str(DEMO), "--workloads", examples)
    assert code == 0
    code, raw, _ = simulate(capsys, "--snapshot", str(DEMO), "--workloads", examples, "-o", "json")
    doc = json.loads(raw)
    seed = next(w for w in doc["runs"][0]["workloads"] if w["workload"]["kind"] == "JobSet")
    assert seed["cluster"] == "central"
    assert re.search(rf"{seed['workload']['name']}\s+\S+\s+central", text)
    code, raw, _ = simulate(
        capsys, "--snapshot", str(DEMO), "--workloads", examples, "--drain", "central", "-o", "json"
    )
    run = json.loads(raw)["runs"][0]
    refused = next(w for w in run["workloads"] if w["workload"] == seed["workload"])
    assert refused["cluster"] is None
    assert "drained" in refused["reasons"]["central"]
    assert "largest free block" in refused["reasons"]["west"]


def test_a_manifest_asking_for_a_resource_no_node_has(capsys: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "fpga.yaml"
    manifest.write_text(FPGA_POD)
    code, raw, err = simulate(
        capsys, "--snapshot", str(DEMO), "--workloads", str(manifest), "-o", "json"
    )
    assert code == 0
    assert "request example.com/fpga, which no node of" in err
    doc = json.loads(raw)
    assert doc["warnings"] and "example.com/fpga" in doc["warnings"][0]
    (entry,) = doc["runs"][0]["workloads"]
    assert entry["cluster"] is None
    assert all("example.com/fpga" in reason for reason in entry["reasons"].values())


def test_a_manifest_no_definition_covers(capsys: Any, tmp_path: Path) -> None:
    manifest = tmp_path / "cm.yaml"
    manifest.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n")
    code, out, err = simulate(capsys, "--snapshot", str(DEMO), "--workloads", str(manifest))
    assert code == 4
    assert "no workload definition covers v1 ConfigMap" in err and out == ""


def test_below_the_bound_the_summary_says_which_bound_and_why(tmp_path: Path, capsys: Any) -> None:
    """Two copies of the seed JobSet on the demo fleet: only one fits (only central has three
    nodes with 4 GPUs free), the LP bound counts fractions of the other."""
    seed = (ROOT / "examples" / "jobset-demo.yaml").read_text()
    (tmp_path / "a.yaml").write_text(seed)
    (tmp_path / "b.yaml").write_text(seed.replace("name: demo", "name: demo2"))
    code, out, _ = simulate(capsys, "--snapshot", str(DEMO), "--workloads", str(tmp_path))
    assert code == 0
    line = next(x for x in out.splitlines() if x.strip().startswith("of bound"))
    assert "% of the tightest bound; the bound is " in line
    assert "LP relaxation" in line
    assert "24 GPUs were asked, more than fits all together" in line
    assert "the decision is optimal" in line


RESERVE = ROOT / "deploy" / "examples" / "reservations"


def test_reservations_start_the_gang_and_show(capsys: Any) -> None:
    """docs/reservations.md's example: without reservations the four-node gang never starts
    (one-node jobs without an estimate take each node that frees and never leave); with them
    it starts when the first jobs are expected to end, and the five-minute job backfills."""
    args = [
        "--snapshot",
        str(RESERVE / "fleet.yaml"),
        "--workloads",
        str(RESERVE / "jobs.yaml"),
        "--mode",
        "stream",
        "--solver",
        "greedy",
    ]
    code, raw, _ = simulate(capsys, *args, "-o", "json")
    starts = {w["workload"]["name"]: w["start_s"] for w in json.loads(raw)["runs"][0]["workloads"]}
    assert code == 0 and starts["pretrain"] is None
    code, raw, _ = simulate(capsys, *args, "--reserve-after", "0", "-o", "json")
    run = json.loads(raw)["runs"][0]
    starts = {w["workload"]["name"]: w["start_s"] for w in run["workloads"]}
    assert code == 0
    assert (starts["pretrain"], starts["eval"], starts["sweep-0"]) == (602.0, 5.0, 1202.0)
    first = run["reservations"][0]
    assert first["workload"] == "Job/research/pretrain"
    assert (first["start_s"], first["started_s"], first["outcome"]) == (602.0, 602.0, "placed")
    code, text, _ = simulate(capsys, *args, "--reserve-after", "0")
    assert code == 0
    assert re.search(r"Job/research/pretrain\s+32\s+lab\s+4\s+3s\s+602s\s+602s\s+placed", text)


def test_the_report_lists_reservations(capsys: Any, tmp_path: Path) -> None:
    report = tmp_path / "report"
    code, _, _ = simulate(
        capsys,
        *["--snapshot", str(RESERVE / "fleet.yaml"), "--workloads", str(RESERVE / "jobs.yaml")],
        *["--mode", "stream", "--solver", "greedy", "--reserve-after", "0"],
        *["--report", str(report)],
    )
    assert code == 0
    markdown = (report / "summary.md").read_text()
    assert "Reservations (2, docs/reservations.md):" in markdown
    assert "| `Job/research/pretrain` | 32 | lab | 4 | 3 | 602 | 602 | placed |" in markdown


def test_reservation_options_need_a_stream(capsys: Any) -> None:
    code, _, err = simulate(
        capsys, "--snapshot", OPENB4, "--workloads", SPEC, "--reserve-after", "60"
    )
    assert code != 0 and "--reserve-after needs --mode stream" in err


def test_a_reservation_may_evict_for_its_gang(capsys: Any) -> None:
    """The example again with --reserve-preempt-after 60: the four-node gang waited a minute,
    its start is 10 minutes away, so the one-node jobs in its way are evicted and it starts."""
    args = [
        *["--snapshot", str(RESERVE / "fleet.yaml"), "--workloads", str(RESERVE / "jobs.yaml")],
        *["--mode", "stream", "--solver", "greedy", "--reserve-after", "0"],
        *["--reserve-preempt-after", "60", "--reserve-preempt-slack", "0"],
    ]
    code, raw, _ = simulate(capsys, *args, "-o", "json")
    run = json.loads(raw)["runs"][0]
    assert code == 0
    first = run["reservations"][0]
    assert first["workload"] == "Job/research/pretrain"
    assert (first["start_s"], first["ended_s"], first["outcome"]) == (602.0, 63.0, "placed")
    (eviction,) = run["preemptions"]
    assert eviction["preemptor"] == "Job/research/pretrain" and eviction["time_s"] == 63.0
    assert {v["reason"] for v in eviction["victims"]} == {"reservation"}
    code, text, _ = simulate(capsys, *args)
    assert code == 0 and "Evictions for reservations: 1 (" in text


def test_a_drain_horizon_keeps_long_and_unknown_work_off_its_cluster(capsys: Any) -> None:
    """The example with a 15-minute drain horizon on its one cluster: the 10-minute jobs and
    the gang run as before, the sweep jobs (no run time given) never start there, and say
    why."""
    args = [
        *["--snapshot", str(RESERVE / "fleet.yaml"), "--workloads", str(RESERVE / "jobs.yaml")],
        *["--mode", "stream", "--solver", "greedy", "--reserve-after", "0"],
        *["--reserve-horizon", "900", "--reserve-horizon-cluster", "lab"],
    ]
    code, raw, _ = simulate(capsys, *args, "-o", "json")
    assert code == 0
    run = json.loads(raw)["runs"][0]
    started = {w["workload"]["name"]: w for w in run["workloads"]}
    pretrain = started["pretrain"]
    assert pretrain["start_s"] == 602.0
    for name in ("sweep-0", "sweep-1", "sweep-2", "sweep-3"):
        sweep = started[name]
        assert sweep["start_s"] is None
        assert "taint placer.dev/drain-horizon=lab" in json.dumps(sweep["reasons"])


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reserve-preempt-after", "60"], "--reserve-preempt-after goes with --reserve-after"),
        (
            ["--reserve-after", "0", "--reserve-preempt-slack", "60"],
            "--reserve-preempt-slack goes with --reserve-preempt-after",
        ),
        (["--reserve-after", "0", "--reserve-preempt-after", "-1"], "--reserve-preempt-after"),
        (["--reserve-horizon", "600"], "--reserve-horizon goes with --reserve-after"),
        (["--reserve-after", "0", "--reserve-horizon", "0"], "--reserve-horizon"),
        (
            ["--reserve-after", "0", "--reserve-horizon-cluster", "a"],
            "--reserve-horizon-cluster goes with --reserve-horizon",
        ),
        (
            ["--reserve-after", "0", "--reserve-horizon", "60", "--reserve-horizon-cluster", "x"],
            "--reserve-horizon-cluster x: no such cluster in",
        ),
    ],
)
def test_reservation_preemption_options_are_checked(
    capsys: Any, extra: list[str], message: str
) -> None:
    code, _, err = simulate(
        capsys, "--snapshot", OPENB4, "--workloads", SPEC, "--mode", "stream", *extra
    )
    assert code != 0 and message in err
