"""Issue 17: topology in a PlacementPolicy (`spec.topology`, the Workload Map's podGroup
field names) — parsed strictly, honoured by the solver and its explanations for workloads
without constraints of their own, and told to the member on the dispatched copy."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.cli import main
from placer.errors import PolicyError
from placer.model import TopologyConstraint
from placer.policy import policies_from_yaml, topology_of
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.policy.test_policy import _workload

ROOT = Path(__file__).resolve().parents[2]
RACKS = ROOT / "clusters" / "racks.yaml"
TRAINING = ROOT / "deploy" / "examples" / "rack-training.yaml"
LEAF = "network.topology.nvidia.com/leaf"
POLICY = f"""
apiVersion: placer.dev/v1alpha1
kind: PlacementPolicy
metadata: {{name: racks}}
spec:
  topology: {{requiredTopologyLevel: {LEAF}, preferredTopologyLevel: nvidia.com/gpu.clique}}
"""


def files(tmp_path: Path) -> tuple[Path, Path]:
    """The rack-training JobSet without its own (KAI) topology annotation, and the policy."""
    data = yaml.safe_load(TRAINING.read_text())
    del data["metadata"]["annotations"]
    workload = tmp_path / "training.yaml"
    workload.write_text(yaml.safe_dump(data))
    policy = tmp_path / "policy.yaml"
    policy.write_text(POLICY)
    return workload, policy


@pytest.mark.parametrize(
    ("topology", "field", "text"),
    [
        ("{rack: r1}", "spec.topology.rack", "unknown field 'rack'"),
        (
            "{requiredTopologyLevel: 'not a key!'}",
            "spec.topology.requiredTopologyLevel",
            "label key",
        ),
        ("{}", "spec.topology", "give requiredTopologyLevel and/or preferredTopologyLevel"),
        ("[a]", "spec.topology", "must be a mapping"),
    ],
)
def test_bad_topology_is_an_error_naming_the_field(topology: str, field: str, text: str) -> None:
    doc = "apiVersion: placer.dev/v1alpha1\nkind: PlacementPolicy\nmetadata: {name: p}\n"
    doc += f"spec:\n  topology: {topology}\n"
    with pytest.raises(PolicyError) as caught:
        policies_from_yaml(doc, source="p.yaml")
    assert caught.value.field == field
    assert text in str(caught.value)


def test_the_workloads_own_constraints_win() -> None:
    [policy] = policies_from_yaml(POLICY)
    assert policy.topology == (LEAF, "nvidia.com/gpu.clique")
    plain = _workload("team-a", {})
    [constraint] = topology_of(plain, [policy]).topology
    assert (constraint.required, constraint.preferred) == (LEAF, "nvidia.com/gpu.clique")
    assert constraint.members == ("main",)
    own = TopologyConstraint("mine", ("main",), required="topology.kubernetes.io/zone")
    kept = replace(plain, topology=(own,))
    assert topology_of(kept, [policy]).topology == (own,)


def test_plan_keeps_the_gang_in_one_rack_and_names_the_short_domain(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload, policy = files(tmp_path)
    argv = ["plan", "-f", str(workload), "--snapshot", str(RACKS)]
    assert main([*argv, "-o", "json"]) == 0  # without the policy: dc1, across its racks
    assert json.loads(capsys.readouterr().out)["placements"][0]["cluster"] == "dc1"
    assert main([*argv, "--policy", str(policy), "-o", "json"]) == 0
    data: dict[str, Any] = json.loads(capsys.readouterr().out)
    [placement] = data["placements"]
    assert placement["cluster"] == "dc2"
    assert placement["topology"][0] == {
        "group": "policy racks",
        "level": LEAF,
        "required": True,
        "domains": ["r3"],
    }
    assert placement["refused"]["dc1"].startswith(
        f'no {LEAF} domain with 12 free GPUs for the 3 pods of pod group "policy racks" '
        "(required level, spec.topology of policy racks); the most in one domain: 8 free GPUs "
        f"in {LEAF}=r1"
    )


def test_submit_tells_the_member_the_rack_of_a_policy(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    workload, policy = files(tmp_path)
    with VirtualFleet(load_snapshot(RACKS), setup=realism_setup(pods=False)) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kubeconfig")
        argv = ["submit", "-f", str(workload), "--policy", str(policy)]
        assert main([*argv, "--kubeconfig", str(kubeconfig), "-o", "json"]) == 0
        capsys.readouterr()
        [copy] = virtual.server("dc2").store.list("jobsets.jobset.x-k8s.io", "default")
    spec = copy["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": LEAF, "operator": "In", "values": ["r3"]}]}
        ]
    }
