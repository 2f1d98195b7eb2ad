"""Benchmark: the placement controller, 1,000 workloads created on a hub, 8 loopback members.

Issue 7 target: workloads/s from creation on the hub to dispatched on a member; aim >= 100/s
(for context: Karmada's published scheduler rate is 15-22 bindings/s, MultiKueue's 1.3/s at
its default limits — published figures, not measured here).

Setup, every part in its own process (2 cores shared by all of them):

* **members**: the 8 clusters of ``clusters/openb-8.yaml`` (about 1,200 nodes and 6,200 GPUs),
  one loopback HTTPS API server process each (:class:`placer.testing.ApiServerProcess`, seeded
  with the snapshot's nodes) — or all 8 in one ``placer fleet up --no-pods`` process with
  ``--members fleet-up``, as ``bench_submit`` runs them. Pods are not materialised, so every
  placement stays in flight and only the in-flight ledger keeps later cycles from
  overcommitting;
* **hub**: a loopback API server process serving the JobSet CRD, namespaces ``team-a`` ..
  ``team-d`` and ``placer-system``;
* **controller**: ``placer controller`` with its defaults (1 s batch window, leader election
  on, CP-SAT with a 1 s limit per cycle, decisions dispatched in 4 concurrent parts);
* **this process**: creates the workloads on the hub (4 client threads, as fast as the hub
  takes them) and watches the members (one watch per member, label ``placer.dev/hub``) and
  the hub, noting when each copy appears and when each hub object gets ``Placed``.

Workloads: ``--workloads`` JobSets (seed ``--seed``): 1-2 replicated jobs of 1-2 pods, 1 or 2
GPUs, 2-8 cores and 8-64 GiB per pod, namespaces team-a..team-d, label ``placer.dev/queue``;
together well within the fleet's free capacity, so each one should be placed.

Measured: ``dispatched_per_s`` = workloads dispatched / (last copy seen on a member − first
creation on the hub) — the headline; ``recorded_per_s`` the same up to the last ``Placed=True``
on the hub; creation-to-dispatch latency percentiles; the creation rate alone (the same
number of objects created on the hub before the controller starts, in a namespace nobody
placed: the ceiling this client and hub allow); the controller's cycles and solver time from
its ``/metrics``; the CPU time each process used meanwhile (``/proc``), since on a shared
2-core machine the wall-clock rate depends on the load, and CPU per workload much less.

Checks (the benchmark fails if one does not hold): every workload on exactly one member, the
one its hub record names; the in-flight ledger entries on the members, charged to the initial
capacity, leave no node with negative free capacity.

Side by side (``--baseline DIR``): the runs alternate between the controller of another
checkout (``DIR``, e.g. a ``git worktree`` of the commit before a change; its ``placer
controller`` runs with ``PYTHONPATH=DIR``) and this one's, ``--repeat`` times each (the first
of each pair alternating too), on fresh hubs and members, so that both see the same machine
load; the medians are compared. Everything but the controller is this checkout's.

Run: ``python -m simulations.bench_controller`` (three runs, about 2 minutes; the median is
the headline). Results in
``simulations/results/bench_controller.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from placer.fleet import fleet_from_kubeconfigs
from placer.kube import ClientSettings, KubeClient, Listed, load_kubeconfigs, open_client
from placer.snapshot import load_snapshot
from placer.testing import ApiServerProcess, write_kubeconfig
from placer.virtual.seeding import cluster_objects
from simulations.bench_submit import SNAPSHOT, machine, virtual_fleet
from simulations.bench_submit import check as check_placements

RESULTS = Path(__file__).resolve().parent / "results"
NAMESPACES = ("team-a", "team-b", "team-c", "team-d")
JOBSET = ("jobset.x-k8s.io/v1alpha2", "JobSet")
JOBSET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "jobsets.jobset.x-k8s.io"},
    "spec": {
        "group": "jobset.x-k8s.io",
        "names": {"plural": "jobsets", "singular": "jobset", "kind": "JobSet"},
        "scope": "Namespaced",
        "versions": [
            {"name": "v1alpha2", "served": True, "storage": True, "subresources": {"status": {}}}
        ],
    },
}


def workloads(count: int, seed: int, *, queue: bool = True, namespace: str = "") -> list[Any]:
    """``count`` JobSet manifests (deterministic for ``seed``; see the module docstring)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        jobs = []
        for j in range(rng.randint(1, 2)):
            pod = {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "main",
                        "image": "trainer",
                        "resources": {
                            "requests": {
                                "cpu": str(rng.choice((2, 4, 8))),
                                "memory": f"{rng.choice((8, 16, 32, 64))}Gi",
                            },
                            "limits": {"nvidia.com/gpu": str(rng.choice((1, 2)))},
                        },
                    }
                ],
            }
            jobs.append(
                {
                    "name": f"job{j}",
                    "replicas": rng.randint(1, 2),
                    "template": {"spec": {"template": {"spec": pod}}},
                }
            )
        labels = {"placer.dev/queue": "bench"} if queue else {}
        out.append(
            {
                "apiVersion": JOBSET[0],
                "kind": JOBSET[1],
                "metadata": {
                    "name": f"w{i:05d}",
                    "namespace": namespace or NAMESPACES[i % len(NAMESPACES)],
                    "labels": labels,
                },
                "spec": {"suspend": True, "replicatedJobs": jobs},
            }
        )
    return out


def controller_command(hub_kubeconfig: Path, *options: str) -> list[str]:
    """``placer controller`` for the hub of ``hub_kubeconfig`` (context ``hub``), with
    ``options``."""
    return [
        sys.executable,
        "-m",
        "placer",
        "controller",
        "--hub-context",
        "hub",
        "--hub-kubeconfig",
        str(hub_kubeconfig),
        *options,
    ]


def wait_leading(port: int, process: subprocess.Popen[bytes], timeout: float = 120.0) -> None:
    """Until the controller serving ``/readyz`` on ``port`` leads (it exits: the run fails)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            ready = httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2)
            if ready.status_code == 200 and "leading" in ready.text:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or process.poll() is not None:
            raise SystemExit("the controller did not become ready")
        time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used so far, from ``/proc`` (0 if unknown)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _client(kubeconfig: Path, context: str) -> KubeClient:
    settings = ClientSettings(pool_size=8, request_timeout=60)
    return open_client(load_kubeconfigs([kubeconfig]), context, settings=settings)


def create_all(kubeconfig: Path, docs: list[Any], threads: int = 4) -> dict[str, float]:
    """Create ``docs`` on the hub with ``threads`` clients; returns name -> creation time."""
    created: dict[str, float] = {}
    lock = threading.Lock()
    clients = [_client(kubeconfig, "hub") for _ in range(threads)]

    def work(index: int) -> None:
        client = clients[index]
        for doc in docs[index::threads]:
            started = time.monotonic()
            client.create(doc)
            with lock:
                created[doc["metadata"]["name"]] = started

    with ThreadPoolExecutor(max_workers=threads) as pool:
        list(pool.map(work, range(threads)))
    for client in clients:
        client.close()
    return created


class Watch:
    """Notes the first time each object shows up (or satisfies ``accept``) in a watch."""

    def __init__(self, client: KubeClient, accept: Any = None, selector: str | None = None):
        self.client = client
        self.accept = accept or (lambda obj: True)
        self.seen: dict[str, float] = {}
        self.where: dict[str, str] = {}
        self.lock = threading.Lock()
        self.watcher = client.watch(*JOBSET, label_selector=selector)
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _note(self, obj: dict[str, Any]) -> None:
        name = obj["metadata"]["name"]
        if name in self.seen or not self.accept(obj):
            return
        with self.lock:
            self.seen[name] = time.monotonic()
            self.where[name] = self.client.name

    def _run(self) -> None:
        for item in self.watcher:
            if isinstance(item, Listed):
                for obj in item.items:
                    self._note(obj)
            elif item.type != "DELETED":
                self._note(item.object)

    def stop(self) -> None:
        self.watcher.stop()


def _placed(obj: dict[str, Any]) -> bool:
    for condition in (obj.get("status") or {}).get("conditions") or ():
        if condition.get("type") == "Placed" and condition.get("reason") in (
            "Placed",
            "Unschedulable",
            "DispatchFailed",
        ):
            return True
    return False


def _metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            total += float(line.split()[-1])
    return total


@contextmanager
def member_processes(workdir: Path, pids: list[int] | None = None) -> Iterator[Path]:
    """One loopback API server process per cluster of the snapshot; yields the kubeconfig
    (and puts the servers' process ids in ``pids``)."""
    snapshot = load_snapshot(SNAPSHOT)
    servers: dict[str, ApiServerProcess] = {}
    try:
        for cluster in snapshot.clusters:
            seed = workdir / f"{cluster.name}.jsonl"
            with seed.open("w") as handle:
                for obj in cluster_objects(cluster):
                    handle.write(json.dumps(obj) + "\n")
            servers[cluster.name] = ApiServerProcess(seed=[seed], name=cluster.name).start()
            if pids is not None:
                pids.append(int(servers[cluster.name].pid or 0))
        kubeconfig = write_kubeconfig(workdir / "members.kubeconfig", servers)
        for name in servers:
            with _client(kubeconfig, name) as client:
                client.create(JOBSET_CRD)
        yield kubeconfig
    finally:
        for server in servers.values():
            server.stop()


def commit_of(directory: Path) -> str:
    """The git commit checked out in ``directory`` (``""`` outside a git checkout)."""
    try:
        done = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return ""
    return done.stdout.strip()


def run(args: argparse.Namespace, workdir: Path, source: Path | None = None) -> dict[str, Any]:
    """One run; the controller is the code of checkout ``source`` when given."""
    docs = workloads(args.workloads, args.seed)
    env = dict(os.environ)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    member_pids: list[int] = []
    members = (
        member_processes(workdir, member_pids)
        if args.members == "processes"
        else virtual_fleet(workdir)
    )
    with (
        members as members_kubeconfig,
        ApiServerProcess(name="hub") as hub_server,
    ):
        hub_kubeconfig = write_kubeconfig(workdir / "hub.kubeconfig", {"hub": hub_server})
        hub = _client(hub_kubeconfig, "hub")
        hub.create(JOBSET_CRD)
        for namespace in (*NAMESPACES, "placer-system", "bench-baseline"):
            hub.ensure_namespace(namespace)
        # the ceiling: creating as many objects with nobody placing them
        baseline = workloads(args.workloads, args.seed + 1, queue=False, namespace="bench-baseline")
        started = time.monotonic()
        create_all(hub_kubeconfig, baseline)
        create_only = time.monotonic() - started

        port = _free_port()
        log = open(workdir / "controller.log", "wb")
        controller = subprocess.Popen(
            controller_command(
                hub_kubeconfig,
                "--kubeconfig",
                str(members_kubeconfig),
                "--metrics-port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--log-level",
                "info",
            ),
            stdout=log,
            stderr=log,
            env=env,
            cwd=source,
        )
        try:
            wait_leading(port, controller)
            config = fleet_from_kubeconfigs([members_kubeconfig])
            member_clients = {name: _client(members_kubeconfig, name) for name in config.names}
            member_watches = [
                Watch(client, selector="placer.dev/hub=hub") for client in member_clients.values()
            ]
            hub_watch = Watch(_client(hub_kubeconfig, "hub"), accept=_placed)
            time.sleep(1.0)  # watches listed

            pids = {"controller": [controller.pid], "hub": [int(hub_server.pid or 0)]}
            if member_pids:
                pids["members"] = member_pids
            cpu_before = {k: sum(cpu_seconds(p) for p in v) for k, v in pids.items()}
            created = create_all(hub_kubeconfig, docs)
            first = min(created.values())
            created_in = max(created.values()) - first
            names = set(created)
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                if names <= set(hub_watch.seen):
                    break
                time.sleep(0.2)
            time.sleep(0.5)
            dispatched: dict[str, float] = {}
            where: dict[str, list[str]] = {}
            for watch in member_watches:
                with watch.lock:
                    for name, at in watch.seen.items():
                        dispatched[name] = min(at, dispatched.get(name, at))
                        where.setdefault(name, []).append(watch.client.name)
            decided = dict(hub_watch.seen)
            cpu = {
                k: round(sum(cpu_seconds(p) for p in v) - cpu_before[k], 2) for k, v in pids.items()
            }
            metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
            for watch in (*member_watches, hub_watch):
                watch.stop()
        finally:
            controller.send_signal(signal.SIGTERM)
            code = controller.wait(timeout=60)
            log.close()
        hub_objects = {
            o["metadata"]["name"]: o
            for ns in NAMESPACES
            for o in hub.list(*JOBSET, namespace=ns).items
        }
        checks = check(members_kubeconfig, hub_objects, where)
        for client in member_clients.values():
            client.close()
        hub.close()

    placed = [n for n in names if n in dispatched]
    latencies = sorted(dispatched[n] - created[n] for n in placed)
    last_dispatch = max(dispatched[n] for n in placed)
    recorded = [
        decided[n]
        for n in placed
        if n in decided
        and any(
            c.get("reason") == "Placed"
            for c in (hub_objects[n].get("status") or {}).get("conditions") or ()
        )
    ]
    snapshot = load_snapshot(SNAPSHOT)
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "controller_code": commit_of(source or Path(__file__).resolve().parent),
        "seed": args.seed,
        "workloads": len(docs),
        "members": args.members,
        "fleet": {
            "clusters": len(snapshot.clusters),
            "nodes": sum(len(c.nodes) for c in snapshot.clusters),
            "gpus": sum(c.allocatable().get("nvidia.com/gpu", 0) for c in snapshot.clusters),
        },
        "machine": machine(),
        "create_only_s": round(create_only, 2),
        "create_only_per_s": round(len(baseline) / create_only, 1),
        "created_in_s": round(created_in, 2),
        "placed": len(placed),
        "unplaced": len(names) - len(placed),
        "dispatched_s": round(last_dispatch - first, 2),
        "dispatched_per_s": round(len(placed) / (last_dispatch - first), 1),
        "recorded_s": round(max(recorded) - first, 2) if recorded else None,
        "recorded_per_s": round(len(recorded) / (max(recorded) - first), 1) if recorded else None,
        "latency_s": {
            "p50": round(statistics.median(latencies), 3),
            "p90": round(latencies[int(0.9 * (len(latencies) - 1))], 3),
            "max": round(latencies[-1], 3),
        },
        "controller": {
            "cycles": _metric(metrics, "placer_cycles_total"),
            "solver_seconds_total": round(_metric(metrics, "placer_decision_seconds_sum"), 2),
            "placements_total": _metric(metrics, "placer_placements_total"),
            "exit_code_after_sigterm": code,
        },
        "cpu_seconds": cpu,
        "controller_cpu_ms_per_workload": round(1000 * cpu["controller"] / len(placed), 2),
        "checks": checks,
    }


def check(
    members_kubeconfig: Path, hub_objects: dict[str, dict[str, Any]], where: dict[str, list[str]]
) -> dict[str, Any]:
    """Every workload on exactly the member its hub record names, and no node overcommitted
    (``bench_submit.check``: one copy each, the members' in-flight ledger charged to the
    initial capacity leaves nothing negative)."""
    decided = {
        name: (obj["metadata"].get("annotations") or {}).get("placer.dev/placed-cluster")
        for name, obj in hub_objects.items()
    }
    result = check_placements(members_kubeconfig, decided)
    wrong = {n: (c, decided[n]) for n, c in where.items() if c != [decided[n]]}
    if wrong:
        raise SystemExit(f"copies seen elsewhere than recorded: {wrong}")
    return {**result, "on_another_cluster_than_recorded": 0, "copies_seen_by_watch": len(where)}


def markdown(runs: list[dict[str, Any]]) -> str:
    """The runs as a table, the median first (the wall-clock rate varies with the load)."""
    first = runs[0]
    m = first["machine"]
    rates = [r["dispatched_per_s"] for r in runs]
    median = statistics.median(rates)
    servers = (
        "one server process each"
        if first["members"] == "processes"
        else "all in one `placer fleet up` process"
    )
    lines = [
        "# bench_controller: workloads created on a hub, placed on 8 loopback members",
        "",
        f"Date {first['date']}, controller at commit {first.get('controller_code') or '?'}, "
        f"seed {first['seed']}, {first['workloads']} JobSets per run, "
        f"members {first['fleet']['clusters']} clusters / {first['fleet']['nodes']} nodes / "
        f"{first['fleet']['gpus']} GPUs ({servers}), python {m['python']}, "
        f"{m['cpus']} cores shared by the hub, the members, the controller, this client and "
        "whatever else runs on the machine (load average at each start below).",
        "",
        f"**Dispatched per second, median of {len(runs)} runs: {median}** "
        f"(from {min(rates)} to {max(rates)}); target >= 100/s "
        f"{'met' if median >= 100 else 'NOT met'} by the median. Context (published, not "
        "measured here): Karmada's scheduler 15-22 bindings/s, MultiKueue 1.3/s at its default "
        "limits.",
        "",
        "| run | load at start | placed | dispatched/s (s) | recorded/s (s) | latency p50 / p90 / "
        "max (s) | cycles | solver s | CPU s controller / hub / members | controller CPU "
        "per workload | creation alone /s |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(runs, 1):
        lat, c, cpu = r["latency_s"], r["controller"], r["cpu_seconds"]
        lines.append(
            f"| {i} | {r['machine']['loadavg_start'][0]:.1f} | {r['placed']} | "
            f"{r['dispatched_per_s']} ({r['dispatched_s']}) | "
            f"{r['recorded_per_s']} ({r['recorded_s']}) | "
            f"{lat['p50']} / {lat['p90']} / {lat['max']} | {c['cycles']:.0f} | "
            f"{c['solver_seconds_total']} | {cpu['controller']} / {cpu['hub']} / "
            f"{cpu.get('members', '?')} | {r['controller_cpu_ms_per_workload']} ms | "
            f"{r['create_only_per_s']} |"
        )
    lines += [
        "",
        f"Checks of every run (placed once each, on the recorded member, no node overcommitted "
        f"by the in-flight ledger): {first['checks']}.",
        "",
    ]
    return "\n".join(lines)


def side_by_side(
    args: argparse.Namespace, baseline: Path
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The runs alternately with the baseline checkout's controller and this one's; this
    one's runs and the comparison."""
    runs: dict[str, list[dict[str, Any]]] = {"baseline": [], "current": []}
    for i in range(args.repeat):
        order = (("baseline", baseline), ("current", None))
        for name, source in order if i % 2 == 0 else order[::-1]:
            with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
                row = run(args, Path(tmp), source)
            print(
                f"{name} {i + 1}/{args.repeat}: {row['dispatched_per_s']}/s, "
                f"{row['controller_cpu_ms_per_workload']} ms CPU per workload, "
                f"load {row['machine']['loadavg_start'][0]:.1f}",
                flush=True,
            )
            runs[name].append(row)

    def medians(key: str) -> dict[str, float]:
        return {name: statistics.median(r[key] for r in rows) for name, rows in runs.items()}

    rates, cpu = medians("dispatched_per_s"), medians("controller_cpu_ms_per_workload")
    pair = {
        "baseline": runs["baseline"][0]["controller_code"] or str(baseline),
        "current": runs["current"][0]["controller_code"],
        "repeat": args.repeat,
        "runs": {
            name: [
                {
                    k: r[k]
                    for k in (
                        "dispatched_per_s",
                        "recorded_per_s",
                        "controller_cpu_ms_per_workload",
                        "latency_s",
                    )
                }
                | {"load_at_start": r["machine"]["loadavg_start"][0]}
                for r in rows
            ]
            for name, rows in runs.items()
        },
        "median_dispatched_per_s": rates,
        "median_controller_cpu_ms_per_workload": cpu,
        "rate_ratio": round(rates["current"] / rates["baseline"], 3),
        "cpu_ratio": round(cpu["current"] / cpu["baseline"], 3),
    }
    return runs["current"], pair


def pair_markdown(pair: dict[str, Any]) -> str:
    lines = [
        f"## Side by side: controller {pair['current']} against {pair['baseline']} "
        f"(alternating, {pair['repeat']} runs each)",
        "",
        "| controller | dispatched/s per run | median | controller CPU ms per workload per "
        "run | median | load at each start |",
        "|---|---|---|---|---|---|",
    ]
    for name, rows in pair["runs"].items():
        code = pair[name]
        loads = ", ".join(f"{r['load_at_start']:.1f}" for r in rows)
        lines.append(
            f"| {name} ({code}) | {', '.join(str(r['dispatched_per_s']) for r in rows)} | "
            f"{pair['median_dispatched_per_s'][name]} | "
            f"{', '.join(str(r['controller_cpu_ms_per_workload']) for r in rows)} | "
            f"{pair['median_controller_cpu_ms_per_workload'][name]} | "
            f"{loads} |"
        )
    lines += [
        "",
        f"Current / baseline (medians): dispatched/s {pair['rate_ratio']}, controller CPU per "
        f"workload {pair['cpu_ratio']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workloads", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait at most")
    parser.add_argument("--no-write", action="store_true", help="do not write results")
    parser.add_argument(
        "--members",
        choices=("processes", "fleet-up"),
        default="processes",
        help="one server process per member (default), or all 8 in one `placer fleet up`",
    )
    parser.add_argument("--keep-log", metavar="PATH", help="copy the controller's log there")
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs (default 3; each, with --baseline)"
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="DIR",
        help="also run the controller of the checkout DIR, alternately (side by side)",
    )
    args = parser.parse_args(argv)
    report: dict[str, Any] = {"command": "python -m simulations.bench_controller"}
    if args.baseline is not None:
        report["command"] += f" --baseline {args.baseline} --repeat {args.repeat}"
        runs, pair = side_by_side(args, args.baseline.resolve())
        report["side_by_side"] = pair
    else:
        runs = []
        for _ in range(args.repeat):
            with tempfile.TemporaryDirectory(prefix="bench-controller-") as tmp:
                runs.append(run(args, Path(tmp)))
                if args.keep_log:
                    Path(args.keep_log).write_bytes((Path(tmp) / "controller.log").read_bytes())
    report["runs"] = runs
    text = markdown(runs)
    if "side_by_side" in report:
        text += "\n" + pair_markdown(report["side_by_side"])
    print(text)
    if not args.no_write:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bench_controller.json").write_text(json.dumps(report, indent=1) + "\n")
        (RESULTS / "bench_controller.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
