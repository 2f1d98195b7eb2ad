"""Benchmark: the placement controller under churn, races, member faults and kills (issue 12).

Setup, on this machine:

* **members**: the 8 clusters of ``clusters/openb-8.yaml`` (about 1,200 nodes and 6,200 GPUs)
  served in this process by a :class:`placer.virtual.fleet.VirtualFleet` with realism, as
  ``placer fleet up`` serves them: workloads applied there get pods bound to nodes, so capacity
  is really used and in-flight entries are seen running and retired. Faults are injected here:
  member ``A`` answers 401 to every request for a while (a stale token), member ``B`` is stopped
  (unreachable) for a while — each the member holding the most hub copies when its fault
  starts;
* **hub**: a loopback API server process serving the JobSet CRD and namespaces;
* **controller**: ``placer controller`` in its own process (leader election on,
  ``--grace-period`` G), killed with SIGKILL twice and started again each time;
* **churn**: this process creates, edits and deletes JobSets on the hub at ``--rate`` events a
  second, keeping about ``--population`` of them. An edit changes the container image (a new
  generation the controller re-applies to the member; same resources);
* **racers**: every ``--submit-every`` seconds, two ``placer submit`` processes started at
  once with the same directory of JobSets (namespace ``submitted``) on the same members; the
  previous round's are deleted from the members first.

Schedule, in fractions of the duration D (10 minutes by default): A answers 401 from 0.03 D to
0.23 D, B is stopped from 0.27 D to 0.47 D (2 minutes each at 10 minutes), the controller is
killed at 0.20 D and at 0.40 D (each time a new controller starts with a member out of sight:
refusing, then stopped); churn runs from 0 to D, then stops and the end state is awaited (at
most ``--settle`` seconds). The second half has no fault: the controller's memory
is measured there. G is D/10 (60 s at 10 minutes): the workloads of both faulty members fail
over before the member comes back. The lease is client-go's default at 10 minutes (15 s),
shortened in proportion for shorter runs.

Measured, by sampling the members' stores every ``--sample`` seconds (in this process, so a
member out of sight to the controller is still seen) and at the end:

* **workloads on two clusters at once** — hub workloads (by hub uid) and submitted ones (by
  name) with copies on two members, counted when at least two of those members are in sight
  and have been for the grace period G (a member out of sight keeps its copy while the
  workload fails over elsewhere: that is what the grace period bounds, and the copy must go
  once the member is back: how long after its return such a copy was last seen is reported —
  it stays while the member its workload moved to is out of sight in turn, since the
  controller does nothing about an object whose member is lost within the grace period, and
  adopts that copy again if the other member stays lost);
* **overcommitted nodes** — every copy's pods on the nodes of its placement record (requests
  from its definition) charged to the snapshot's capacity; a node with a negative free amount
  of any resource is overcommitted (the placements' plans are checked, not the stand-in
  scheduler of realism, which binds pods only where they fit). Counted twice: with the hub's
  copies only (the controller's decisions) and with every copy (the racers' too); each
  overcommitted node is reported with the workloads planned there and the pods running there;
* at the end: **hub objects without a final state** (not ``Placed=True`` with its copy on the
  recorded member, and not ``Placed=False/Unschedulable``; or still being deleted),
  **in-flight entries** left on the members (entries that still count: fully observed ones
  stay stored a while, charging nothing; both numbers are reported), **stale copies** (a hub
  copy whose hub object is gone or records another member);
* the controller's **RSS** over the second half, from ``WARM_UP`` after its last start at the
  earliest (growth from the window's first to its last tenth; not measured when the window is
  shorter than ``MIN_WINDOW``, as in the 60-second version), its **CPU per event** (CPU of
  every controller process, each read just before it was killed) and **log lines per event**.

The benchmark fails (exit 1) if an invariant does not hold. Run: ``python -m
simulations.bench_churn`` (10 minutes plus set-up; results in
``simulations/results/bench_churn.{json,md}``); ``--duration 60`` for the short version that
``make test`` runs (``tests/simulations/test_bench_churn.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import yaml

from placer.controller.records import record_of
from placer.definitions import Catalog, decompose
from placer.dispatch import Manifest
from placer.dispatch.existing import placement_from_record
from placer.dispatch.ledger import read_entries, sync_cluster
from placer.dispatch.record import PlacementRecord
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient
from placer.model import Placement
from placer.snapshot import load_snapshot
from placer.solver import charge
from placer.testing import ApiServer, ApiServerProcess, write_kubeconfig
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from simulations.bench_controller import (
    JOBSET,
    JOBSET_CRD,
    NAMESPACES,
    _client,
    _free_port,
    _metric,
    commit_of,
    controller_command,
    cpu_seconds,
    wait_leading,
    workloads,
)
from simulations.bench_submit import SNAPSHOT, machine

RESULTS = Path(__file__).resolve().parent / "results"
#: seconds after a controller starts before its memory counts (it lists the hub and the
#: members' copies, and fills its caches as the churn goes on: about a minute here).
WARM_UP = 60.0
#: the shortest memory window that says anything (the 60-second version has none).
MIN_WINDOW = 120.0
SUBMITTED = "submitted"
LABEL_HUB = "placer.dev/hub"
ANNOTATION_HUB_UID = "placer.dev/hub-uid"


@dataclass(frozen=True)
class Schedule:
    """When things happen, in seconds from the start of the churn (see the module docstring)."""

    duration: float
    grace: float

    @classmethod
    def of(cls, duration: float) -> Schedule:
        return cls(duration, grace=max(6.0, duration / 10))

    @property
    def stale_token(self) -> tuple[float, float]:
        return 0.03 * self.duration, 0.23 * self.duration

    @property
    def stopped(self) -> tuple[float, float]:
        return 0.27 * self.duration, 0.47 * self.duration

    @property
    def kills(self) -> tuple[float, float]:
        """While A refuses, and while B is stopped (each after their workloads failed over)."""
        return 0.20 * self.duration, 0.40 * self.duration

    @property
    def calm(self) -> float:
        """Start of the fault-free second half (memory is measured there)."""
        return 0.5 * self.duration

    @property
    def lease(self) -> tuple[float, float, float]:
        """Lease duration, renew deadline, retry period (client-go's defaults at 10 minutes)."""
        scale = max(0.2, self.duration / 600)
        return round(15 * scale, 1), round(10 * scale, 1), round(2 * scale, 1)


# --------------------------------------------------------------------------------------------
# the members: a virtual fleet in this process, with faults and a census


class Members:
    """The 8 members, served here with realism; faults and a census of their stores."""

    def __init__(self, workdir: Path) -> None:
        self.snapshot = load_snapshot(SNAPSHOT)
        self.virtual = VirtualFleet(self.snapshot, setup=realism_setup(pods=True))
        self.workdir = workdir
        self.catalog = Catalog.builtin()
        self._decomposed: dict[tuple[str, str], Any] = {}
        #: member -> (out of sight since, back since) — ``None`` while in sight from the start.
        self.out: dict[str, tuple[float, float | None]] = {}
        self.lock = threading.Lock()

    def __enter__(self) -> Members:
        self.virtual.start()
        self.kubeconfig = self.virtual.write_kubeconfig(self.workdir / "members.kubeconfig")
        self.fleet_file = self.virtual.write_fleet_file(
            self.workdir / "fleet.yaml", kubeconfig=self.kubeconfig
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self.virtual.stop()

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.snapshot.clusters]

    def server(self, name: str) -> ApiServer:
        return self.virtual.server(name)

    def busiest(self, besides: str = "") -> str:
        """The member holding the most hub copies now (where a fault hurts most)."""
        counts = {
            name: sum(
                1
                for item in self.server(name).store.list("jobsets")
                if (item["metadata"].get("labels") or {}).get(LABEL_HUB)
            )
            for name in self.names
            if name != besides
        }
        return max(counts, key=lambda name: (counts[name], name))

    # faults ---------------------------------------------------------------------------------

    def refuse(self, name: str, now: float) -> None:
        self.server(name).faults.fail(401, times=None, message="token expired (bench fault)")
        with self.lock:
            self.out[name] = (now, None)

    def stop(self, name: str, now: float) -> None:
        self.server(name).stop()
        with self.lock:
            self.out[name] = (now, None)

    def restore(self, name: str, now: float) -> None:
        server = self.server(name)
        server.faults.clear()
        server.start()  # (a no-op when it runs)
        with self.lock:
            since, _ = self.out[name]
            self.out[name] = (since, now)

    def returns(self) -> dict[str, tuple[float, float | None]]:
        """Member -> (out of sight since, back since) for the members that were out of sight."""
        with self.lock:
            return dict(self.out)

    def settled(self, name: str, now: float, grace: float) -> bool:
        """In sight, and for at least ``grace`` seconds (or since the start)."""
        with self.lock:
            state = self.out.get(name)
        if state is None:
            return True
        _, back = state
        return back is not None and now - back >= grace

    # census ---------------------------------------------------------------------------------

    def copies(self) -> dict[str, list[dict[str, Any]]]:
        """Every JobSet on every member (straight from the stores: faults do not apply)."""
        return {name: self.server(name).store.list("jobsets") for name in self.names}

    def pending_pods(self) -> int:
        total = 0
        for name in self.names:
            total += len(self.server(name).store.list("pods", field_selector="spec.nodeName="))
        return total

    def pods_on(self, node: str) -> list[str]:
        """What runs on ``cluster/node`` (pods by owner), to set beside what was planned."""
        cluster, name = node.split("/", 1)
        pods = self.server(cluster).store.list("pods", field_selector=f"spec.nodeName={name}")
        owners: dict[str, int] = {}
        for pod in pods:
            refs = pod["metadata"].get("ownerReferences") or [{"name": "-"}]
            key = f"{pod['metadata'].get('namespace')}/{refs[0].get('name')}"
            owners[key] = owners.get(key, 0) + 1
        return [f"runs {key} x{count}" for key, count in sorted(owners.items())]

    def overcommitted(
        self, copies: Mapping[str, list[dict[str, Any]]], *, hub_only: bool = False
    ) -> dict[str, list[str]]:
        """Nodes whose planned pods exceed their capacity, with the workloads planned there
        (see the module docstring); with ``hub_only``, the hub's copies only (not the
        racers')."""
        placements: list[Placement] = []
        decisions: list[str] = []
        for cluster, items in copies.items():
            for item in items:
                if hub_only and not (item["metadata"].get("labels") or {}).get(LABEL_HUB):
                    continue
                record = PlacementRecord.from_object(item)
                if record is None or record.cluster != cluster:
                    continue
                meta = item["metadata"]
                key = (meta["uid"], str(meta.get("generation")))
                decomposition = self._decomposed.get(key)
                if decomposition is None:
                    decomposition = decompose(item, self.catalog)
                    self._decomposed[key] = decomposition
                placements.append(
                    placement_from_record(Manifest(item, decomposition), cluster, record)
                )
                decisions.append(record.decision)
        if len(self._decomposed) > 20_000:
            self._decomposed.clear()
        charged = charge(self.snapshot, placements)
        over = {
            (c.name, n.name)
            for c in charged.clusters
            for n in c.nodes
            if any(v < 0 for v in n.free.values())
        }
        found: dict[str, list[str]] = {}
        for placement, decision in zip(placements, decisions, strict=True):
            for pod in placement.pods:
                if (placement.cluster, pod.node) in over:
                    ref = placement.workload
                    found.setdefault(f"{placement.cluster}/{pod.node}", []).append(
                        f"{ref.namespace}/{ref.name} (decision {decision})"
                    )
        return {node: sorted(set(names)) for node, names in sorted(found.items())}


# --------------------------------------------------------------------------------------------
# the controller: a process, killed and started again; its CPU and memory read from /proc


def rss_bytes(pid: int) -> int:
    """Resident set size of a process, from ``/proc`` (0 if unknown)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class Controller:
    """``placer controller`` as a process; every start logs to its own file."""

    def __init__(
        self, workdir: Path, hub_kubeconfig: Path, members: Members, schedule: Schedule
    ) -> None:
        self.workdir = workdir
        self.hub_kubeconfig = hub_kubeconfig
        self.members = members
        self.schedule = schedule
        self.port = _free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.logs: list[Path] = []
        #: CPU seconds of the processes that ended (read just before each was killed).
        self.cpu_done = 0.0
        self.samples: list[tuple[float, int, float, int]] = []  # (t, pid, cpu s, rss bytes)
        self.exit_codes: list[int] = []
        #: (when, pid) of every start, ``when`` as the churn's clock gives it.
        self.starts: list[tuple[float, int]] = []
        self.clock: Callable[[], float] = time.monotonic

    def start(self) -> None:
        duration, deadline, retry = self.schedule.lease
        log_path = self.workdir / f"controller-{len(self.logs)}.log"
        self.logs.append(log_path)
        with log_path.open("wb") as log:
            self.process = subprocess.Popen(
                controller_command(
                    self.hub_kubeconfig,
                    "--fleet",
                    str(self.members.fleet_file),
                    "--timeout",
                    "10",
                    "--grace-period",
                    f"{self.schedule.grace:g}",
                    "--resync-interval",
                    "10",
                    "--lease-duration",
                    f"{duration:g}",
                    "--renew-deadline",
                    f"{deadline:g}",
                    "--retry-period",
                    f"{retry:g}",
                    "--metrics-port",
                    str(self.port),
                    "--bind",
                    "127.0.0.1",
                    "--log-format",
                    "json",
                ),
                stdout=log,
                stderr=log,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        self.starts.append((self.clock(), self.process.pid))

    def sample(self, now: float) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        self.samples.append((now, process.pid, cpu_seconds(process.pid), rss_bytes(process.pid)))

    def kill(self, now: float) -> None:
        """SIGKILL, after reading its CPU time."""
        assert self.process is not None
        self.sample(now)
        self.cpu_done += cpu_seconds(self.process.pid)
        self.process.send_signal(signal.SIGKILL)
        self.exit_codes.append(self.process.wait(timeout=30))

    def stop(self) -> None:
        """SIGTERM (a graceful stop), after reading its CPU time."""
        if self.process is None or self.process.poll() is not None:
            return
        self.cpu_done += cpu_seconds(self.process.pid)
        self.process.send_signal(signal.SIGTERM)
        try:
            self.exit_codes.append(self.process.wait(timeout=60))
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.exit_codes.append(self.process.wait(timeout=30))

    def cpu(self) -> float:
        """CPU seconds of every controller process so far."""
        running = self.process
        live = cpu_seconds(running.pid) if running and running.poll() is None else 0.0
        return self.cpu_done + live

    def metrics(self) -> str:
        try:
            return httpx.get(f"http://127.0.0.1:{self.port}/metrics", timeout=5).text
        except httpx.HTTPError:
            return ""

    def log_lines(self) -> tuple[int, dict[str, int], int]:
        """Lines logged by every controller process, by ``event``, and error lines."""
        total, errors = 0, 0
        events: dict[str, int] = {}
        for path in self.logs:
            for line in path.read_text(errors="replace").splitlines():
                total += 1
                try:
                    record = json.loads(line)
                except ValueError:
                    events["(not json)"] = events.get("(not json)", 0) + 1
                    continue
                name = str(record.get("event") or "-")
                events[name] = events.get(name, 0) + 1
                if record.get("level") in ("error", "critical"):
                    errors += 1
        return total, dict(sorted(events.items(), key=lambda kv: -kv[1])), errors


# --------------------------------------------------------------------------------------------
# churn on the hub


@dataclass
class Churn:
    """Creates, edits and deletes JobSets on the hub at ``rate`` events a second."""

    hub_kubeconfig: Path
    rate: float
    population: int
    seed: int
    duration: float
    counts: dict[str, int] = field(default_factory=dict)
    failures: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        # (never more creations than events)
        self.pool = iter(workloads(int(self.duration * self.rate) + 10, self.seed))
        self.live: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.edits = 0

    def _next(self) -> tuple[str, dict[str, Any] | None]:
        """The next operation and its object (under the lock)."""
        # creations balance deletions (a third each, edits the rest) at the population
        fill = len(self.live) / self.population
        if not self.live or self.rng.random() < min(0.95, max(0.05, 1 / 3 - (fill - 1))):
            doc = next(self.pool)
            doc["metadata"]["name"] = "c" + doc["metadata"]["name"][1:]
            self.live[doc["metadata"]["name"]] = doc
            return "create", doc
        name = self.rng.choice(list(self.live))
        if self.rng.random() < 0.5:
            doc = self.live[name]
            self.edits += 1
            for job in doc["spec"]["replicatedJobs"]:
                pod = job["template"]["spec"]["template"]["spec"]
                pod["containers"][0]["image"] = f"trainer:v{self.edits}"
            return "edit", doc
        return "delete", self.live.pop(name)

    def run(self, seconds: float, threads: int = 4) -> None:
        clients = [_client(self.hub_kubeconfig, "hub") for _ in range(threads)]
        interval = 1.0 / self.rate
        start = time.monotonic()
        issued = 0

        def act(index: int) -> None:
            nonlocal issued
            client = clients[index]
            while not self.stop_event.is_set():
                with self.lock:
                    due = start + issued * interval
                    issued += 1
                    if due - start >= seconds:
                        return
                    op, doc = self._next()
                wait = due - time.monotonic()
                if wait > 0:
                    self.stop_event.wait(wait)
                assert doc is not None
                self._do(client, op, doc)

        try:
            with ThreadPoolExecutor(threads, thread_name_prefix="churn") as pool:
                list(pool.map(act, range(threads)))
        finally:
            for client in clients:
                client.close()

    def _do(self, client: KubeClient, op: str, doc: dict[str, Any]) -> None:
        meta = doc["metadata"]
        try:
            if op == "create":
                client.create(doc)
            elif op == "edit":
                client.patch(
                    *JOBSET,
                    meta["name"],
                    {"spec": {"replicatedJobs": doc["spec"]["replicatedJobs"]}},
                    namespace=meta["namespace"],
                )
            else:
                client.delete(*JOBSET, meta["name"], namespace=meta["namespace"])
        except (NotFoundError, KubeError) as err:
            with self.lock:
                key = f"{op}: {type(err).__name__}"
                self.failures[key] = self.failures.get(key, 0) + 1
            return
        with self.lock:
            self.counts[op] = self.counts.get(op, 0) + 1


# --------------------------------------------------------------------------------------------
# two `placer submit` racing on the same members


def submit_round(members: Members, workdir: Path, round_: int, seed: int) -> dict[str, Any]:
    """Delete the last round's workloads from the members, then run two ``placer submit`` at
    once with the same new manifests; returns what each said."""
    for name in members.names:
        store = members.server(name).store
        for item in store.list("jobsets", SUBMITTED):
            try:
                store.delete("jobsets", item["metadata"]["name"], SUBMITTED)
            except Exception:  # (gone meanwhile)
                pass
    docs = workloads(4, seed + 1000 + round_, namespace=SUBMITTED)
    folder = workdir / f"submit-{round_}"
    folder.mkdir()
    for doc in docs:
        doc["metadata"]["name"] = f"s{round_:03d}-{doc['metadata']['name'][-2:]}"
        doc["metadata"]["labels"] = {}
        doc["spec"]["suspend"] = False  # (submitted as they should run: pods appear)
        (folder / f"{doc['metadata']['name']}.yaml").write_text(yaml.safe_dump(doc))
    command = [
        sys.executable,
        "-m",
        "placer",
        "submit",
        "-f",
        str(folder),
        "--fleet",
        str(members.fleet_file),
        "--timeout",
        "10",
        "-o",
        "json",
    ]
    racers = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    said = []
    for racer in racers:
        try:
            out, err = racer.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            racer.kill()
            out, err = racer.communicate()
        said.append(
            {
                "exit": racer.returncode,
                "outcomes": _outcomes(out),
                "stderr": err[-300:] if racer.returncode else "",
            }
        )
    return {"round": round_, "workloads": [d["metadata"]["name"] for d in docs], "racers": said}


def _outcomes(output: str) -> dict[str, str]:
    """``placer submit -o json``'s outcome per workload: ``state@cluster``."""
    try:
        report = json.loads(output)
    except ValueError:
        return {}
    outcomes = {}
    for item in report.get("placements") or ():
        outcomes[str(item["workload"]["name"])] = f"{item.get('state')}@{item.get('cluster')}"
    for item in report.get("unplaced") or ():
        outcomes[str(item["workload"]["name"])] = str(item.get("state"))
    return outcomes


# --------------------------------------------------------------------------------------------
# invariants


@dataclass
class Census:
    """What the samples saw (see the module docstring)."""

    samples: int = 0
    duplicates_hub: dict[str, list[str]] = field(default_factory=dict)
    duplicates_submitted: dict[str, list[str]] = field(default_factory=dict)
    duplicates_within_grace: int = 0
    #: node -> when first seen, and the workloads planned there.
    overcommitted: dict[str, list[str]] = field(default_factory=dict)
    #: the same, counting the hub's copies only (the controller's own decisions).
    overcommitted_by_hub: dict[str, list[str]] = field(default_factory=dict)
    max_pending_pods: int = 0
    #: member -> the latest sample (seconds after it came back) still showing a copy there of
    #: a workload placed elsewhere meanwhile (failover).
    stale_after_return: dict[str, float] = field(default_factory=dict)
    copies: list[int] = field(default_factory=list)


def take_census(members: Members, census: Census, now: float, grace: float) -> None:
    copies = members.copies()
    by_hub: dict[str, set[str]] = {}
    by_name: dict[str, set[str]] = {}
    for cluster, items in copies.items():
        for item in items:
            meta = item["metadata"]
            uid = (meta.get("annotations") or {}).get(ANNOTATION_HUB_UID)
            if (meta.get("labels") or {}).get(LABEL_HUB) and uid:
                by_hub.setdefault(uid, set()).add(cluster)
            elif meta.get("namespace") == SUBMITTED:
                by_name.setdefault(meta["name"], set()).add(cluster)
    census.samples += 1
    census.copies.append(sum(len(v) for v in copies.values()))
    for cluster, (_, back) in members.returns().items():
        stale = sum(1 for clusters in by_hub.values() if cluster in clusters and len(clusters) > 1)
        if back is not None and stale:
            late = round(now - back, 1)
            census.stale_after_return[cluster] = max(
                late, census.stale_after_return.get(cluster, 0)
            )
    for found, seen in ((by_hub, census.duplicates_hub), (by_name, census.duplicates_submitted)):
        for key, clusters in found.items():
            if len(clusters) < 2:
                continue
            settled = [c for c in clusters if members.settled(c, now, grace)]
            if len(settled) >= 2:
                seen[key] = sorted(clusters)
            else:
                census.duplicates_within_grace += 1
    for node, planned in members.overcommitted(copies).items():
        if node not in census.overcommitted:
            census.overcommitted[node] = [f"at {now:.0f}s", *planned, *members.pods_on(node)]
    if census.overcommitted:  # (charging fewer copies cannot overcommit more)
        for node, planned in members.overcommitted(copies, hub_only=True).items():
            census.overcommitted_by_hub.setdefault(node, [f"at {now:.0f}s", *planned])
    census.max_pending_pods = max(census.max_pending_pods, members.pending_pods())


def final_state(hub: KubeClient, members: Members) -> dict[str, Any]:
    """The end invariants: every hub object in a final state, no stale copy, no entry left."""
    objects = [o for ns in NAMESPACES for o in hub.list(*JOBSET, namespace=ns).items]
    copies = members.copies()
    where: dict[str, dict[str, dict[str, Any]]] = {}
    for cluster, items in copies.items():
        for item in items:
            uid = (item["metadata"].get("annotations") or {}).get(ANNOTATION_HUB_UID)
            if uid and (item["metadata"].get("labels") or {}).get(LABEL_HUB):
                where.setdefault(uid, {})[cluster] = item
    not_final: dict[str, str] = {}
    states: dict[str, int] = {}
    live = set()
    for obj in objects:
        meta = obj["metadata"]
        live.add(meta["uid"])
        record = record_of(obj)
        condition: dict[str, Any] = next(
            (
                c
                for c in (obj.get("status") or {}).get("conditions") or ()
                if c.get("type") == "Placed"
            ),
            {},
        )
        if meta.get("deletionTimestamp"):
            state = "deleting"
        elif (
            condition.get("status") == "True"
            and record is not None
            and record.cluster in where.get(meta["uid"], {})
        ):
            state = "placed"
        elif condition.get("status") == "False" and condition.get("reason") == "Unschedulable":
            state = "unschedulable"
        else:
            state = f"{condition.get('reason') or 'no condition'}"
        states[state] = states.get(state, 0) + 1
        if state not in ("placed", "unschedulable"):
            not_final[f"{meta['namespace']}/{meta['name']}"] = state
    recorded = {o["metadata"]["uid"]: getattr(record_of(o), "cluster", "") for o in objects}
    stale = sorted(
        f"{cluster}:{item['metadata']['namespace']}/{item['metadata']['name']}"
        for uid, held in where.items()
        for cluster, item in held.items()
        if uid not in live or recorded[uid] != cluster
    )
    entries: dict[str, list[str]] = {}
    stored = 0
    now = time.time()
    for name in members.names:
        with _client(members.kubeconfig, name) as client:
            stored += len(read_entries(client))
            # what still counts (read only): fully observed entries stay stored a while,
            # charging nothing, for concurrent read-backs
            counting = [e for e in sync_cluster(client, delete=False) if e.placement.pods]
        if counting:
            entries[name] = [
                f"{e.workload.namespace}/{e.workload.name} decision {e.decision} "
                f"{now - e.created:.0f}s old, {len(e.placement.pods)} pods not seen"
                for e in counting
            ]
    twice = {uid: sorted(held) for uid, held in where.items() if len(held) > 1}
    return {
        "hub_objects": len(objects),
        "states": states,
        "without_final_state": len(not_final),
        "without_final_state_examples": dict(sorted(not_final.items())[:10]),
        "stale_copies": len(stale),
        "stale_examples": stale[:10],
        "in_flight_entries": sum(len(v) for v in entries.values()),
        "ledger_entries_stored": stored,
        "in_flight_entries_by_member": {k: v[:5] for k, v in entries.items()},
        "hub_workloads_on_two_members": len(twice),
    }


# --------------------------------------------------------------------------------------------
# the run


@contextmanager
def hub_server(workdir: Path) -> Iterator[tuple[ApiServerProcess, Path]]:
    with ApiServerProcess(name="hub") as server:
        kubeconfig = write_kubeconfig(workdir / "hub.kubeconfig", {"hub": server})
        with _client(kubeconfig, "hub") as hub:
            hub.create(JOBSET_CRD)
            for namespace in (*NAMESPACES, "placer-system"):
                hub.ensure_namespace(namespace)
        yield server, kubeconfig


def growth(samples: list[tuple[float, int]]) -> dict[str, Any]:
    """RSS growth over ``samples`` ((t, rss)): the mean of the last tenth over the first's."""
    if len(samples) < 10:
        return {"samples": len(samples), "growth_pct": None}
    tenth = max(1, len(samples) // 10)
    first = sum(r for _, r in samples[:tenth]) / tenth
    last = sum(r for _, r in samples[-tenth:]) / tenth
    return {
        "samples": len(samples),
        "seconds": round(samples[-1][0] - samples[0][0], 1),
        "first_mib": round(first / 2**20, 1),
        "last_mib": round(last / 2**20, 1),
        "max_mib": round(max(r for _, r in samples) / 2**20, 1),
        "growth_pct": round(100 * (last - first) / first, 1),
    }


def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    schedule = Schedule.of(args.duration)
    census = Census()
    rounds: list[dict[str, Any]] = []
    timeline: list[tuple[float, str]] = []
    with Members(workdir) as members, hub_server(workdir) as (hub_process, hub_kubeconfig):
        hub = _client(hub_kubeconfig, "hub")
        controller = Controller(workdir, hub_kubeconfig, members, schedule)
        t0 = time.monotonic()

        def at() -> float:
            return time.monotonic() - t0

        controller.clock = at
        controller.start()
        assert controller.process is not None
        wait_leading(controller.port, controller.process)
        churn = Churn(hub_kubeconfig, args.rate, args.population, args.seed, args.duration)
        t0 = time.monotonic()
        controller.starts = [(0.0, pid) for _, pid in controller.starts]

        def note(what: str) -> None:
            timeline.append((round(at(), 1), what))

        churner = threading.Thread(target=churn.run, args=(args.duration,), daemon=True)
        churner.start()
        faulty: dict[str, str] = {}  # "401" and "stopped": chosen when the fault starts

        def kill_and_start() -> None:
            controller.kill(at())
            controller.start()

        def refuse() -> str:
            faulty["401"] = members.busiest()
            members.refuse(faulty["401"], at())
            return f"{faulty['401']} answers 401"

        def stop() -> str:
            faulty["stopped"] = members.busiest(besides=faulty.get("401", ""))
            members.stop(faulty["stopped"], at())
            return f"{faulty['stopped']} stopped"

        def restore(which: str, what: str) -> Callable[[], str]:
            def act() -> str:
                members.restore(faulty[which], at())
                return f"{faulty[which]} {what}"

            return act

        events: list[tuple[float, Callable[[], str]]] = [
            (schedule.stale_token[0], refuse),
            (schedule.stale_token[1], restore("401", "takes the token again")),
            (schedule.stopped[0], stop),
            (schedule.stopped[1], restore("stopped", "started again")),
        ]

        def kill() -> str:
            kill_and_start()
            return "controller killed (SIGKILL), started again"

        for kill_at in schedule.kills:
            events.append((kill_at, kill))
        events.sort(key=lambda e: e[0])
        racer: threading.Thread | None = None
        next_round = args.submit_every / 2
        next_sample = 0.0
        try:
            while churner.is_alive() or (racer is not None and racer.is_alive()):
                now = at()
                while events and events[0][0] <= now:
                    _, action = events.pop(0)
                    note(action())
                if now >= next_sample:
                    next_sample = now + args.sample
                    controller.sample(now)
                    take_census(members, census, now, schedule.grace)
                if (
                    now >= next_round
                    and now < args.duration - args.submit_every / 2
                    and (racer is None or not racer.is_alive())
                ):
                    next_round = now + args.submit_every
                    index = len(rounds)
                    rounds.append({})

                    def race(index: int = index) -> None:
                        rounds[index] = submit_round(members, workdir, index, args.seed)

                    racer = threading.Thread(target=race, daemon=True)
                    racer.start()
                    note(f"submit round {index}")
                time.sleep(0.2)
            for _, action in events:  # (a run shorter than its schedule)
                note(action())
            note("churn over")
            churned = at()
            # the end state: wait until it holds, at most --settle seconds
            deadline = time.monotonic() + args.settle
            while True:
                now = at()
                controller.sample(now)
                take_census(members, census, now, schedule.grace)
                end = final_state(hub, members)
                if (
                    end["without_final_state"] == 0
                    and end["stale_copies"] == 0
                    and end["in_flight_entries"] == 0
                ) or time.monotonic() > deadline:
                    break
                time.sleep(args.sample)
            settled_in = round(at() - churned, 1)
            note("end state read")
            metrics = controller.metrics()
        finally:
            churn.stop_event.set()
            controller.stop()
            hub.close()
        cpu_hub = cpu_seconds(int(hub_process.pid or 0))
    lines, by_event, errors = controller.log_lines()
    events_done = sum(churn.counts.values())
    # memory: from the calm half's start, or WARM_UP after the last start, to the churn's end
    last_start = max(t for t, _ in controller.starts)
    begin = max(schedule.calm, last_start + WARM_UP)
    window = [(t, r) for t, _, _, r in controller.samples if begin <= t <= args.duration]
    memory: dict[str, Any] = {"growth_pct": None}
    if args.duration - begin >= MIN_WINDOW:
        memory = growth(window)
    memory["window_s"] = [round(begin, 1), args.duration]
    memory["processes_in_window"] = len(
        {pid for t, pid, _, _ in controller.samples if begin <= t <= args.duration}
    )
    report: dict[str, Any] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "machine": machine(),
        "commit": commit_of(Path(__file__).resolve().parent),
        "command": " ".join(["python -m simulations.bench_churn", *sys.argv[1:]])
        if sys.argv[0].endswith("bench_churn.py")
        else "",
        "settings": {
            "duration_s": args.duration,
            "rate_per_s": args.rate,
            "population": args.population,
            "submit_every_s": args.submit_every,
            "sample_s": args.sample,
            "seed": args.seed,
            "grace_period_s": schedule.grace,
            "lease_s": schedule.lease,
            "faulty": faulty,
        },
        "timeline": timeline,
        "controller_samples": [
            (round(t, 1), pid, round(cpu, 2), round(rss / 2**20, 1))
            for t, pid, cpu, rss in controller.samples
        ],
        "churn": {
            "events": events_done,
            "by_kind": churn.counts,
            "failed": churn.failures,
            "per_s": round(events_done / churned, 1),
        },
        "submit_rounds": rounds,
        "census": {
            "samples": census.samples,
            "copies_max": max(census.copies, default=0),
            "hub_workloads_on_two_members": len(census.duplicates_hub),
            "hub_examples": dict(list(census.duplicates_hub.items())[:5]),
            "submitted_workloads_on_two_members": len(census.duplicates_submitted),
            "submitted_examples": dict(list(census.duplicates_submitted.items())[:5]),
            "duplicates_seen_within_grace": census.duplicates_within_grace,
            "overcommitted_nodes": len(census.overcommitted),
            "overcommitted_examples": dict(list(census.overcommitted.items())[:5]),
            "overcommitted_nodes_by_hub_copies": len(census.overcommitted_by_hub),
            "max_pending_pods": census.max_pending_pods,
            "stale_copies_seen_after_return_s": census.stale_after_return,
        },
        "end": {**end, "settled_in_s": settled_in},
        "controller": {
            "cpu_s": round(controller.cpu(), 1),
            "cpu_ms_per_event": round(1000 * controller.cpu() / max(1, events_done), 2),
            "log_lines": lines,
            "log_lines_per_event": round(lines / max(1, events_done), 2),
            "log_lines_by_event": dict(list(by_event.items())[:15]),
            "error_lines": errors,
            "starts": len(controller.logs),
            "exit_codes": controller.exit_codes,
            "rss_calm": memory,
            "reconciles": _metric(metrics, "placer_reconciles_total"),
            "placements": _metric(metrics, "placer_placements_total"),
            "failovers": by_event.get("failover", 0),
        },
        "hub_cpu_s": round(cpu_hub, 1),
    }
    report["checks"] = checks(report)
    return report


def checks(report: Mapping[str, Any]) -> dict[str, bool | None]:
    """Each invariant of the module docstring: held or not (``None``: not measured)."""
    census, end, controller = report["census"], report["end"], report["controller"]
    rss = controller["rss_calm"]["growth_pct"]
    return {
        "no_hub_workload_on_two_members": census["hub_workloads_on_two_members"] == 0
        and end["hub_workloads_on_two_members"] == 0,
        "no_submitted_workload_on_two_members": census["submitted_workloads_on_two_members"] == 0,
        "no_node_overcommitted_by_the_controller": census["overcommitted_nodes_by_hub_copies"] == 0,
        "no_overcommitted_node": census["overcommitted_nodes"] == 0,
        "every_hub_object_final": end["without_final_state"] == 0,
        "no_in_flight_entry_left": end["in_flight_entries"] == 0,
        "no_stale_copy": end["stale_copies"] == 0,
        "rss_flat": None if rss is None else rss <= 10.0,
        "churn_rate_met": report["churn"]["per_s"] >= 0.95 * report["settings"]["rate_per_s"],
        "no_error_logged": controller["error_lines"] == 0,
    }


def markdown(report: Mapping[str, Any]) -> str:
    s, census, end, c = report["settings"], report["census"], report["end"], report["controller"]
    rss = c["rss_calm"]
    mark = {True: "yes", False: "**NO**", None: "not measured (window too short)"}
    checks = report["checks"]
    lines = [
        "# bench_churn: the controller under churn, races, member faults and kills",
        "",
        f"Date {report['date']}; {s['duration_s']:g} s of churn at {s['rate_per_s']:g} "
        f"events/s (about {s['population']} live JobSets) on a hub and the 8 members of "
        f"openb-8 (virtual fleet with pods); two `placer submit` racing every "
        f"{s['submit_every_s']:g} s; {s['faulty']['401']} answering 401 and "
        f"{s['faulty']['stopped']} stopped for {0.2 * s['duration_s']:g} s each; the "
        f"controller killed with SIGKILL twice; grace period {s['grace_period_s']:g} s. "
        f"Python {report['machine']['python']}, {report['machine']['cpus']} cores, load "
        f"{', '.join(f'{x:.1f}' for x in report['machine']['loadavg_start'])} at the start "
        f"(commit {report.get('commit', '?')}).",
        "",
        "| invariant | measured | holds |",
        "|---|---|---|",
        f"| hub workloads on two members at once (outside the grace period) | "
        f"{census['hub_workloads_on_two_members']} during, "
        f"{end['hub_workloads_on_two_members']} at the end | "
        f"{mark[checks['no_hub_workload_on_two_members']]} |",
        f"| submitted workloads on two members at once | "
        f"{census['submitted_workloads_on_two_members']} | "
        f"{mark[checks['no_submitted_workload_on_two_members']]} |",
        f"| overcommitted nodes (placement plans of the hub's copies) | "
        f"{census['overcommitted_nodes_by_hub_copies']} | "
        f"{mark[checks['no_node_overcommitted_by_the_controller']]} |",
        f"| overcommitted nodes (placement plans of every copy, racers' included) | "
        f"{census['overcommitted_nodes']} | {mark[checks['no_overcommitted_node']]} |",
        f"| hub objects without a final state at the end | {end['without_final_state']} of "
        f"{end['hub_objects']} | {mark[checks['every_hub_object_final']]} |",
        f"| in-flight entries left at the end (still counting; stored: "
        f"{end['ledger_entries_stored']}) | {end['in_flight_entries']} | "
        f"{mark[checks['no_in_flight_entry_left']]} |",
        f"| stale copies after the members returned | {end['stale_copies']} | "
        f"{mark[checks['no_stale_copy']]} |",
        f"| controller RSS over the fault-free second half | {rss.get('first_mib')} → "
        f"{rss.get('last_mib')} MiB ({rss.get('growth_pct')} %) | {mark[checks['rss_flat']]} |",
        f"| churn events / s | {report['churn']['per_s']} ({report['churn']['events']} events) "
        f"| {mark[checks['churn_rate_met']]} |",
        f"| error lines in the controller's log | {c['error_lines']} | "
        f"{mark[checks['no_error_logged']]} |",
        "",
        f"Controller: {c['cpu_s']} s CPU in {c['starts']} processes, **{c['cpu_ms_per_event']} "
        f"ms CPU per event**; {c['log_lines']} log lines, **{c['log_lines_per_event']} per "
        f"event**; {c['placements']:g} placements (last process), {c['failovers']} failovers, "
        f"{c['reconciles']:g} reconciles (last process). The end state was reached "
        f"{end['settled_in_s']} s after the churn stopped; "
        f"{census['duplicates_seen_within_grace']} sightings of a workload on two members "
        "within the grace period (a member out of sight, or back for less than the grace "
        f"period); copies failed over while their member was out of sight were last seen "
        f"there {census['stale_copies_seen_after_return_s'] or 'never'} s after it came back "
        "(a copy stays while the member its workload moved to is out of sight in turn: it "
        "is adopted again if that one stays lost). "
        f"Hub objects at the end by state: "
        f"{end['states']}.",
        "",
        f"Timeline (s): {'; '.join(f'{t:g} {w}' for t, w in report['timeline'])}.",
        "",
    ]
    return "\n".join(lines)


def parser() -> argparse.ArgumentParser:
    """The command line (the test of the short version parses its arguments with it)."""
    parser = argparse.ArgumentParser(prog="python -m simulations.bench_churn")
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of churn")
    parser.add_argument("--rate", type=float, default=20.0, help="hub events a second")
    parser.add_argument("--population", type=int, default=300, help="live JobSets, about")
    parser.add_argument("--submit-every", type=float, default=30.0)
    parser.add_argument("--sample", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--settle", type=float, default=180.0, help="most seconds to wait")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--out", type=Path, default=RESULTS, help="directory of the results")
    parser.add_argument("--no-save", action="store_true", help="print, do not write results")
    parser.add_argument(
        "--keep", type=Path, help="work in this directory and keep it (controller logs...)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.keep is not None:
        args.keep.mkdir(parents=True, exist_ok=True)
        report = run(args, args.keep)
    else:
        with tempfile.TemporaryDirectory(prefix="bench-churn-") as tmp:
            report = run(args, Path(tmp))
    text = markdown(report)
    print(text)
    if not args.no_save:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "bench_churn.json").write_text(json.dumps(report, indent=1) + "\n")
        (args.out / "bench_churn.md").write_text(text)
    failed = [name for name, held in report["checks"].items() if held is False]
    if failed:
        print(f"FAILED: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
