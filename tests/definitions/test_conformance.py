"""Conformance with upstream (NVIDIA Workload Map) on its own files.

* Every upstream catalog definition and every old ResourceInterface example loads and
  validates, except two files that are not valid definitions at all: the ResourceInterface CRD
  (not a definition) and ``mpijob.yaml``, whose YAML is broken upstream (two keys on one line).
* For every sample manifest, upstream's definition and placer's yield the same components,
  instances and replicas, except for the deliberate differences listed in ``DIFFERENCES``
  (each is explained in the header comment of placer's definition). Any other difference fails.

Upstream's catalog is carried in ``tests/data/workload-map/catalog``; the tests that read the
other reference files skip when ``../shared/reference`` (or ``$PLACER_SHARED``) is absent.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from placer.definitions import (
    Catalog,
    Document,
    decompose,
    load_definitions,
    read_documents,
    validate_definition,
)
from placer.definitions.documents import MalformedYamlError
from placer.errors import DefinitionError, JqError, NoDefinitionError

Sample = Callable[[str], list[Document]]
SAMPLE_FILES = sorted(
    p.stem for p in (Path(__file__).parent / "samples").glob("*.yaml") if p.stem != "status"
)

# (sample, document) -> {component label: (placer's replicas, upstream's replicas or None when
# upstream has no such component)}, or the text of the error upstream raises.
DIFFERENCES: dict[tuple[str, int], dict[str, tuple[int, int | None]] | str] = {
    # Job pods at once = min(parallelism, completions)
    ("job", 1): {"job": (1, 4)},
    # upstream multiplies by an unset parallelism
    ("jobset", 1): "cannot be multiplied",
    # initial-scale 3 > min-scale 2
    ("knative", 0): {"revision": (3, 2)},
    # placer models the explainer; absent optional components have 0 replicas
    ("inferenceservice", 0): {"explainer": (0, None)},
    ("llminferenceservice", 0): {"worker": (0, 2)},
    ("llminferenceservice", 1): {"prefill": (0, 1), "worker": (0, 1), "router-scheduler": (0, 1)},
    # only the components the Milvus mode runs; MinIO distributed = 4 pods
    ("milvus", 0): {
        **{c: (0, 1) for c in ("standalone", "streamingnode", "cdc")},
        **{c: (0, 1) for c in ("rootcoord", "datacoord", "querycoord", "indexcoord")},
        "minio": (4, 1),
    },
    ("milvus", 1): {
        c: (0, 1)
        for c in (
            "proxy mixcoord datanode querynode streamingnode indexnode rootcoord datacoord "
            "querycoord indexcoord cdc pulsar-zookeeper pulsar-bookkeeper pulsar-broker "
            "pulsar-proxy"
        ).split()
    },
    # scaling-group replicas multiply the cliques in the group
    ("podcliqueset", 0): {"clique/prefill-leader": (2, 1), "clique/prefill-worker": (6, 3)},
    # upstream iterates the absent scaling-group list
    ("podcliqueset", 1): "Cannot iterate over null",
    # no Master replica spec, no master pod
    ("pytorchjob", 1): {"master": (0, 1)},
    # numOfHosts pods per replica
    ("raycluster", 0): {"worker/tpu-slice": (4, 1)},
    # the submitter pod
    ("rayjob", 0): {"submitter": (1, None)},
    ("rayjob", 1): {"submitter": (0, None)},
}


@pytest.fixture(scope="module")
def upstream(upstream_catalog: Catalog) -> Catalog:
    return upstream_catalog


def test_every_upstream_catalog_file_loads_and_validates(upstream_catalog_dir: Path) -> None:
    files = sorted(upstream_catalog_dir.glob("*.yaml"))
    assert len(files) == 23
    for file in files:
        (definition,) = load_definitions(file)
        assert definition.name == file.stem
        assert validate_definition(definition) == [], file.name


def test_every_resource_interface_example_loads_and_validates(reference: Path) -> None:
    examples = sorted((reference / "resourceinterface-examples").glob("*.yaml"))
    checked = 0
    for file in examples:
        if file.name.endswith(".crd.yaml"):
            with pytest.raises(DefinitionError, match="not a Workload Map definition"):
                load_definitions(file)
            continue
        if file.name == "mpijob.yaml":
            # upstream's file puts `running:` on the line of a quoted value
            with pytest.raises(MalformedYamlError, match="line 25"):
                load_definitions(file)
            continue
        for definition in load_definitions(file):
            assert validate_definition(definition) == [], file.name
            checked += 1
    assert checked == 10


def test_unnamed_resource_interfaces_get_the_catalog_slug(reference: Path) -> None:
    (jobset,) = load_definitions(reference / "resourceinterface-examples" / "jobset.yaml")
    assert jobset.name == "jobset-x-k8s-io-jobset-v1alpha2"
    assert jobset.api_version == "optimization.nvidia.com/v1alpha1"


def test_docs_sample_definitions_load_and_validate(reference: Path) -> None:
    for file in sorted((reference / "karta-samples" / "docs-samples").glob("*.yaml")):
        for definition in load_definitions(file):
            assert validate_definition(definition) == [], file.name


@pytest.mark.parametrize("name", SAMPLE_FILES)
def test_samples_match_upstream_except_documented_differences(
    upstream: Catalog, catalog: Catalog, sample: Sample, name: str
) -> None:
    for index, document in enumerate(sample(name)):
        ours = {c.label: c.replicas for c in decompose(document.data, catalog).components}
        expected = DIFFERENCES.get((name, index), {})
        if isinstance(expected, str):
            with pytest.raises(JqError, match=expected):
                decompose(document.data, upstream)
            continue
        theirs = {c.label: c.replicas for c in decompose(document.data, upstream).components}
        found: dict[str, tuple[int, int | None]] = {}
        for label in set(ours) | set(theirs):
            mine, other = ours.get(label), theirs.get(label)
            if mine != other:
                assert mine is not None, f"{name}#{index}: upstream has {label}, placer not"
                found[label] = (mine, other)
        assert found == expected, f"{name}#{index}"


def test_upstream_e2e_manifests_decompose_with_both_catalogs(
    reference: Path, upstream: Catalog, catalog: Catalog
) -> None:
    folder = reference / "karta-samples"
    seen = 0
    for file in sorted([*folder.glob("e2e-flows/*.yaml"), *folder.glob("e2e-smoke/*.yaml")]):
        for document in read_documents(file):
            if document.data.get("kind") == "PersistentVolumeClaim":
                with pytest.raises(NoDefinitionError):
                    decompose(document.data, catalog)
                continue
            ours = decompose(document.data, catalog, source=document.source)
            theirs = decompose(document.data, upstream, source=document.source)
            assert ours.workload.pod_count >= 1
            pods = {c.label: c.replicas for c in ours.components if c.replicas}
            upstream_pods = {c.label: c.replicas for c in theirs.components if c.replicas}
            if document.data["kind"] in ("Milvus", "LLMInferenceService"):
                # upstream counts phantom pods: every cluster-mode Milvus component in standalone
                # mode, LLMInferenceService prefill/worker/scheduler that were not declared
                assert set(pods) < set(upstream_pods)
                assert all(upstream_pods[label] == count for label, count in pods.items())
            else:
                assert pods == upstream_pods, document.source
            seen += 1
    assert seen == 6
