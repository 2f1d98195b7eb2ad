"""``placer fleet check``: the rights each use needs, asked of every member by
SelfSubjectAccessReview — the list kept equal to what deploy/member/rbac.yaml grants, and the
command on the virtual fleet with a member whose identity lacks rights, one stopped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.definitions import Catalog
from placer.fleet.access import (
    HANDOFF_KINDS,
    LEDGER_NAMESPACE,
    USES,
    fixed_rights,
    kind_rights,
    rights_by_rule,
)
from placer.kube.resources import split_api_version
from placer.snapshot import load_snapshot
from placer.testing import write_kubeconfig
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "clusters" / "demo.yaml"


def _granted_by(path: str) -> dict[tuple[str, str, str, str], set[str]]:
    """(group, resource, namespace, resourceName or "") → verbs the roles of deploy/PATH
    grant."""
    granted: dict[tuple[str, str, str, str], set[str]] = {}
    for doc in yaml.safe_load_all((ROOT / "deploy" / path).read_text()):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        namespace = doc["metadata"].get("namespace", "")
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for name in rule.get("resourceNames") or [""]:
                        key = (group, resource, namespace, name)
                        granted.setdefault(key, set()).update(rule["verbs"])
    return granted


def _granted() -> dict[tuple[str, str, str], set[str]]:
    """(group, resource, namespace) → verbs that deploy/member/rbac.yaml grants."""
    granted: dict[tuple[str, str, str], set[str]] = {}
    for (group, resource, namespace, _), verbs in _granted_by("member/rbac.yaml").items():
        granted.setdefault((group, resource, namespace), set()).update(verbs)
    return granted


def _plural(catalog: Catalog) -> dict[str, tuple[str, str, str]]:
    """kind → (group, plural, kind) of every catalog kind, from the virtual fleet's server."""
    with VirtualFleet(load_snapshot(DEMO), setup=realism_setup()) as virtual:
        registry = virtual.server("east").store.registry
        found = {}
        for definition in catalog.definitions:
            gvk = definition.target
            assert gvk is not None
            group, _ = split_api_version(gvk.api_version)
            rt = next(
                (t for t in registry if t.group == group and t.kind == gvk.kind),
                None,
            )
            assert rt is not None, f"the virtual fleet does not serve {gvk}"
            found[gvk.kind] = (rt.group, rt.plural, gvk.kind)
        return found


@pytest.mark.parametrize("use", USES)
def test_every_checked_right_is_granted_by_the_member_rbac(use: str) -> None:
    """What `fleet check` asks for is exactly what the shipped RBAC gives: a right checked but
    not granted would fail every check of a correctly installed member."""
    catalog = Catalog.builtin()
    handoff = [(av.split("/")[0], resource) for av, _, resource, _ in HANDOFF_KINDS]
    rights = fixed_rights(use, dra=True, handoff=handoff)
    for group, plural, kind in _plural(catalog).values():
        rights += kind_rights(use, group, plural, kind)
    granted = _granted()
    for (group, resource, namespace), verbs in rights_by_rule(rights).items():
        allowed = set(granted.get((group, resource, ""), set()))
        if namespace == LEDGER_NAMESPACE:
            allowed |= granted.get((group, resource, namespace), set())
        assert verbs <= allowed, (
            f"{use}: {sorted(verbs - allowed)} on {resource}.{group} "
            f"{'in ' + namespace if namespace else ''} is checked but not in rbac.yaml"
        )


def test_the_uses_grow() -> None:
    read, submit, controller = (
        set(map(str, fixed_rights(u, dra=False) + kind_rights(u, "g", "xs", "X"))) for u in USES
    )
    assert read < submit < controller
    assert "create xs.g" in submit and "watch xs.g" in controller and "watch xs.g" not in submit


def _check(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["fleet", "check", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_fleet_check_names_what_a_member_may_not_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with VirtualFleet(load_snapshot(DEMO), setup=realism_setup()) as virtual:
        kubeconfig = str(virtual.write_kubeconfig(tmp_path / "kc"))
        code, out, err = _check(["--kubeconfig", kubeconfig], capsys)
        assert code == 0, err
        rows = [line.split() for line in out.splitlines()]
        assert rows[0] == ["CLUSTER", "USE", "CHECKED", "MISSING", "STATUS"]
        assert [(r[0], r[1], r[3], r[4]) for r in rows[1:]] == [
            ("east", "submit", "0", "ok"),
            ("west", "submit", "0", "ok"),
            ("central", "submit", "0", "ok"),
        ]
        # west's identity may not create JobSets nor write the ledger (standing 403s: RBAC)
        west = virtual.server("west").faults
        west.fail(403, times=None, verb="create", resource="jobsets.jobset.x-k8s.io")
        west.fail(403, times=None, resource="configmaps", namespace=LEDGER_NAMESPACE)
        code, out, _ = _check(["--kubeconfig", kubeconfig], capsys)
        assert code == 1
        assert "west: cannot create jobsets.jobset.x-k8s.io (JobSet workloads)" in out
        assert (
            "west: cannot list configmaps in namespace placer-system (read the in-flight ledger)"
            in out
        )
        # reading needs neither
        code, out, _ = _check(["--kubeconfig", kubeconfig, "--for", "read"], capsys)
        assert code == 1 and "create jobsets" not in out and "list configmaps" in out
        # JSON, and a member that is down
        virtual.server("central").stop()
        code, out, _ = _check(
            ["--kubeconfig", kubeconfig, "--for", "controller", "-o", "json"], capsys
        )
        assert code == 1
        data: dict[str, Any] = json.loads(out)
        by_name = {c["cluster"]: c for c in data["clusters"]}
        assert data["use"] == "controller"
        assert by_name["east"]["ok"] is True and by_name["east"]["missing"] == []
        assert by_name["central"]["reachable"] is False and by_name["central"]["error"]
        missing = {(m["verb"], m["resource"]) for m in by_name["west"]["missing"]}
        assert ("create", "jobsets") in missing and ("watch", "configmaps") in missing
        assert ("watch", "jobsets") not in missing


def test_nothing_reachable_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with VirtualFleet(load_snapshot(DEMO), setup=realism_setup()) as virtual:
        kubeconfig = str(virtual.write_kubeconfig(tmp_path / "kc"))
        for name in ("east", "west", "central"):
            virtual.server(name).stop()
        code, _, err = _check(["--kubeconfig", kubeconfig, "--timeout", "2"], capsys)
    assert code == 3 and "no rights could be checked" in err


def test_the_hub_rights_checked_are_those_the_hub_rbac_grants(tmp_path: Path) -> None:
    """`fleet check --hub-context` asks the hub for exactly deploy/rbac.yaml's rules, on a hub
    that serves every catalog kind, placer's CRDs and DRA: a right checked but not granted
    would fail every correctly installed hub, one granted but not checked is not verified."""
    from placer.controller.hubaccess import hub_rights
    from placer.kube import load_kubeconfigs, open_client

    with VirtualFleet(load_snapshot(DEMO), hub="hub") as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        client = open_client(load_kubeconfigs([str(kubeconfig)]), "hub")
        try:
            rights, not_served = hub_rights(client, Catalog.builtin())
        finally:
            client.close()
    assert not_served == []  # the virtual hub serves every catalog kind
    checked: dict[tuple[str, str, str, str], set[str]] = {}
    for right in rights:
        key = (right.group, right.rbac_resource, right.namespace, right.name)
        checked.setdefault(key, set()).add(right.verb)
    granted = _granted_by("rbac.yaml")
    cluster_wide = {(g, r, "", ""): v for (g, r, ns, n), v in granted.items() if not ns}
    for (group, resource, namespace, name), verbs in checked.items():
        allowed = set(granted.get((group, resource, namespace, name), set()))
        allowed |= cluster_wide.get((group, resource, "", ""), set())
        assert verbs <= allowed, f"{sorted(verbs - allowed)} on {resource}.{group} not granted"
    unchecked = {
        key: verbs - checked.get(key, set())
        for key, verbs in granted.items()
        if verbs - checked.get(key, set())
    }
    served = {(g, r.split("/")[0]) for g, r, _, _ in checked}
    # the kinds the virtual hub does not serve are not checked (nor needed)
    unserved = {k: v for k, v in unchecked.items() if (k[0], k[1].split("/")[0]) not in served}
    assert unchecked == unserved, f"granted but never checked: {unchecked}"


def test_fleet_check_names_what_the_controller_may_not_do_on_the_hub(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with VirtualFleet(load_snapshot(DEMO), hub="hub") as virtual:
        kubeconfig = str(virtual.write_kubeconfig(tmp_path / "kc"))
        argv = ["--kubeconfig", kubeconfig, "--for", "controller", "--hub-context", "hub"]
        code, out, err = _check(argv, capsys)
        assert code == 0, err
        rows = [line.split() for line in out.splitlines()]
        assert [(r[0], r[1], r[3], r[4]) for r in rows[1:]] == [
            ("east", "controller", "0", "ok"),
            ("west", "controller", "0", "ok"),
            ("central", "controller", "0", "ok"),
            ("hub", "hub", "0", "ok"),
        ]
        hub = virtual.server("hub").faults
        hub.fail(403, times=None, verb="patch", resource="jobsets.jobset.x-k8s.io/status")
        hub.fail(403, times=None, verb="get", resource="leases.coordination.k8s.io")
        code, out, _ = _check(argv, capsys)
        assert code == 1
        assert "hub: cannot patch jobsets.jobset.x-k8s.io/status (JobSet workloads)" in out
        assert (
            "hub: cannot get leases.coordination.k8s.io placer-controller in namespace "
            "placer-system (leader election)" in out
        )
        assert "east:" not in out  # the members are fine
        # a kubeconfig of the hub alone checks only the hub, in JSON too
        alone = write_kubeconfig(tmp_path / "hub-only", {"hub": virtual.server("hub")})
        argv = ["--kubeconfig", str(alone), "--hub-context", "hub", "-o", "json"]
        code, out, _ = _check(argv, capsys)
        assert code == 1
        data = json.loads(out)
        [row] = data["clusters"]
        assert (row["cluster"], row["use"], row["ok"]) == ("hub", "hub", False)
        assert {(m["verb"], m["resource"], m["subresource"]) for m in row["missing"]} == {
            ("patch", "jobsets", "status"),
            ("get", "leases", ""),
        }
