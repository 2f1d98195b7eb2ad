"""Topology constraints read from definitions (podGroup topology), KAI and Kueue annotations."""

from __future__ import annotations

from typing import Any

import pytest

from placer.definitions import Catalog, decompose, definition_from_dict
from placer.errors import InterpretationError
from placer.model import TopologyConstraint
from placer.topology import topologies_from_list

RACK = "network.topology.nvidia.com/leaf"
ZONE = "topology.kubernetes.io/zone"


def definition(pod_group: dict[str, Any] | None = None) -> Any:
    gang = {"gangScheduling": {"podGroup": pod_group}} if pod_group else {}
    return definition_from_dict(
        {
            "apiVersion": "run.ai/v1alpha1",
            "kind": "Karta",
            "metadata": {"name": "t"},
            "spec": {
                "structureDefinition": {
                    "rootComponent": {
                        "name": "root",
                        "kind": {"group": "example.com", "version": "v1", "kind": "T"},
                        "statusDefinition": {"statusMappings": {}},
                    },
                    "childComponents": [
                        {
                            "name": name,
                            "ownerRef": "root",
                            "specDefinition": {"podTemplateSpecPath": f".spec.{name}"},
                            "scaleDefinition": {"replicasPath": f".spec.{name}Replicas"},
                        }
                        for name in ("a", "b")
                    ],
                },
                "optimizationInstructions": gang,
            },
        }
    )


def obj(annotations: dict[str, str] | None = None, b_annotations: Any = None) -> Any:
    template = {"spec": {"containers": [{"name": "c", "image": "x"}]}}
    b_template = {**template, "metadata": {"annotations": b_annotations or {}}}
    return {
        "apiVersion": "example.com/v1",
        "kind": "T",
        "metadata": {"name": "t", "annotations": annotations or {}},
        "spec": {"a": template, "b": b_template, "aReplicas": 1, "bReplicas": 4},
    }


def topo(required: str = "", preferred: str = "", name: str = "default") -> dict[str, str]:
    return {
        "topologyName": name,
        "requiredTopologyLevel": required,
        "preferredTopologyLevel": preferred,
    }


def test_pod_group_and_sub_group_topology() -> None:
    d = definition(
        {
            "name": "pg",
            "subGroups": [
                {"componentName": "a"},
                {"componentName": "b", "topology": topo(preferred=RACK)},
            ],
            "topology": topo(required=ZONE),
        }
    )
    workload = decompose(obj(), d).workload
    assert workload.topology == (
        TopologyConstraint(
            "pg",
            ("a", "b"),
            required=ZONE,
            source="optimizationInstructions.gangScheduling.podGroup.topology of definition 't'",
        ),
        TopologyConstraint(
            "pg/b",
            ("b",),
            preferred=RACK,
            source="optimizationInstructions.gangScheduling.podGroup.subGroups[1].topology "
            "of definition 't'",
        ),
    )


def test_kai_annotations_cover_the_whole_workload() -> None:
    annotations = {
        "kai.scheduler/topology": "default",
        "kai.scheduler/topology-required-placement": RACK,
    }
    (constraint,) = decompose(obj(annotations), definition()).workload.topology
    assert (constraint.members, constraint.required, constraint.preferred) == (
        ("a", "b"),
        RACK,
        "",
    )


def test_kueue_annotations_cover_one_pod_set() -> None:
    kueue = {"kueue.x-k8s.io/podset-preferred-topology": RACK}
    (constraint,) = decompose(obj(b_annotations=kueue), definition()).workload.topology
    assert (constraint.members, constraint.preferred) == (("b",), RACK)


def test_unknown_level_is_an_error_naming_the_field() -> None:
    # a topology placer does not know (the member's own Topology object): any known level
    d = definition({"name": "pg", "topology": topo("example.com/rack", name="cluster-topology")})
    with pytest.raises(InterpretationError) as caught:
        decompose(obj(), d)
    text = str(caught.value)
    assert "podGroup.topology.requiredTopologyLevel" in text
    assert "unknown topology level 'example.com/rack'" in text
    assert "topologies: section" in text
    # placer's default topology must list it
    d = definition({"name": "pg", "topology": topo(preferred="example.com/rack")})
    with pytest.raises(InterpretationError, match="is not a level of topology 'default'"):
        decompose(obj(), d)


def test_configured_topology_knows_its_levels() -> None:
    topologies = topologies_from_list(
        [{"name": "dc", "levels": [{"nodeLabel": "example.com/block"}, {"nodeLabel": "r"}]}]
    )
    catalog = Catalog([definition()]).with_topologies(topologies)
    ok = {"kai.scheduler/topology": "dc", "kai.scheduler/topology-required-placement": "r"}
    assert decompose(obj(ok), catalog).workload.topology[0].required == "r"
    # a named topology must list the level (a default level is not one of dc's)
    wrong = {**ok, "kai.scheduler/topology-required-placement": ZONE}
    with pytest.raises(InterpretationError, match="is not a level of topology 'dc'"):
        decompose(obj(wrong), catalog)


def test_malformed_topologies_section() -> None:
    with pytest.raises(ValueError, match=r"topologies\[0\]\.levels\[0\]\.nodeLabel"):
        topologies_from_list([{"name": "dc", "levels": [{"label": "x"}]}])
