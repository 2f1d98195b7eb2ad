"""Fixtures for the placement controller: a loopback hub and three loopback members.

* ``hubfleet``: a :class:`HubFleet` — hub ``hub`` and members ``m1``, ``m2``, ``m3`` (real
  loopback HTTPS API servers, reached through real kubeconfig files), each member with
  ``NODES`` GPU nodes, the ``placer-system`` and ``team-a`` namespaces on the hub. It starts
  controllers in-process (``hubfleet.controller(...)``, a thread, stopped at teardown) or as
  ``placer controller`` processes (``hubfleet.process(...)``, killed at teardown).
* helpers to build Jobs, wait for conditions and read copies.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from placer.controller import Controller, ControllerSettings, LeaseSettings
from placer.controller.settings import BackoffSettings
from placer.fleet import FleetConfig, fleet_from_kubeconfigs
from placer.kube import ClientSettings, KubeClient, load_kubeconfigs, open_client
from placer.testing import ApiServer, write_kubeconfig
from tests.builders import objects
from tests.builders.waiting import wait_until

MEMBERS = ("m1", "m2", "m3")
NODES = 12
GPUS = 8
NAMESPACE = "team-a"


def node(name: str, gpus: int = GPUS) -> dict[str, Any]:
    return objects.node(name, gpus=gpus)


def job(
    name: str,
    *,
    gpus: int = 1,
    pods: int = 1,
    namespace: str = NAMESPACE,
    queue: bool = True,
    labels: dict[str, str] | None = None,
    suspend: bool = True,
) -> dict[str, Any]:
    """A Job of ``pods`` pods of ``gpus`` GPUs, suspended, opted in with the queue label."""
    all_labels = {"placer.dev/queue": "default"} if queue else {}
    all_labels.update(labels or {})
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "labels": all_labels},
        "spec": {
            "suspend": suspend,
            "parallelism": pods,
            "completions": pods,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "main",
                            "image": "busybox",
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi"},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                }
            },
        },
    }


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, what: str = "") -> Any:
    """Poll ``predicate`` until it returns something truthy; fail the test after ``timeout``."""
    return wait_until(predicate, timeout=timeout, interval=0.05, what=what)


def annotations(obj: dict[str, Any]) -> dict[str, str]:
    return dict((obj.get("metadata") or {}).get("annotations") or {})


def placed_cluster(obj: dict[str, Any]) -> str | None:
    return annotations(obj).get("placer.dev/placed-cluster")


def condition(obj: dict[str, Any], kind: str = "Placed") -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or ():
        if item.get("type") == kind:
            return dict(item)
    return None


def settings(**overrides: Any) -> ControllerSettings:
    """A test controller's settings (hub ``hub``, short lease, windows and backoff), with
    ``overrides``."""
    lease = overrides.pop(
        "lease",
        LeaseSettings(
            namespace="placer-system", duration=2.0, renew_deadline=1.5, retry_period=0.3
        ),
    )
    values: dict[str, Any] = {
        "hub": "hub",
        "identity": "test-controller",
        "batch_window": 0.2,
        "grace_period": 60.0,
        "resync_interval": 0.5,
        "solve_time_limit": 1.0,
        "gather_timeout": 5.0,
        "discovery_interval": 1.0,
        "backoff": BackoffSettings(initial=0.2, maximum=2.0),
        "lease": lease,
    }
    values.update(overrides)
    return ControllerSettings(**values)


@dataclass
class Running:
    """An in-process controller and its thread."""

    controller: Controller
    stop: threading.Event
    thread: threading.Thread
    result: list[int] = field(default_factory=list)

    def halt(self) -> None:
        self.stop.set()
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "the controller did not stop"


@dataclass
class HubFleet:
    """The hub, the members, their kubeconfigs, and helpers (``hubfleet.job(...)`` ...)."""

    MEMBERS = MEMBERS
    NODES = NODES
    GPUS = GPUS
    NAMESPACE = NAMESPACE
    job = staticmethod(job)
    node = staticmethod(node)
    wait_for = staticmethod(wait_for)
    annotations = staticmethod(annotations)
    placed_cluster = staticmethod(placed_cluster)
    condition = staticmethod(condition)

    hub: ApiServer
    members: dict[str, ApiServer]
    hub_kubeconfig: Path
    members_kubeconfig: Path
    tmp: Path
    running: list[Running] = field(default_factory=list)
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    clients: list[KubeClient] = field(default_factory=list)

    def settings(self, **overrides: Any) -> ControllerSettings:
        return settings(**overrides)

    def hub_client(self) -> KubeClient:
        client = open_client(
            load_kubeconfigs([self.hub_kubeconfig]),
            "hub",
            name="hub",
            settings=ClientSettings(pool_size=48),
        )
        self.clients.append(client)
        return client

    def controller(self, fleet: FleetConfig | None = None, **overrides: Any) -> Running:
        """Start a controller in a thread (leader election on, short lease); the members are
        ``fleet`` (default: every context of the members' kubeconfig)."""
        fleet = fleet or fleet_from_kubeconfigs([self.members_kubeconfig], timeout=5.0)
        controller = Controller(self.hub_client(), fleet, self.settings(**overrides))
        stop = threading.Event()
        result: list[int] = []
        thread = threading.Thread(
            target=lambda: result.append(controller.run(stop)), name="controller", daemon=True
        )
        thread.start()
        running = Running(controller, stop, thread, result)
        self.running.append(running)
        return running

    def process(
        self,
        identity: str,
        *extra: str,
        port: int = 0,
        members: tuple[str, ...] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``placer controller`` as a child process (logs to ``tmp/<identity>.log``);
        the members are given by ``members`` (default: ``--kubeconfig`` of theirs)."""
        args = [
            sys.executable,
            "-m",
            "placer",
            "controller",
            "--hub-context",
            "hub",
            "--hub-kubeconfig",
            str(self.hub_kubeconfig),
            *(members or ("--kubeconfig", str(self.members_kubeconfig))),
            "--identity",
            identity,
            "--lease-namespace",
            "placer-system",
            "--lease-duration",
            "2",
            "--renew-deadline",
            "1.5",
            "--retry-period",
            "0.3",
            "--batch-window",
            "0.2",
            "--resync-interval",
            "0.5",
            "--time-limit",
            "1",
            "--metrics-port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--log-format",
            "json",
            *extra,
        ]
        log = open(self.tmp / f"{identity}.log", "ab")
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(args, stdout=log, stderr=log, env=env)
        log.close()
        self.processes.append(proc)
        return proc

    def log(self, identity: str) -> str:
        path = self.tmp / f"{identity}.log"
        return path.read_text() if path.exists() else ""

    def copies(self, name: str, namespace: str = NAMESPACE, kind: str = "jobs") -> dict[str, Any]:
        """The copies of a hub object on the members, by member name."""
        found = {}
        for member, server in self.members.items():
            for obj in server.store.list(kind, namespace):
                if obj["metadata"]["name"] == name:
                    found[member] = obj
        return found

    def hub_jobs(self, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        return self.hub.store.list("jobs", namespace)

    def events(self, name: str, namespace: str = NAMESPACE) -> list[dict[str, Any]]:
        return [
            e
            for e in self.hub.store.list("events", namespace)
            if e.get("involvedObject", {}).get("name") == name
        ]

    def close(self) -> None:
        for running in self.running:
            running.stop.set()
        for running in self.running:
            running.thread.join(timeout=60)
        for proc in self.processes:
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
        for client in self.clients:
            client.close()


@pytest.fixture
def hubfleet(start_apiserver: Callable[..., ApiServer], tmp_path: Path) -> Iterator[HubFleet]:
    hub = start_apiserver("hub")
    members = {name: start_apiserver(name) for name in MEMBERS}
    for name, server in members.items():
        server.store.seed(node(f"{name}-n{i}") for i in range(NODES))
    for namespace in ("placer-system", NAMESPACE):
        hub.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    fleet = HubFleet(
        hub=hub,
        members=members,
        hub_kubeconfig=write_kubeconfig(tmp_path / "hub.kubeconfig", {"hub": hub}),
        members_kubeconfig=write_kubeconfig(tmp_path / "members.kubeconfig", members),
        tmp=tmp_path,
    )
    yield fleet
    fleet.close()
