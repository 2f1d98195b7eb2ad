"""Benchmark: 500 workloads submitted to 8 loopback clusters, one command at a time vs one batch.

Issue 6 target: report workloads/s for both; aim for >= 50/s in batch.

Setup: the 8-cluster fleet ``clusters/openb-8.yaml`` (about 1,200 nodes, 6,200 GPUs) served
by ``placer fleet up --no-pods`` in its own process (8 loopback HTTPS API servers; pods are
not materialised, so every placement stays *in flight* and only the in-flight ledger keeps
later decisions from overcommitting — the hardest case for the ledger). The workloads are
``--workloads`` JobSets drawn with ``--seed`` (1-4 replicated jobs of 1-2 pods, 1/2/4 GPUs
per pod, 4-32 cores, 16-256 GiB, namespaces team-a..team-d).

Modes, each on a freshly started fleet:

* ``sequential``: one ``placer submit -f one.yaml`` **process** per workload, one after the
  other, as a user or a CI job would run them (process start-up included; reported
  separately as the time of ``placer --version``);
* ``sequential-inprocess``: the same 500 submissions through :func:`placer.dispatch.submit.
  submit` in this process (no interpreter start-up: the cost of the pipeline itself);
* ``batch``: one ``placer submit`` process with all workloads in one file.

Checks after each mode (the benchmark fails if one does not hold): every workload decided
once (placed or refused), each placed one on exactly one cluster with its placement record,
and all placed workloads' pods — on the nodes of their records, with the requests of their
definitions — charged to the initial capacity leave no node with negative free capacity (no
overcommit). The in-flight TTL is set longer than the run (``--in-flight-ttl``), since pods
never appear here. Per-step timings of the batch come from the command's JSON.

Side by side (``--baseline DIR``): the batch mode run alternately with the code of another
checkout (``DIR``, e.g. a ``git worktree`` of the commit before a change; its ``placer submit``
runs with ``PYTHONPATH=DIR``) and with this one, ``--repeat`` times each on fresh fleets, so
that both see the same machine load; the medians are compared. This is how the cost of the
workload claims (issue 12) was measured.

Run: ``python -m simulations.bench_submit`` (about 30 minutes on 2 busy cores;
``--sequential N`` runs only N commands as processes and reports what it ran; ``--modes
batch`` only the batch). Results in ``simulations/results/bench_submit.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

from placer.definitions import Catalog, decompose
from placer.dispatch import Manifest
from placer.dispatch.existing import placement_from_record
from placer.dispatch.ledger import read_entries
from placer.dispatch.record import PlacementRecord
from placer.dispatch.submit import submit
from placer.fleet import fleet_from_kubeconfigs, gather_fleet, open_clients
from placer.snapshot import load_snapshot
from placer.solver import charge
from simulations import benchmarking

ROOT = Path(__file__).resolve().parents[1]
RESULTS = Path(__file__).resolve().parent / "results"
SNAPSHOT = ROOT / "clusters" / "openb-8.yaml"
#: longer than the whole run: pods never appear (--no-pods), and every placement must keep
#: counting, or later decisions would rightly reuse the capacity of expired entries
TTL = 7200.0
COMMON = ("-o", "json", "--in-flight-ttl", str(TTL))


def workloads(count: int, seed: int) -> list[dict[str, Any]]:
    """``count`` JobSet manifests (deterministic for ``seed``)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        jobs = []
        for j in range(rng.randint(1, 4)):
            gpus = rng.choice([1, 2, 4])
            jobs.append(
                {
                    "name": f"job{j}",
                    "replicas": rng.randint(1, 2),
                    "template": {
                        "spec": {
                            "parallelism": 1,
                            "completions": 1,
                            "template": {
                                "spec": {
                                    "restartPolicy": "Never",
                                    "containers": [
                                        {
                                            "name": "main",
                                            "image": "trainer:1",
                                            "resources": {
                                                "requests": {
                                                    "cpu": str(rng.choice([4, 8, 16, 32])),
                                                    "memory": f"{rng.choice([16, 64, 128, 256])}Gi",
                                                },
                                                "limits": {"nvidia.com/gpu": gpus},
                                            },
                                        }
                                    ],
                                }
                            },
                        }
                    },
                }
            )
        out.append(
            {
                "apiVersion": "jobset.x-k8s.io/v1alpha2",
                "kind": "JobSet",
                "metadata": {"name": f"w{i:04d}", "namespace": f"team-{'abcd'[i % 4]}"},
                "spec": {"replicatedJobs": jobs},
            }
        )
    return out


@contextmanager
def virtual_fleet(workdir: Path) -> Iterator[Path]:
    """``placer fleet up SNAPSHOT --no-pods`` in its own process; yields the kubeconfig."""
    with benchmarking.virtual_fleet(SNAPSHOT, workdir, "--no-pods") as kubeconfig:
        yield kubeconfig


def placer(
    *args: str, source: Path | None = None
) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ``placer ARGS`` (the code of checkout ``source`` when given); seconds and result."""
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    start = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-m", "placer", *args],
        capture_output=True,
        text=True,
        check=False,
        env=env,
        cwd=source,
    )
    return time.perf_counter() - start, result


def check(kubeconfig: Path, decided: dict[str, str | None]) -> dict[str, Any]:
    """Each placed workload on exactly one cluster, and no node overcommitted: every placed
    object's pods, on the nodes of its placement record (requests from its definition),
    charged to the initial capacity (pods are never materialised: the initial capacity is
    what gathering still sees), leave no node with negative free capacity."""
    catalog = Catalog.builtin()
    config = fleet_from_kubeconfigs([kubeconfig])
    clients = open_clients(config)
    try:
        seen: dict[str, list[str]] = {}
        placements = []
        entries = 0
        for name, client in clients.items():
            for namespace in ("team-a", "team-b", "team-c", "team-d"):
                items = client.list("jobset.x-k8s.io/v1alpha2", "JobSet", namespace=namespace).items
                for item in items:
                    seen.setdefault(item["metadata"]["name"], []).append(name)
                    record = PlacementRecord.from_object(item)
                    if record is None or record.cluster != name:
                        raise SystemExit(f"{item['metadata']['name']}: no record for {name}")
                    manifest = Manifest(item, decompose(item, catalog))
                    placements.append(placement_from_record(manifest, name, record))
            entries += len(read_entries(client))
        twice = {w: c for w, c in seen.items() if len(c) > 1}
        placed = {w for w, c in decided.items() if c}
        if twice or set(seen) != placed:
            raise SystemExit(
                f"placement check failed: twice={twice}, "
                f"missing={placed - set(seen)}, extra={set(seen) - placed}"
            )
        charged = charge(gather_fleet(config), placements)
        over = [
            (c.name, n.name, r)
            for c in charged.clusters
            for n in c.nodes
            for r, v in n.free.items()
            if v < 0
        ]
        if over:
            raise SystemExit(f"overcommit: {over[:5]}")
        gpus = sum(
            n.allocatable.get("nvidia.com/gpu", 0) - n.free.get("nvidia.com/gpu", 0)
            for c in charged.clusters
            for n in c.nodes
        )
        return {
            "placed": len(placed),
            "in_flight_entries": entries,
            "gpus_placed": gpus,
            "overcommitted_nodes": 0,
            "placed_twice": 0,
        }
    finally:
        for client in clients.values():
            client.close()


def measured(
    seconds: float, count: int, kubeconfig: Path, decided: dict[str, str | None]
) -> dict[str, Any]:
    """Rate of a mode and the checks of its outcome (see :func:`check`)."""
    return {
        "seconds": round(seconds, 2),
        "workloads_per_s": round(count / seconds, 2),
        **check(kubeconfig, decided),
    }


def run_sequential(docs: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    files = []
    for doc in docs:
        path = workdir / f"{doc['metadata']['name']}.yaml"
        path.write_text(yaml.safe_dump(doc))
        files.append(path)
    decided: dict[str, str | None] = {}
    with virtual_fleet(workdir) as kubeconfig:
        start = time.perf_counter()
        for path in files:
            _, result = placer("submit", "-f", str(path), *COMMON, "--kubeconfig", str(kubeconfig))
            data = json.loads(result.stdout)
            for p in data["placements"]:
                decided[p["workload"]["name"]] = p["cluster"]
            for u in data["unplaced"]:
                decided[u["workload"]["name"]] = None
        return measured(time.perf_counter() - start, len(docs), kubeconfig, decided)


def run_sequential_inprocess(docs: list[dict[str, Any]], workdir: Path) -> dict[str, Any]:
    catalog = Catalog.builtin()
    manifests = [Manifest(d, decompose(d, catalog)) for d in docs]
    decided: dict[str, str | None] = {}
    with virtual_fleet(workdir) as kubeconfig:
        config = fleet_from_kubeconfigs([kubeconfig])
        start = time.perf_counter()
        for manifest in manifests:
            clients = open_clients(config)  # each command opens its own connections
            try:
                report = submit([manifest], config, clients, in_flight_ttl=TTL)
            finally:
                for client in clients.values():
                    client.close()
            [outcome] = report.outcomes
            decided[manifest.ref.name] = outcome.cluster if outcome.placed else None
        return measured(time.perf_counter() - start, len(docs), kubeconfig, decided)


def run_batch(
    docs: list[dict[str, Any]], workdir: Path, source: Path | None = None
) -> dict[str, Any]:
    path = workdir / "all.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    with virtual_fleet(workdir) as kubeconfig:
        seconds, result = placer(
            "submit", "-f", str(path), *COMMON, "--kubeconfig", str(kubeconfig), source=source
        )
        if result.returncode not in (0, 1):
            raise SystemExit(result.stderr)
        data = json.loads(result.stdout)
        decided: dict[str, str | None] = {
            p["workload"]["name"]: p["cluster"] for p in data["placements"]
        }
        decided.update({u["workload"]["name"]: None for u in data["unplaced"]})
        result_row = measured(seconds, len(docs), kubeconfig, decided)
    return {**result_row, "timings": data["timings"], "solver_status": data["summary"]["status"]}


def side_by_side(
    docs: list[dict[str, Any]], workdir: Path, baseline: Path, repeat: int
) -> dict[str, Any]:
    """The batch mode alternately with the baseline checkout's code and this one's."""
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
    for i in range(repeat):
        for name, source in (("baseline", baseline), ("current", None)):
            row = run_batch(docs, workdir, source)
            print(
                f"{name} {i + 1}/{repeat}: {row['workloads_per_s']}/s {row['timings']}", flush=True
            )
            runs[name].append(row)
    medians = {
        name: statistics.median(r["workloads_per_s"] for r in rows) for name, rows in runs.items()
    }
    commit = subprocess.run(
        ["git", "-C", str(baseline), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return {
        "baseline": commit or str(baseline),
        "repeat": repeat,
        "runs": runs,
        "median_workloads_per_s": medians,
        "ratio": round(medians["current"] / medians["baseline"], 3),
    }


def machine() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "placer": version("placer"),
        "kubernetes_client": version("kubernetes"),
        "ortools": version("ortools"),
    }


def markdown(report: dict[str, Any]) -> str:
    m = report["modes"]
    lines = [
        "# bench_submit: 500 workloads to 8 loopback clusters",
        "",
        f"Date {report['date']}, seed {report['seed']}, {report['workloads']} JobSets, fleet "
        f"{report['fleet']['clusters']} clusters / {report['fleet']['nodes']} nodes / "
        f"{report['fleet']['gpus']} GPUs, python {report['machine']['python']}, "
        f"{report['machine']['cpus']} cores, load {report['machine']['loadavg_start']}.",
        "",
        "| mode | workloads | seconds | workloads/s | placed | in-flight entries "
        "| overcommitted nodes |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in m.items():
        lines.append(
            f"| {name} | {row['workloads']} | {row['seconds']} | {row['workloads_per_s']} | "
            f"{row['placed']} | {row['in_flight_entries']} | {row['overcommitted_nodes']} |"
        )
    lines += ["", f"`placer --version` (interpreter and CLI start-up): {report['startup_s']} s."]
    if "batch" in m:
        lines.append(
            f"Batch steps (s): {m['batch']['timings']}; solver status "
            f"{m['batch']['solver_status']}; target >= 50 workloads/s in batch: "
            f"{'met' if m['batch']['workloads_per_s'] >= 50 else 'NOT met'}."
        )
    if "batch_speedup" in report:
        lines.append(f"Batch vs one command at a time (processes): {report['batch_speedup']}x.")
    pair = report.get("side_by_side")
    if pair:
        lines += [
            "",
            f"## Side by side with {pair['baseline']} (batch, alternating, "
            f"{pair['repeat']} runs each)",
            "",
            "| code | workloads/s per run | median | dispatch step (s) per run |",
            "|---|---|---|---|",
        ]
        for name, rows in pair["runs"].items():
            rates = ", ".join(str(r["workloads_per_s"]) for r in rows)
            steps = ", ".join(str(r["timings"].get("dispatch")) for r in rows)
            median = pair["median_workloads_per_s"][name]
            lines.append(f"| {name} | {rates} | {median} | {steps} |")
        lines += ["", f"Current / baseline (medians): {pair['ratio']}."]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=500)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--sequential",
        type=int,
        default=None,
        help="workloads for the sequential process mode (default: all)",
    )
    parser.add_argument(
        "--modes",
        default="batch,sequential-inprocess,sequential",
        help="comma-separated modes to run (default: all three)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="also run the batch side by side with the code of this checkout",
    )
    parser.add_argument("--repeat", type=int, default=3, help="side-by-side runs of each code")
    parser.add_argument("--no-write", action="store_true", help="do not write results")
    args = parser.parse_args(argv)
    modes = {m.strip() for m in args.modes.split(",") if m.strip()}
    docs = workloads(args.workloads, args.seed)
    snapshot = load_snapshot(SNAPSHOT)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "seed": args.seed,
        "workloads": args.workloads,
        "machine": machine(),
        "fleet": {
            "snapshot": str(SNAPSHOT.relative_to(ROOT)),
            "clusters": len(snapshot.clusters),
            "nodes": sum(len(c.nodes) for c in snapshot.clusters),
            "gpus": sum(c.free().get("nvidia.com/gpu", 0) for c in snapshot.clusters),
        },
        "modes": {},
    }
    startup, _ = placer("--version")
    report["startup_s"] = round(startup, 3)
    with tempfile.TemporaryDirectory(prefix="bench-submit-") as tmp:
        workdir = Path(tmp)
        if args.baseline is not None:
            print(f"side by side with {args.baseline} ...", flush=True)
            report["side_by_side"] = side_by_side(docs, workdir, args.baseline, args.repeat)
        if "batch" in modes:
            print("batch ...", flush=True)
            report["modes"]["batch"] = {"workloads": len(docs), **run_batch(docs, workdir)}
            print(report["modes"]["batch"], flush=True)
        if "sequential-inprocess" in modes:
            print("sequential, in process ...", flush=True)
            report["modes"]["sequential-inprocess"] = {
                "workloads": len(docs),
                **run_sequential_inprocess(docs, workdir),
            }
            print(report["modes"]["sequential-inprocess"], flush=True)
        if "sequential" in modes:
            subset = docs[: args.sequential] if args.sequential else docs
            print(f"sequential, {len(subset)} processes ...", flush=True)
            report["modes"]["sequential"] = {
                "workloads": len(subset),
                **run_sequential(subset, workdir),
            }
            print(report["modes"]["sequential"], flush=True)
    if {"batch", "sequential"} <= set(report["modes"]):
        report["batch_speedup"] = round(
            report["modes"]["batch"]["workloads_per_s"]
            / report["modes"]["sequential"]["workloads_per_s"],
            1,
        )
    report["machine"]["loadavg_end"] = os.getloadavg()
    text = markdown(report)
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bench_submit.json").write_text(json.dumps(report, indent=2) + "\n")
        (RESULTS / "bench_submit.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
