"""Gang groups predicted from definitions, before any pod exists."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from placer.definitions import Catalog, Document, decompose, definition_from_dict
from placer.model import Gang

Sample = Callable[[str], list[Document]]


def gangs(catalog: Catalog, obj: Any) -> list[tuple[str, tuple[str, ...], int]]:
    return [(g.name, g.members, g.min_member) for g in decompose(obj, catalog).gangs]


def test_one_gang_per_jobset(catalog: Catalog, sample: Sample) -> None:
    assert gangs(catalog, sample("jobset")[0].data) == [
        ("jobset", ("replicatedjob/driver", "replicatedjob/workers"), 9)
    ]


def test_elastic_minimum(catalog: Catalog, sample: Sample) -> None:
    # master 1 + worker minReplicas 2 (of 3)
    assert gangs(catalog, sample("pytorchjob")[0].data) == [("job", ("master", "worker"), 3)]
    # a component with 0 replicas is not a member
    assert gangs(catalog, sample("pytorchjob")[1].data) == [("job", ("worker",), 2)]


def test_one_gang_per_leaderworkerset_group(catalog: Catalog, sample: Sample) -> None:
    assert gangs(catalog, sample("leaderworkerset")[0].data) == [
        ("group-0", ("leader", "worker"), 4),
        ("group-1", ("leader", "worker"), 4),
    ]


def test_one_gang_per_instance_when_keyed_on_the_instance_label(
    catalog: Catalog, sample: Sample
) -> None:
    assert gangs(catalog, sample("dynamo-v1alpha1")[0].data) == [
        ("service-Frontend", ("service/Frontend",), 1),
        ("service-VllmDecodeWorker", ("service/VllmDecodeWorker",), 2),
        ("service-VllmPrefillWorker", ("service/VllmPrefillWorker",), 2),
    ]


def test_kinds_without_gang_instructions(catalog: Catalog, sample: Sample) -> None:
    assert gangs(catalog, sample("deployment")[0].data) == []


def test_v2_pod_group() -> None:
    definition = definition_from_dict(
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
                            "specDefinition": {"podSpecPath": f".spec.{name}"},
                            "scaleDefinition": {
                                "replicasPath": f".spec.{name}Replicas",
                                "minReplicasPath": f".spec.{name}Min",
                            },
                        }
                        for name in ("a", "b")
                    ],
                },
                "optimizationInstructions": {
                    "gangScheduling": {
                        "podGroup": {"name": "pg", "subGroups": [{"componentName": "b"}]}
                    }
                },
            },
        }
    )
    obj = {
        "apiVersion": "example.com/v1",
        "kind": "T",
        "metadata": {"name": "t"},
        "spec": {"aReplicas": 2, "bReplicas": 5, "bMin": 3},
    }
    assert decompose(obj, definition).gangs == (Gang("pg", ("b",), 3),)
