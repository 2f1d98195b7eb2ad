"""Acceptance with ``placer controller`` processes: a kill mid-cycle, and two replicas.

The processes are real ``python -m placer controller`` children talking to the loopback hub and
members of the test process through kubeconfig files.
"""

from __future__ import annotations

import json
import signal
import socket
import time
from typing import Any

import httpx
import pytest

from placer.controller.leader import API_VERSION, KIND
from placer.dispatch.ledger import LABEL_IN_FLIGHT

#: controller processes started, killed and restarted: slow (make test-fast leaves them out).
pytestmark = pytest.mark.slow

IN_FLIGHT = f"{LABEL_IN_FLIGHT}=true"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _copies_total(hubfleet: Any) -> int:
    return sum(len(s.store.list("jobs", hubfleet.NAMESPACE)) for s in hubfleet.members.values())


def _holder(hubfleet: Any) -> str:
    try:
        lease = hubfleet.hub.store.get("leases", "placer-controller", "placer-system")
    except Exception:
        return ""
    return str(lease["spec"].get("holderIdentity") or "")


def test_killed_mid_cycle_and_restarted_leaves_no_duplicates(hubfleet: Any) -> None:
    total = 150
    proc = hubfleet.process("ctl-0")
    hubfleet.wait_for(lambda: _holder(hubfleet) == "ctl-0", timeout=30, what="ctl-0 leads")
    for i in range(total):
        hubfleet.hub.store.create(hubfleet.job(f"k{i:03d}", gpus=1))

    def mid_cycle() -> bool:
        return total // 3 < _copies_total(hubfleet) < total

    hubfleet.wait_for(mid_cycle, timeout=30, what="a cycle dispatching")
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    copies_at_kill = _copies_total(hubfleet)
    recorded_at_kill = sum(1 for j in hubfleet.hub_jobs() if hubfleet.placed_cluster(j))
    assert recorded_at_kill < total  # killed before the cycle was recorded

    hubfleet.process("ctl-0")  # restarted (same pod name: it renews its own lease at once)

    def settled() -> bool:
        jobs = hubfleet.hub_jobs()
        return all(
            hubfleet.placed_cluster(j) and (hubfleet.condition(j) or {}).get("status") == "True"
            for j in jobs
        )

    hubfleet.wait_for(settled, timeout=60, what="every workload placed after the restart")
    time.sleep(1.0)  # time for any duplicate to appear
    for job in hubfleet.hub_jobs():
        copies = hubfleet.copies(job["metadata"]["name"])
        assert list(copies) == [hubfleet.placed_cluster(job)], job["metadata"]["name"]
    assert _copies_total(hubfleet) == total
    # copies without a record at the kill were adopted where they were, not placed again
    assert copies_at_kill > recorded_at_kill
    assert '"event": "adopted"' in hubfleet.log("ctl-0")


def test_restarted_it_does_not_wait_for_the_entries_its_predecessor_never_applied(
    hubfleet: Any,
) -> None:
    """Issue 12, item 6: killed after reserving room on every member (three Jobs, each
    filling a member) but before its applies landed. Its successor — the same Deployment
    pod, a new process elected through the same Lease — retires those entries at start-up
    and places the Jobs at once, instead of leaving them Unschedulable on free GPUs until the
    entries expire (two minutes)."""
    gates = [s.faults.hold(verb="patch", resource="jobs") for s in hubfleet.members.values()]
    proc = hubfleet.process("ctl-0")
    hubfleet.wait_for(lambda: _holder(hubfleet) == "ctl-0", timeout=30, what="ctl-0 leads")
    for i in range(3):
        hubfleet.hub.store.create(hubfleet.job(f"big{i}", gpus=hubfleet.GPUS, pods=hubfleet.NODES))
    for gate in gates:
        assert gate.arrived.wait(timeout=30), "an apply never arrived"
    for server in hubfleet.members.values():  # every member's room is reserved
        assert server.store.list("configmaps", "placer-system", label_selector=IN_FLIGHT)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    for server, gate in zip(hubfleet.members.values(), gates, strict=True):
        gate.release(deny=503, message="the client is gone")  # the held applies never land
        server.faults.clear()
    restarted = time.monotonic()
    hubfleet.process("ctl-0")

    def placed() -> bool:
        return all(
            (hubfleet.condition(j) or {}).get("status") == "True" for j in hubfleet.hub_jobs()
        )

    hubfleet.wait_for(placed, timeout=30, what="every Job placed after the restart")
    assert time.monotonic() - restarted < 30
    for job in hubfleet.hub_jobs():
        assert list(hubfleet.copies(job["metadata"]["name"])) == [hubfleet.placed_cluster(job)]


def test_two_controllers_only_the_leader_acts_standby_takes_over(hubfleet: Any) -> None:
    ports = {"ctl-a": _free_port(), "ctl-b": _free_port()}
    procs = {name: hubfleet.process(name, port=port) for name, port in ports.items()}

    def get(name: str, path: str) -> httpx.Response | None:
        try:
            return httpx.get(f"http://127.0.0.1:{ports[name]}{path}", timeout=2.0)
        except httpx.HTTPError:
            return None

    leader = hubfleet.wait_for(lambda: _holder(hubfleet), timeout=30, what="a leader")
    standby = next(n for n in ports if n != leader)
    hubfleet.wait_for(
        lambda: (r := get(standby, "/readyz")) is not None and "standby" in r.text,
        timeout=30,
        what="the standby answering",
    )
    for i in range(10):
        hubfleet.hub.store.create(hubfleet.job(f"a{i}", gpus=2))
    hubfleet.wait_for(
        lambda: (
            len(hubfleet.hub_jobs()) == 10
            and all(hubfleet.placed_cluster(j) for j in hubfleet.hub_jobs())
        ),
        timeout=30,
        what="placed by the leader",
    )
    # only the leader acted: every Event is the leader's, the standby counted nothing
    instances = {
        e.get("reportingInstance") for e in hubfleet.hub.store.list("events", hubfleet.NAMESPACE)
    }
    assert instances == {leader}
    standby_metrics = get(standby, "/metrics")
    assert standby_metrics is not None and standby_metrics.status_code == 200
    assert "placer_leader 0.0" in standby_metrics.text
    assert "placer_placements_total{" not in standby_metrics.text
    refused = get(standby, "/v1/placements")
    assert refused is not None and refused.status_code == 503 and leader in refused.text
    served = get(leader, "/v1/placements")
    assert served is not None and len(served.json()["placements"]) == 10

    # the leader dies without releasing the lease: the standby takes over when it expires
    procs[leader].send_signal(signal.SIGKILL)
    killed = time.monotonic()
    hubfleet.wait_for(lambda: _holder(hubfleet) == standby, timeout=15, what="takeover")
    took = time.monotonic() - killed
    lease = hubfleet.hub.store.get("leases", "placer-controller", "placer-system")
    assert lease["apiVersion"] == API_VERSION and lease["kind"] == KIND
    assert took <= 2.0 + 1.5, f"took {took:.1f}s with a 2s lease"
    for i in range(5):
        hubfleet.hub.store.create(hubfleet.job(f"b{i}", gpus=2))
    hubfleet.wait_for(
        lambda: (
            len(hubfleet.hub_jobs()) == 15
            and all(hubfleet.placed_cluster(j) for j in hubfleet.hub_jobs())
        ),
        timeout=30,
        what="placed by the new leader",
    )
    for job in hubfleet.hub_jobs():
        assert list(hubfleet.copies(job["metadata"]["name"])) == [hubfleet.placed_cluster(job)]

    # graceful shutdown: SIGTERM releases the lease and exits 0
    procs[standby].send_signal(signal.SIGTERM)
    assert procs[standby].wait(timeout=30) == 0
    assert _holder(hubfleet) == ""

    # structured logs: one JSON object a line, never a credential
    tokens = [hubfleet.hub.token, *(s.token for s in hubfleet.members.values())]
    for name in ports:
        text = hubfleet.log(name)
        lines = [line for line in text.splitlines() if line.strip()]
        assert lines and all(json.loads(line)["level"] for line in lines), name
        assert any(json.loads(line).get("event") == "placed" for line in lines), name
        assert not any(token in text for token in tokens), name
