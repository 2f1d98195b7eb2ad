"""Issue 15's acceptance scenario, end to end through the placement controller.

A hub and two virtual members (``small``, ``big``), real loopback HTTPS servers reached through
real kubeconfig files; the workloads and the PlacementPolicy are applied to the hub with
kubectl. ``small`` has room for two 3-pod gangs when the controller decides, so it places both
there (the policy prefers it); before their pods are bound, another tenant's pod takes three
GPUs of it, leaving room for one and a half gangs — the room changed between the decision and
the binding, which is when a member's scheduler leaves a placed gang waiting. Then:

* with the ``default`` scheduler both gangs are half-started (two pods of each bound, one of
  each waiting: the deadlock), and both move to ``big`` after ``pendingTimeout``, once each;
* with ``volcano`` or ``kai`` one gang runs whole and the other waits whole; only the waiting one
  moves to ``big`` after ``pendingTimeout``, exactly once, with condition and Event
  ``Rescheduled`` carrying the member scheduler's reason; the running one stays.

Never two copies: a reactor on each member checks at every write that no workload has a copy
(or a bound pod) on two members at once.
"""

from __future__ import annotations

import copy
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.controller import Controller, ControllerSettings, LeaseSettings
from placer.controller.settings import BackoffSettings
from placer.definitions import Catalog
from placer.fleet.config import load_fleet_file
from placer.kube import ClientSettings, load_kubeconfigs, open_client
from placer.model import Cluster
from placer.snapshot import fleet_from_dict
from placer.testing import ApiServer, WriteEvent
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import Realism, register_catalog_kinds, register_scheduler_kinds
from tests.builders.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
GANGS = ROOT / "deploy" / "examples" / "two-gangs.yaml"
NAMES = ("gang-a", "gang-b")
PENDING_TIMEOUT = 3.0


def fleet_snapshot() -> Any:
    """clusters/gangs.yaml with small-2 empty: room for two gangs when the controller decides."""
    data = yaml.safe_load((ROOT / "clusters" / "gangs.yaml").read_text())
    [small] = [c for c in data["clusters"] if c["name"] == "small"]
    for group in small["nodeGroups"]:
        group["requested"] = {"cpu": "0", "memory": "0", "nvidia.com/gpu": "0", "pods": "0"}
    return fleet_from_dict(data)


class Scenario:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp = tmp_path
        self.reactors: dict[str, Realism] = {}
        self.catalog = Catalog.builtin()
        self.violations: list[str] = []
        self.hub_conditions: list[tuple[str, str, str, str]] = []
        self.small_uids: dict[str, str] = {}
        self.virtual = VirtualFleet(fleet_snapshot(), setup=self.setup, hub="hub")

    def setup(self, cluster: Cluster, server: ApiServer) -> None:
        register_catalog_kinds(server.store, self.catalog)
        register_scheduler_kinds(server.store)
        # small binds when the test says (flush), big at once
        window = 3600.0 if cluster.name == "small" else 0.0
        reactor = Realism(self.catalog, name=cluster.name, window=window)
        self.reactors[cluster.name] = reactor
        server.store.add_reactor(reactor)
        server.store.add_reactor(self.never_two)

    def never_two(self, event: WriteEvent) -> None:
        """At every member write: no workload has a copy, or bound pods, on two members."""
        if event.type == "DELETED" or event.resource.kind not in ("JobSet", "Pod"):
            return
        for name in NAMES:
            where = [m for m in ("small", "big") if self.holds(m, name)]
            if len(where) > 1:
                self.violations.append(f"{name} on {where} at once")

    def holds(self, member: str, name: str) -> bool:
        store = self.virtual.server(member).store
        if any(j["metadata"]["name"] == name for j in store.list("jobsets", "default")):
            return True
        return any(
            p["spec"].get("nodeName")
            and [r["name"] for r in p["metadata"].get("ownerReferences") or ()] == [name]
            for p in store.list("pods", "default")
        )

    def watch_hub(self, event: WriteEvent) -> None:
        if event.resource.kind != "JobSet" or event.type == "DELETED":
            return
        for c in (event.object.get("status") or {}).get("conditions") or ():
            if c.get("type") == "Placed":
                entry = (event.object["metadata"]["name"], c["status"], c["reason"], c["message"])
                if entry not in self.hub_conditions:
                    self.hub_conditions.append(entry)

    # ----------------------------------------------------------------------------------------

    def kubectl(self, *args: str, stdin: str = "") -> str:
        kubectl = shutil.which("kubectl") or "/usr/bin/kubectl"
        if not Path(kubectl).exists():
            pytest.skip("kubectl not installed")
        result = subprocess.run(
            [kubectl, "--kubeconfig", str(self.kubeconfig), "--context", "hub", *args],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={"HOME": str(self.tmp), "PATH": "/usr/bin:/bin"},
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def start(self, scheduler: str) -> None:
        self.virtual.start()
        self.kubeconfig = self.virtual.write_kubeconfig(self.tmp / "kubeconfig")
        self.virtual.server("hub").store.add_reactor(self.watch_hub)
        spec: dict[str, Any] = {"name": scheduler}
        if scheduler == "kai":
            spec["defaultQueue"] = "research"
        fleet = self.tmp / "fleet.yaml"
        fleet.write_text(
            yaml.safe_dump(
                {
                    "clusters": [
                        {"name": n, "kubeconfig": str(self.kubeconfig), "scheduler": spec}
                        for n in ("small", "big")
                    ]
                }
            )
        )
        policy = {
            "apiVersion": "placer.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "gangs"},
            "spec": {
                "preferredClusters": ["small", "big"],
                "pendingTimeout": f"{PENDING_TIMEOUT:g}s",
            },
        }
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump(policy))
        settings = ControllerSettings(
            hub="hub",
            identity="test-controller",
            batch_window=0.3,
            grace_period=60.0,
            resync_interval=0.5,
            solve_time_limit=1.0,
            gather_timeout=5.0,
            discovery_interval=1.0,
            backoff=BackoffSettings(initial=0.2, maximum=2.0),
            lease=LeaseSettings(
                namespace="placer-system", duration=2.0, renew_deadline=1.5, retry_period=0.3
            ),
        )
        self.client = open_client(
            load_kubeconfigs([self.kubeconfig]),
            "hub",
            name="hub",
            settings=ClientSettings(pool_size=48),
        )
        controller = Controller(self.client, load_fleet_file(fleet), settings)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=lambda: controller.run(self.stop), daemon=True)
        self.thread.start()
        gangs = []
        for body in yaml.safe_load_all(GANGS.read_text()):
            body = copy.deepcopy(body)
            body["spec"]["suspend"] = True  # the hub runs nothing
            gangs.append(body)
        self.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(gangs))

    def close(self) -> None:
        if hasattr(self, "stop"):
            self.stop.set()
            self.thread.join(timeout=60)
            self.client.close()
        self.virtual.stop()

    # ----------------------------------------------------------------------------------------

    def member_pods(self, member: str) -> dict[str, tuple[int, int]]:
        """workload -> (pods bound, pods waiting as Unschedulable) on ``member``."""
        out: dict[str, tuple[int, int]] = {}
        for pod in self.virtual.server(member).store.list("pods", "default"):
            if not pod["metadata"].get("ownerReferences"):
                continue  # the other tenant's
            owner = pod["metadata"]["ownerReferences"][0]["name"]
            bound, waiting = out.get(owner, (0, 0))
            if pod["spec"].get("nodeName"):
                bound += 1
            elif (pod["status"].get("conditions") or [{}])[0].get("reason") == "Unschedulable":
                waiting += 1
            out[owner] = (bound, waiting)
        return out

    def hub_object(self, name: str) -> dict[str, Any]:
        obj: dict[str, Any] = self.virtual.server("hub").store.get("jobsets", name, "default")
        return obj

    def uid(self, name: str) -> str:
        """The uid of the copy of ``name`` the test saw on small."""
        return self.small_uids[name]

    def placed_on(self, name: str) -> str:
        return str(
            self.hub_object(name)["metadata"]
            .get("annotations", {})
            .get("placer.dev/placed-cluster", "")
        )

    def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        return [
            e
            for e in self.virtual.server("hub").store.list("events", "default")
            if e["involvedObject"]["name"] == name and e["reason"] == reason
        ]


@pytest.fixture
def scenario(tmp_path: Path) -> Iterator[Scenario]:
    made = Scenario(tmp_path)
    try:
        yield made
    finally:
        made.close()


def take_room(scenario: Scenario) -> None:
    """Another tenant's pod takes three GPUs of small-2 (room for one and a half gangs left),
    then small's scheduler looks at the gangs' pods."""
    small = scenario.virtual.server("small").store
    small.seed(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "other-tenant", "namespace": "default"},
                "spec": {
                    "nodeName": "small-2",
                    "containers": [
                        {
                            "name": "c",
                            "image": "x",
                            "resources": {"requests": {"nvidia.com/gpu": "3", "cpu": "1"}},
                        }
                    ],
                },
                "status": {"phase": "Running"},
            }
        ]
    )
    scenario.small_uids = {
        j["metadata"]["name"]: j["metadata"]["uid"] for j in small.list("jobsets", "default")
    }
    scenario.reactors["small"].flush()


def both_dispatched_to_small(scenario: Scenario) -> bool:
    small = scenario.virtual.server("small").store
    pods = small.list("pods", "default")
    if len(small.list("jobsets", "default")) != 2 or len(pods) != 6:
        return False
    return [scenario.placed_on(n) for n in NAMES] == ["small", "small"]


@pytest.mark.kubectl
@pytest.mark.parametrize("scheduler", ["volcano", "kai"])
def test_a_gang_scheduler_runs_one_and_the_waiting_gang_moves_once(
    scenario: Scenario, scheduler: str
) -> None:
    scenario.start(scheduler)
    wait_until(lambda: both_dispatched_to_small(scenario), timeout=60, what="both on small")
    take_room(scenario)
    counts = scenario.member_pods("small")
    assert sorted(counts.values()) == [(0, 3), (3, 0)], counts  # one runs, one waits whole
    [running] = [n for n, c in counts.items() if c == (3, 0)]
    [stuck] = [n for n, c in counts.items() if c == (0, 3)]
    waited_from = time.monotonic()

    wait_until(
        lambda: scenario.member_pods("big").get(stuck) == (3, 0),
        timeout=60,
        interval=0.1,
        what=f"{stuck} running on big",
    )
    assert time.monotonic() - waited_from >= PENDING_TIMEOUT - 1.0  # not before its timeout
    time.sleep(2.5)  # a few more looks of the stuck check (every cycle, 0.5 s): nothing more
    assert scenario.placed_on(stuck) == "big"
    assert scenario.placed_on(running) == "small"
    assert scenario.member_pods("small") == {running: (3, 0)}
    assert scenario.member_pods("big") == {stuck: (3, 0)}
    annotations = scenario.hub_object(stuck)["metadata"]["annotations"]
    assert annotations["placer.dev/avoid-clusters"] == "small"
    [event] = scenario.events(stuck, "Rescheduled")
    assert event["type"] == "Warning"
    group = stuck if scheduler == "volcano" else f"pg-{stuck}-{scenario.uid(stuck)}"
    reason = f"pod group {group}: 3 pod(s) must start together, 1 fit now; the group waits whole"
    assert "cluster small: 3 pod(s) unschedulable" in event["message"]
    assert reason in event["message"]
    assert f"pendingTimeout {PENDING_TIMEOUT:g}s" in event["message"]
    rescheduled = [c for c in scenario.hub_conditions if c[0] == stuck and c[2] == "Rescheduled"]
    assert rescheduled and rescheduled[0][1] == "False" and reason in rescheduled[0][3]
    assert not scenario.events(running, "Rescheduled")
    assert not scenario.violations, scenario.violations


@pytest.mark.kubectl
def test_default_scheduler_half_starts_both_and_both_move_once(scenario: Scenario) -> None:
    scenario.start("default")
    wait_until(lambda: both_dispatched_to_small(scenario), timeout=60, what="both on small")
    take_room(scenario)
    # the deadlock: two pods of each gang bound, each waiting for its third
    assert scenario.member_pods("small") == {"gang-a": (2, 1), "gang-b": (2, 1)}
    wait_until(
        lambda: scenario.member_pods("big") == {"gang-a": (3, 0), "gang-b": (3, 0)},
        timeout=60,
        interval=0.1,
        what="both gangs running on big",
    )
    time.sleep(2.5)
    assert scenario.member_pods("small") == {}
    for name in NAMES:
        assert scenario.placed_on(name) == "big"
        [event] = scenario.events(name, "Rescheduled")
        assert "cluster small: 1 pod(s) unschedulable" in event["message"]
        assert "virtual default-scheduler" in event["message"]
    assert not scenario.violations, scenario.violations
