"""deploy/: the manifests parse, agree with placer's code, and cover every catalog kind."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer import policy
from placer.cli import build_parser
from placer.definitions import Catalog
from placer.kube import load_kubeconfigs

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"


def _documents(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((DEPLOY / name).read_text()) if d]


def _plural(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def _rules(name: str, role: str) -> list[dict[str, Any]]:
    (found,) = [d for d in _documents(name) if d["kind"] == "ClusterRole"]
    assert found["metadata"]["name"] == role
    return list(found["rules"])


def _allowed(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    verbs: set[str] = set()
    for rule in rules:
        if group in rule["apiGroups"] and resource in rule["resources"]:
            verbs |= set(rule["verbs"])
    return verbs


def test_every_manifest_parses_and_kustomization_lists_them() -> None:
    kustomization = yaml.safe_load((DEPLOY / "kustomization.yaml").read_text())
    for name in kustomization["resources"]:
        for document in _documents(name):
            assert document["apiVersion"] and document["kind"], name
    for document in _documents("member/rbac.yaml"):
        assert document["kind"]


def test_policy_crd_matches_policy_module() -> None:
    (crd,) = _documents("crds/placementpolicies.placer.dev.yaml")
    names = crd["spec"]["names"]
    assert names["kind"] == policy.KIND
    (version,) = crd["spec"]["versions"]
    assert f"{crd['spec']['group']}/{version['name']}" == policy.API_VERSION
    spec = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert set(spec) == set(policy._SPEC_FIELDS)
    assert spec["objective"]["enum"] == list(policy.OBJECTIVES)
    operators = spec["clusterSelector"]["properties"]["matchExpressions"]["items"]["properties"]
    assert operators["operator"]["enum"] == list(policy._OPERATORS)
    assert crd["spec"]["scope"] == "Cluster" and "status" in version["subresources"]


def test_rbac_covers_every_catalog_kind() -> None:
    hub = _rules("rbac.yaml", "placer-controller")
    member = _rules("member/rbac.yaml", "placer-dispatcher")
    for definition in Catalog.builtin().definitions:
        target = definition.target
        assert target is not None
        plural = _plural(target.kind)
        assert {"get", "list", "watch", "patch"} <= _allowed(hub, target.group, plural), target
        assert "patch" in _allowed(hub, target.group, f"{plural}/status"), target
        assert {"create", "delete"}.isdisjoint(_allowed(hub, target.group, plural)), target
        needed = {"get", "list", "watch", "create", "patch", "delete"}
        assert needed <= _allowed(member, target.group, plural), target
    assert _allowed(hub, "", "events") == {"create", "patch"}
    roles = {d["metadata"]["name"]: d for d in _documents("rbac.yaml") if d["kind"] == "Role"}
    lease_role = roles["placer-controller-leader-election"]
    verbs = {v for rule in lease_role["rules"] for v in rule["verbs"]}
    assert verbs == {"get", "create", "update"}
    # the reservations' ConfigMap (placer.controller.reservationstore), and no other one
    from placer.controller.reservationstore import CONFIGMAP

    kept = roles["placer-controller-reservations"]["rules"]
    assert {v for r in kept if r.get("resourceNames") == [CONFIGMAP] for v in r["verbs"]} >= {
        "get",
        "patch",
    }
    assert all(r["resources"] == ["configmaps"] for r in kept)
    assert all("resourceNames" in r or r["verbs"] == ["create"] for r in kept)


def test_hub_role_reads_the_dra_claims_workloads_name() -> None:
    """The hub cache watches the hub's ResourceClaimTemplates and ResourceClaims, and never
    writes them."""
    from placer.controller.hubcache import CLAIM_KINDS

    hub = _rules("rbac.yaml", "placer-controller")
    for api_version, kind in CLAIM_KINDS:
        group = api_version.split("/")[0]
        assert _allowed(hub, group, _plural(kind)) == {"get", "list", "watch"}, kind


def test_member_role_covers_the_ledger_and_the_workload_claims() -> None:
    """The in-flight ledger creates, lists, patches and deletes ConfigMaps in placer-system;
    the claims are compare-and-swap writes there (get, then update)."""
    (role,) = [d for d in _documents("member/rbac.yaml") if d["kind"] == "Role"]
    assert role["metadata"]["namespace"] == "placer-system"
    verbs = {
        v for rule in role["rules"] if "configmaps" in rule["resources"] for v in rule["verbs"]
    }
    assert {"get", "list", "create", "update", "patch", "delete"} <= verbs


#: what capacity gathering reads on a member (placer/fleet/gather.py), group and resource.
CAPACITY_READS = (
    ("", "nodes"),
    ("", "pods"),
    ("resource.k8s.io", "resourceslices"),
    ("resource.k8s.io", "resourceclaims"),
)


def test_member_role_covers_capacity_gathering() -> None:
    """Gathering a member lists its nodes and pods, and its ResourceSlices and ResourceClaims
    where it serves resource.k8s.io/v1 (placer/fleet/gather.py): a 403 on any of them leaves
    the whole member out of decisions as Forbidden."""
    member = _rules("member/rbac.yaml", "placer-dispatcher")
    for group, resource in CAPACITY_READS:
        assert "list" in _allowed(member, group, resource), (group, resource)


def test_member_role_covers_the_controllers_capacity_watches() -> None:
    """The controller lists once and then watches what capacity and the ledger read
    (placer/controller/capacity.py): a 403 on a watch leaves the member out as Forbidden."""
    member = _rules("member/rbac.yaml", "placer-dispatcher")
    for group, resource in CAPACITY_READS:
        assert {"list", "watch"} <= _allowed(member, group, resource), (group, resource)
    (role,) = [d for d in _documents("member/rbac.yaml") if d["kind"] == "Role"]
    verbs = {
        v for rule in role["rules"] if "configmaps" in rule["resources"] for v in rule["verbs"]
    }
    assert {"list", "watch"} <= verbs


def test_deployment_arguments_are_placer_controller_options(tmp_path: Path) -> None:
    (deployment,) = [d for d in _documents("deployment.yaml") if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["args"])
    assert args.command == "controller" and args.hub_context == "hub"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    (config,) = _documents("hub-kubeconfig.yaml")
    path = tmp_path / "kubeconfig"
    path.write_text(config["data"]["kubeconfig"])
    context = load_kubeconfigs([path]).context(args.hub_context)
    assert context.server == "https://kubernetes.default.svc"


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_renders_the_deployment() -> None:
    """`kubectl apply -k deploy/` starts from this rendering: every object, one namespace."""
    rendered = subprocess.run(
        ["kubectl", "kustomize", str(DEPLOY)], capture_output=True, text=True, check=True
    ).stdout
    documents = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = {d["kind"] for d in documents}
    assert {"Namespace", "CustomResourceDefinition", "Deployment", "ClusterRole"} <= kinds
    namespaced = [
        d for d in documents if d["kind"] in {"Deployment", "ServiceAccount", "Role", "Service"}
    ]
    assert namespaced and {d["metadata"].get("namespace") for d in namespaced} == {"placer-system"}
