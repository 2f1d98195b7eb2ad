"""Containers frameworks inject, counted from placer's ``injectedContainers`` definition
extension (issue 20, acceptance: a KServe InferenceService's injected containers are counted).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from placer.cli import main
from placer.definitions import Catalog, decompose, definition_from_dict
from placer.definitions.validate import validate_definition
from placer.errors import DefinitionInvalidError, InterpretationError
from placer.quantity import CPU, GPU, MEMORY

MI = 2**20
GI = 2**30

ISVC: dict[str, Any] = {
    "apiVersion": "serving.kserve.io/v1beta1",
    "kind": "InferenceService",
    "metadata": {"name": "sklearn", "namespace": "serving"},
    "spec": {
        "predictor": {
            "logger": {"mode": "all"},
            "model": {
                "modelFormat": {"name": "sklearn"},
                "storageUri": "gs://kfserving-examples/models/sklearn/1.0/model",
                "resources": {"requests": {"cpu": "1", "memory": "2Gi", "nvidia.com/gpu": 1}},
            },
        }
    },
}


def predictor(manifest: dict[str, Any]) -> Any:
    return decompose(manifest, Catalog.builtin()).component("predictor")


def test_kserve_injected_containers_are_counted_with_kserves_defaults() -> None:
    component = predictor(ISVC)
    # kserve-container 1 cpu / 2Gi + queue-proxy 25m + agent (logger) 100m / 100Mi running;
    # the storage-initializer (100m / 100Mi) runs before them and needs less
    assert component.pod.requests == {CPU: 1125, MEMORY: 2 * GI + 100 * MI, GPU: 1}
    injected = {s.name: s for s in component.sources if s.kind == "injected"}
    assert set(injected) == {"queue-proxy", "storage-initializer", "agent"}
    assert injected["storage-initializer"].requests == {CPU: 100, MEMORY: 100 * MI}
    assert "injected init container" in injected["storage-initializer"].text
    names = [c["name"] for c in component.template["spec"]["containers"]]
    assert names == ["kserve-container", "queue-proxy", "agent"]
    assert [c["name"] for c in component.template["spec"]["initContainers"]] == [
        "storage-initializer"
    ]


def test_what_kserve_injects_depends_on_the_service() -> None:
    raw = copy.deepcopy(ISVC)
    raw["metadata"]["annotations"] = {"serving.kserve.io/deploymentMode": "RawDeployment"}
    raw["spec"]["predictor"]["model"]["storageUri"] = "pvc://models/sklearn"  # mounted directly
    del raw["spec"]["predictor"]["logger"]
    component = predictor(raw)
    assert component.sources == ()
    assert component.pod.requests == {CPU: 1000, MEMORY: 2 * GI, GPU: 1}
    batcher = copy.deepcopy(ISVC)
    batcher["spec"]["predictor"]["batcher"] = {"maxBatchSize": 32}
    agents = [s for s in predictor(batcher).sources if s.name == "agent"]
    assert [a.requests for a in agents] == [{CPU: 1000, MEMORY: GI}]


def test_a_container_the_user_wrote_is_not_injected_twice() -> None:
    sized = copy.deepcopy(ISVC)
    sized["spec"]["predictor"]["containers"] = [
        {"name": "queue-proxy", "resources": {"requests": {"cpu": "200m"}}}
    ]
    component = predictor(sized)
    names = [c["name"] for c in component.template["spec"]["containers"]]
    assert names.count("queue-proxy") == 1
    assert component.pod.requests[CPU] == 1000 + 200 + 100


def test_knative_queue_proxy_is_counted() -> None:
    service = {
        "apiVersion": "serving.knative.dev/v1",
        "kind": "Service",
        "metadata": {"name": "hello"},
        "spec": {
            "template": {
                "spec": {"containers": [{"image": "x", "resources": {"requests": {"cpu": "1"}}}]}
            }
        },
    }
    revision = decompose(service, Catalog.builtin()).component("revision")
    assert revision.pod.requests[CPU] == 1025


def test_describe_shows_where_the_injected_demand_comes_from(
    tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "isvc.json"
    path.write_text(json.dumps(ISVC), encoding="utf-8")
    assert main(["describe", "-f", str(path)]) == 0
    out = capsys.readouterr().out
    table = out.split("Resources:\n")[1].splitlines()
    assert table[0].split()[-1] == "FROM"
    rows = {line.split()[1]: line for line in table if line.lstrip().startswith("+ ")}
    assert "injected init container" in rows["storage-initializer"]
    assert "100m" in rows["storage-initializer"] and "100Mi" in rows["storage-initializer"]
    assert "25m" in rows["queue-proxy"]
    assert main(["describe", "-f", str(path), "-o", "json"]) == 0
    (item,) = json.loads(capsys.readouterr().out)
    sources = item["components"][0]["sources"]
    assert {s["name"] for s in sources} == {"queue-proxy", "storage-initializer", "agent"}
    assert {"kind", "name", "from", "note", "requests"} == set(sources[0])


DEFINITION: dict[str, Any] = {
    "apiVersion": "run.ai/v1alpha1",
    "kind": "Karta",
    "metadata": {"name": "example-com-widget-v1"},
    "spec": {
        "structureDefinition": {
            "rootComponent": {
                "name": "widget",
                "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                "specDefinition": {
                    "podTemplateSpecPath": ".spec.template",
                    "injectedContainers": [
                        {
                            "name": "proxy",
                            "kind": "sidecar",
                            "whenPath": ".spec.proxy",
                            "resources": {"requests": {"cpu": "50m"}},
                        }
                    ],
                },
                "statusDefinition": {"statusMappings": {}},
            }
        }
    },
}


def widget(proxy: object) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {
            "proxy": proxy,
            "template": {
                "spec": {"containers": [{"name": "m", "resources": {"requests": {"cpu": "1"}}}]}
            },
        },
    }


def test_the_extension_in_a_users_definition() -> None:
    definition = definition_from_dict(DEFINITION)
    assert validate_definition(definition) == []
    with_proxy = decompose(widget(True), definition).components[0]
    assert with_proxy.pod.requests[CPU] == 1050  # a native sidecar runs beside the containers
    assert with_proxy.template["spec"]["initContainers"][0]["restartPolicy"] == "Always"
    assert decompose(widget(False), definition).components[0].pod.requests[CPU] == 1000
    with pytest.raises(InterpretationError, match=r"injectedContainers\[0\]\.whenPath"):
        decompose(widget("yes"), definition)


def test_a_bad_extension_is_an_invalid_definition_naming_the_field() -> None:
    bad = copy.deepcopy(DEFINITION)
    spec = bad["spec"]["structureDefinition"]["rootComponent"]["specDefinition"]
    spec["injectedContainers"][0]["kind"] = "daemon"
    spec["injectedContainers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    with pytest.raises(DefinitionInvalidError) as err:
        definition_from_dict(bad)
    text = str(err.value)
    assert "specDefinition.injectedContainers[0].kind" in text
    assert "injectedContainers[0].resources.requests.cpu" in text
    spec["injectedContainers"][0].update(kind="init", resources={}, whenPath="recurse(.)")
    problems = validate_definition(definition_from_dict(bad))
    assert any("injectedContainers[0].whenPath" in p for p in problems)
