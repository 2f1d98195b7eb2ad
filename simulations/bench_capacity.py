"""Benchmark: the controller's capacity step, from watches vs. listing every member each cycle.

Target (issue 18, target 3): with 16 members × 500 nodes × 5,000 pods and 10 new workloads per
cycle, the capacity step of a cycle (``DecisionCycle.gather``: the members' capacity and the
in-flight ledger synced, charged) takes ≤ 20 ms of controller CPU, and the cycle sends no LIST
request to the members in steady state (counted at the servers).

Setup: every member is a :class:`placer.testing.ApiServerProcess` (a loopback HTTPS API server
in its own process) seeded with ``synthetic_cluster(500, 5000, seed=i)``; the hub is a loopback
server in this process (idle). Two real :class:`placer.controller.Controller` objects are built
on the same members, one with ``capacity="watch"`` (informer caches; its watches run in this
process), one with ``capacity="list"`` (each cycle lists every member, as before); their
threads are not started: the benchmark calls each one's ``cycle.gather()`` — the capacity step
of a placement cycle — itself.

Each cycle, first the churn of 10 new workloads, made over HTTPS by this process as a
dispatch, the members' scheduler and kubelets would: per workload, on a random member, its
in-flight ledger entry (4 pods on random nodes), then its Job copy (labelled as this hub's copy,
with its placement record; watched by the watch controller as a controller watches its
copies) and its 4 pods bound to those nodes (owned by the Job: the ledger sees them and
retires the entry's pods); the workload made 5 cycles earlier done (its pods, Job and ledger
entry deleted, as the controller deletes a copy and its entry: steady counts); 2 synthetic
pods finished (``Succeeded``); one node cordoned or uncordoned. Then, once the watch caches
have caught up, the capacity step of each controller, alternating which goes first, each
timed alone (CPU of this process: nothing else runs in it then) with the LIST and other
requests the members saw during it. Both controllers' fleets (capacity charged with their own
ledgers) are compared node by node every cycle. The CPU the watch controller's informer
threads spent absorbing the churn is reported apart (read per thread from ``/proc``).

Run: ``python -m simulations.bench_capacity`` (defaults as above; about 5 minutes), results in
``simulations/results/bench_capacity.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from placer.controller import Controller, ControllerSettings
from placer.dispatch.ledger import InFlight, entry_name
from placer.dispatch.ledger.store import remove_entries, write_entry
from placer.dispatch.record import PlacementRecord
from placer.fleet import FleetConfig, fleet_from_kubeconfigs
from placer.kube import ClientSettings, KubeClient, load_kubeconfigs, open_client
from placer.model import Fleet, Placement, PodAssignment, WorkloadRef
from placer.testing import ApiServer, ApiServerProcess, write_kubeconfig
from simulations.benchmarking import machine, table, write_results

NAMESPACE = "bench"
_TICKS = os.sysconf("SC_CLK_TCK")
POD_REQUESTS = {"cpu": "2", "memory": "8Gi", "nvidia.com/gpu": "1"}


def load() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def thread_cpu(prefix: str) -> float:
    """CPU seconds used so far by this process's threads whose name starts with ``prefix``."""
    total = 0
    for thread in threading.enumerate():
        if not thread.name.startswith(prefix) or thread.native_id is None:
            continue
        try:
            text = Path(f"/proc/self/task/{thread.native_id}/stat").read_text()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / _TICKS


def lists(counts: dict[tuple[str, str], int]) -> int:
    return sum(n for (verb, _), n in counts.items() if verb == "list")


def others(counts: dict[tuple[str, str], int]) -> int:
    """Requests other than lists, watches and the count requests themselves."""
    return sum(
        n for (verb, res), n in counts.items() if verb not in ("list", "watch") and res != ""
    )


def member_counts(servers: list[ApiServerProcess]) -> dict[tuple[str, str], int]:
    total: dict[tuple[str, str], int] = {}
    with ThreadPoolExecutor(len(servers)) as pool:
        for counts in pool.map(lambda s: s.request_counts(), servers):
            for key, n in counts.items():
                total[key] = total.get(key, 0) + n
    return total


def diff(after: dict[Any, int], before: dict[Any, int]) -> dict[Any, int]:
    return {k: n - before.get(k, 0) for k, n in after.items() if n != before.get(k, 0)}


class Churn:
    """10 new workloads per cycle on the members (see the module docstring)."""

    def __init__(self, clients: dict[str, KubeClient], nodes: int, seed: int) -> None:
        self.clients = clients
        self.rng = random.Random(seed)
        self.nodes = [f"node-{i:05d}" for i in range(nodes)]
        #: (member, Job, its pods) per workload, oldest first.
        self.made: list[tuple[str, str, list[str]]] = []
        self.cordoned: dict[str, set[str]] = {name: set() for name in clients}

    def cycle(self, index: int, workloads: int, pods: int, keep: int) -> None:
        for w in range(workloads):
            self.workload(f"w{index:03d}-{w:02d}", pods)
        while len(self.made) > keep * workloads:
            # a workload done: its pods, its copy and its ledger entry go (as the controller
            # deletes a copy and its entry when its hub object goes)
            member, job, names = self.made.pop(0)
            client = self.clients[member]
            for name in names:
                client.delete("v1", "Pod", name, namespace=NAMESPACE)
            client.delete("batch/v1", "Job", job, namespace=NAMESPACE)
            ref = WorkloadRef("batch/v1", "Job", NAMESPACE, job)
            remove_entries(client, entry_name(ref), [ref])
        for _ in range(2):
            member = self.rng.choice(sorted(self.clients))
            self.finish(member)
        member = self.rng.choice(sorted(self.clients))
        node = self.rng.choice(self.nodes)
        cordon = node not in self.cordoned[member]
        self.clients[member].patch("v1", "Node", node, {"spec": {"unschedulable": cordon}})
        (self.cordoned[member].add if cordon else self.cordoned[member].discard)(node)

    def workload(self, name: str, pods: int) -> None:
        member = self.rng.choice(sorted(self.clients))
        client = self.clients[member]
        nodes = [self.rng.choice(self.nodes) for _ in range(pods)]
        requests = {"cpu": 2000, "memory": 8 * 1024**3, "nvidia.com/gpu": 1}
        ref = WorkloadRef("batch/v1", "Job", NAMESPACE, name)
        placement = Placement(
            ref,
            member,
            tuple(PodAssignment("main", "0", i, node, requests) for i, node in enumerate(nodes)),
            {k: v * pods for k, v in requests.items()},
        )
        decision = f"bench-{name}"
        # as a dispatch does it: the entry, then the copy with this hub's mark and the record
        write_entry(client, InFlight.new(placement, decision))
        record = PlacementRecord.for_placement(placement, decision)
        job = client.create(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name,
                    "namespace": NAMESPACE,
                    "labels": {**record.labels(), "placer.dev/hub": "hub"},
                    "annotations": record.annotations(),
                },
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox"}],
                        }
                    }
                },
            }
        )
        names = []
        for i, node in enumerate(nodes):
            pod = f"{name}-{i}"
            client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {
                        "name": pod,
                        "namespace": NAMESPACE,
                        "ownerReferences": [
                            {
                                "apiVersion": "batch/v1",
                                "kind": "Job",
                                "name": name,
                                "uid": job["metadata"]["uid"],
                                "controller": True,
                            }
                        ],
                    },
                    "spec": {
                        "nodeName": node,
                        "restartPolicy": "Never",
                        "containers": [
                            {
                                "name": "main",
                                "image": "busybox",
                                "resources": {"requests": POD_REQUESTS, "limits": POD_REQUESTS},
                            }
                        ],
                    },
                }
            )
            names.append(pod)
        self.made.append((member, name, names))

    def finish(self, member: str) -> None:
        """One running synthetic pod of ``member`` finishes."""
        client = self.clients[member]
        for namespace in (f"team-{i}" for i in self.rng.sample(range(8), 8)):
            listed = client.list(
                "v1", "Pod", namespace=namespace, field_selector="status.phase=Running"
            )
            if listed.items:
                pod = self.rng.choice(listed.items)
                client.patch(
                    "v1",
                    "Pod",
                    pod["metadata"]["name"],
                    {"status": {"phase": "Succeeded"}},
                    namespace=namespace,
                    subresource="status",
                )
                return


def same_fleet(a: Fleet, b: Fleet) -> bool:
    by_name = {c.name: c for c in b.clusters}
    for cluster in a.clusters:
        other = by_name.get(cluster.name)
        if other is None or cluster.reachable != other.reachable:
            return False
        if tuple(cluster.nodes) != tuple(other.nodes) or cluster.pending != other.pending:
            return False
    return True


def same_room(ctl: Controller, fleet: Fleet) -> bool:
    """The free room the cycle kept (node by node, for its more-room check) is the fleet's."""
    kept = {name: {k: v for k, v in room.items() if v} for name, room in ctl.cycle._free.items()}
    fresh = {
        c.name: {k: v for k, v in c.free().items() if v} for c in fleet.clusters if c.reachable
    }
    return kept == fresh


def caught_up(controller: Controller, quiet: float = 0.4, timeout: float = 60.0) -> None:
    """Wait until the watch controller's caches have seen no change for ``quiet`` seconds."""
    capacity = controller.capacity
    assert capacity is not None
    deadline = time.monotonic() + timeout
    last, since = -1, time.monotonic()
    while time.monotonic() < deadline:
        now = capacity.changes()
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            return
        time.sleep(0.05)


def controller(hub: KubeClient, fleet: FleetConfig, mode: str, timeout: float) -> Controller:
    settings = ControllerSettings(
        hub="hub",
        identity=f"bench-{mode}",
        capacity=mode,
        leader_election=False,
        gather_timeout=timeout,
    )
    made = Controller(hub, fleet, settings)
    made._open_members()  # as Controller.run does before acting
    if made.capacity is not None:
        made.capacity.start(made.members.clients)
        made.members.watch_all("batch/v1", "Job")  # this hub's copies, as when placing Jobs
    return made


def run(args: argparse.Namespace) -> dict[str, Any]:
    started_load = load()
    servers = [
        ApiServerProcess(synthetic=(args.nodes, args.pods), synthetic_seed=i, name=f"m{i + 1}")
        for i in range(args.members)
    ]
    hub = ApiServer().start()
    made: list[Controller] = []
    workdir = Path(tempfile.mkdtemp(prefix="bench-capacity-"))
    try:
        with ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda s: s.start(), servers))
        members = {f"m{i + 1}": s for i, s in enumerate(servers)}
        path = write_kubeconfig(workdir / "members.kubeconfig", members)
        hub_path = write_kubeconfig(workdir / "hub.kubeconfig", {"hub": hub})
        fleet = fleet_from_kubeconfigs([path], timeout=args.timeout)
        hub_client = open_client(load_kubeconfigs([hub_path]), "hub", name="hub")
        users = {
            name: open_client(
                load_kubeconfigs([path]), name, name=name, settings=ClientSettings(pool_size=4)
            )
            for name in members
        }
        for client in users.values():
            client.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
            )
        started = time.monotonic()
        watching = controller(hub_client, fleet, "watch", args.timeout)
        made.append(watching)
        assert watching.capacity is not None
        assert watching.capacity.wait_synced(300.0), "the watches did not list in time"
        first_sync = time.monotonic() - started
        listing = controller(hub_client, fleet, "list", args.timeout)
        made.append(listing)
        churn = Churn(users, args.nodes, args.seed)
        rows: list[dict[str, Any]] = []
        # warm-up: one capacity step each (the first watch step waits for nothing more)
        watching.cycle.gather()
        listing.cycle.gather()
        for index in range(args.cycles):
            informers = thread_cpu("informer-")
            churn_started = time.monotonic()
            churn.cycle(index, args.workloads, args.pods_per_workload, keep=5)
            caught_up(watching)
            absorbed = thread_cpu("informer-") - informers
            row: dict[str, Any] = {
                "cycle": index,
                "churn_s": round(time.monotonic() - churn_started, 3),
                "informers_cpu_ms": round(absorbed * 1000, 1),
            }
            fleets: dict[str, Fleet] = {}
            order = [("watch", watching), ("list", listing)]
            if index % 2:
                order.reverse()
            for mode, ctl in order:
                before = member_counts(servers)
                cpu, wall = time.process_time(), time.perf_counter()
                fleets[mode] = ctl.cycle.gather()
                cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
                seen = diff(member_counts(servers), before)
                seen.pop(("get", ""), None)  # the count requests themselves
                row[mode] = {
                    "cpu_ms": round(cpu * 1000, 2),
                    "wall_ms": round(wall * 1000, 2),
                    "lists": lists(seen),
                    "other_requests": others(seen),
                    "requests": {f"{v} {r}": n for (v, r), n in sorted(seen.items())},
                }
            row["equal_node_by_node"] = same_fleet(fleets["watch"], fleets["list"])
            row["free_room_equal"] = same_room(watching, fleets["watch"])
            row["charged_entries"] = {
                mode: len(ctl.ledger.placements())
                for mode, ctl in (("watch", watching), ("list", listing))
            }
            rows.append(row)
            print(
                f"cycle {index}: watch {row['watch']['cpu_ms']} ms CPU, "
                f"{row['watch']['lists']} lists; list {row['list']['cpu_ms']} ms CPU, "
                f"{row['list']['lists']} lists; equal {row['equal_node_by_node']}",
                flush=True,
            )
        fleet_nodes = sum(len(c.nodes) for c in fleets["watch"].clusters)
    finally:
        for ctl in made:
            if ctl.capacity is not None:
                ctl.capacity.stop()
            for informer in ctl.members.informers():
                informer.stop()
            ctl.members.close()
        for server in servers:
            server.stop()
        hub.stop()
    return {
        "args": vars(args),
        "machine": machine(),
        "load_start": started_load,
        "load_end": load(),
        "first_sync_s": round(first_sync, 2),
        "fleet_nodes": fleet_nodes,
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "cycles": rows,
        "summary": summarize(rows),
    }


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for mode in ("watch", "list"):
        cpu = [r[mode]["cpu_ms"] for r in rows]
        wall = [r[mode]["wall_ms"] for r in rows]
        out[mode] = {
            "cpu_ms_median": round(statistics.median(cpu), 2),
            "cpu_ms_max": round(max(cpu), 2),
            "wall_ms_median": round(statistics.median(wall), 2),
            "lists_per_cycle_max": max(r[mode]["lists"] for r in rows),
            "lists_total": sum(r[mode]["lists"] for r in rows),
            "other_requests_per_cycle_median": statistics.median(
                r[mode]["other_requests"] for r in rows
            ),
        }
    out["informers_cpu_ms_per_cycle_median"] = round(
        statistics.median(r["informers_cpu_ms"] for r in rows), 1
    )
    out["equal_node_by_node"] = sum(1 for r in rows if r["equal_node_by_node"])
    out["free_room_equal"] = sum(1 for r in rows if r["free_room_equal"])
    out["cpu_ratio_list_over_watch"] = round(
        out["list"]["cpu_ms_median"] / max(out["watch"]["cpu_ms_median"], 1e-9), 1
    )
    out["target_cpu_met"] = out["watch"]["cpu_ms_max"] <= 20.0
    out["target_no_list_met"] = out["watch"]["lists_total"] == 0
    return out


def markdown(report: dict[str, Any]) -> str:
    s = report["summary"]
    a = report["args"]
    m = report["machine"]
    lines = [
        "# bench_capacity: the controller's capacity step, watches vs. listing each cycle",
        "",
        f"{a['members']} loopback members × {a['nodes']} nodes × {a['pods']} pods "
        f"({report['fleet_nodes']} nodes), {a['workloads']} new workloads of "
        f"{a['pods_per_workload']} pods per cycle, {a['cycles']} cycles; "
        f"{m.get('cores', '?')} cores shared by the {a['members']} member processes and this one. "
        f"Load average at start {report['load_start']}, at end {report['load_end']}. "
        f"Commit {m.get('commit', '?')}.",
        "",
        "The capacity step is `DecisionCycle.gather()` (members' capacity, in-flight ledger "
        "synced, charged); CPU is this process's while it runs (nothing else runs in it then). "
        "LISTs are counted at the member servers during the step.",
        "",
        table(
            [
                "capacity",
                "CPU ms median",
                "CPU ms max",
                "wall ms median",
                "LISTs per cycle (max)",
                "LISTs in all",
                "other requests per cycle (median)",
            ],
            [
                [
                    mode,
                    s[mode]["cpu_ms_median"],
                    s[mode]["cpu_ms_max"],
                    s[mode]["wall_ms_median"],
                    s[mode]["lists_per_cycle_max"],
                    s[mode]["lists_total"],
                    s[mode]["other_requests_per_cycle_median"],
                ]
                for mode in ("watch", "list")
            ],
        ),
        "",
        f"- CPU, listing / watches (medians, side by side): **{s['cpu_ratio_list_over_watch']}×**",
        f"- target ≤ 20 ms CPU per capacity step (max over cycles): "
        f"**{'met' if s['target_cpu_met'] else 'not met'}** ({s['watch']['cpu_ms_max']} ms)",
        f"- target no LIST to the members in steady state: "
        f"**{'met' if s['target_no_list_met'] else 'not met'}** "
        f"({s['watch']['lists_total']} LISTs)",
        f"- the informers' CPU absorbing one cycle's churn (median): "
        f"{s['informers_cpu_ms_per_cycle_median']} ms (in their own threads, between cycles)",
        f"- fleets equal node by node (watch vs list, both charged with their ledgers): "
        f"{s['equal_node_by_node']} of {len(report['cycles'])} cycles; the free room kept "
        f"node by node equal to the fleet's in {s['free_room_equal']}",
        f"- first listing of every member by the watches: {report['first_sync_s']} s; "
        f"peak RSS of this process (both controllers): {report['peak_rss_mib']} MiB",
        "",
        "Run: `python -m simulations.bench_capacity`.",
        "",
    ]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--members", type=int, default=16)
    parser.add_argument("--nodes", type=int, default=500)
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--cycles", type=int, default=12)
    parser.add_argument("--workloads", type=int, default=10, help="new workloads per cycle")
    parser.add_argument("--pods-per-workload", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=60.0, help="gather timeout per member")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-write", action="store_true", help="print, do not write results")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    report = run(args)
    text = markdown(report)
    print(text)
    if not args.no_write:
        write_results("bench_capacity", report, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
