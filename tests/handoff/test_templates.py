"""Pod-template edits through the definitions' jq paths (placer.definitions.templates), and the
scheduler settings of fleet files and policies (placer.schedulers)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.definitions import Catalog
from placer.definitions.templates import TemplateEdit, edit_templates, template_sites
from placer.errors import FleetConfigError, PolicyError
from placer.fleet.config import fleet_from_data
from placer.policy import policy_from_dict
from placer.schedulers import SchedulerSpec, resolve_scheduler

ROOT = Path(__file__).resolve().parents[2]
CATALOG = Catalog.builtin()
EDIT = TemplateEdit(labels={"l": "v"}, annotations={"a": "w"}, scheduler_name="volcano")


def edited(obj: dict[str, Any], edit: TemplateEdit = EDIT) -> Any:
    definition = CATALOG.find(obj["apiVersion"], obj["kind"])
    return edit_templates(obj, definition, lambda site: edit)


def test_jobset_every_replicated_job_template_is_edited_and_the_input_kept() -> None:
    obj = yaml.safe_load((ROOT / "examples" / "jobset-demo.yaml").read_text())
    before = copy.deepcopy(obj)
    result = edited(obj)
    assert obj == before
    assert result.edited == ("replicatedjob/leader", "replicatedjob/worker")
    assert result.problems == ()
    for job in result.body["spec"]["replicatedJobs"]:
        template = job["template"]["spec"]["template"]
        assert template["metadata"] == {"labels": {"l": "v"}, "annotations": {"a": "w"}}
        assert template["spec"]["schedulerName"] == "volcano"


def test_a_pod_is_its_own_template() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "labels": {"app": "x"}},
        "spec": {"containers": [{"name": "c", "image": "i"}]},
    }
    result = edited(pod)
    assert result.body["metadata"]["labels"] == {"app": "x", "l": "v"}
    assert result.body["spec"]["schedulerName"] == "volcano"


def test_metadata_path_that_picks_labels_and_annotations_is_followed() -> None:
    isvc = {
        "apiVersion": "serving.kserve.io/v1beta1",
        "kind": "InferenceService",
        "metadata": {"name": "m", "namespace": "default"},
        "spec": {
            "predictor": {
                "labels": {"team": "a"},
                "model": {
                    "modelFormat": {"name": "pytorch"},
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                },
            }
        },
    }
    sites = template_sites(isvc, CATALOG.find("serving.kserve.io/v1beta1", "InferenceService"))
    predictor = next(s for s in sites if s.component == "predictor")
    assert predictor.metadata == ("spec", "predictor")
    result = edited(isvc)
    assert result.body["spec"]["predictor"]["labels"] == {"team": "a", "l": "v"}
    assert result.body["spec"]["predictor"]["annotations"] == {"a": "w"}


def test_a_built_metadata_value_cannot_be_written_and_says_where() -> None:
    data = yaml.safe_load(
        (
            ROOT
            / "tests/data/workload-map/recorded/milvus/v1.34.0/milvus-io-milvus-v1beta1"
            / "initializing.yaml"
        ).read_text()
    )
    obj = data["events"][0]["object"]
    assert obj["kind"] == "Milvus"
    result = edited(obj, TemplateEdit(labels={"l": "v"}))
    assert result.problems
    assert "metadataPath" in result.problems[0] and "cannot be written" in result.problems[0]


def test_pinning_adds_the_nodes_to_each_required_term() -> None:
    obj = yaml.safe_load((ROOT / "examples" / "jobset-demo.yaml").read_text())
    spec = obj["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    spec["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                ]
            }
        }
    }
    result = edited(obj, TemplateEdit(nodes=("n2", "n1", "n2")))
    terms = result.body["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "affinity"
    ]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    pin = {"key": "metadata.name", "operator": "In", "values": ["n1", "n2"]}
    assert [t["matchFields"] for t in terms] == [[pin], [pin]]
    assert [t["matchExpressions"][0]["values"] for t in terms] == [["a"], ["b"]]


# -- scheduler settings ----------------------------------------------------------------------


def fleet(scheduler: Any) -> Any:
    return fleet_from_data(
        {"clusters": [{"name": "a", "scheduler": scheduler}]}, source="fleet.yaml"
    )


def test_fleet_file_scheduler_forms() -> None:
    assert fleet("kai").schedulers["a"].name == "kai"
    spec = fleet({"name": "kueue", "queues": {"t": "lq"}, "defaultQueue": "d"}).schedulers["a"]
    assert (spec.queue_for("t"), spec.queue_for("other"), spec.queue_for("")) == ("lq", "d", "d")
    assert fleet({"name": "volcano"}).schedulers["a"].pod_scheduler_name == "volcano"
    assert SchedulerSpec("kai").queue_for("") == "default-queue"


@pytest.mark.parametrize(
    ("value", "field", "words"),
    [
        ("slurm", "clusters[0].scheduler", "not a scheduler placer knows"),
        ({"name": "kai", "queue": "x"}, "clusters[0].scheduler", "unknown setting(s) queue"),
        ({"name": "kueue", "queues": ["a"]}, "clusters[0].scheduler.queues", "must map"),
        (
            {"name": "coscheduling", "scheduleTimeoutSeconds": -1},
            "clusters[0].scheduler.scheduleTimeoutSeconds",
            "whole number",
        ),
        (3, "clusters[0].scheduler", "must be a scheduler name"),
    ],
)
def test_bad_fleet_file_scheduler_names_the_field(value: Any, field: str, words: str) -> None:
    with pytest.raises(FleetConfigError) as caught:
        fleet(value)
    text = str(caught.value)
    assert "fleet.yaml" in text and field in text and words in text


def test_policy_scheduler_overrides_and_is_checked() -> None:
    base = {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": "p"},
    }
    policy = policy_from_dict({**base, "spec": {"scheduler": "volcano"}}, source="p.yaml")
    assert policy.scheduler is not None and policy.scheduler.name == "volcano"
    chosen = resolve_scheduler(
        SchedulerSpec("kai"), {"placer.dev/scheduler": "kueue"}, policy.scheduler
    )
    assert chosen.name == "volcano"
    assert resolve_scheduler(SchedulerSpec("kai"), {"placer.dev/scheduler": "kueue"}).name == "kai"
    assert resolve_scheduler(None, {"placer.dev/scheduler": "kueue"}).name == "kueue"
    assert resolve_scheduler(None, {"placer.dev/scheduler": "nope"}).name == "default"
    with pytest.raises(PolicyError) as caught:
        policy_from_dict({**base, "spec": {"scheduler": {"name": "yunikorn"}}}, source="p.yaml")
    assert "spec.scheduler.name" in str(caught.value)


# -- the member identity's rights ------------------------------------------------------------


def test_member_role_may_write_what_goes_with_a_workload() -> None:
    (role,) = [
        d
        for d in yaml.safe_load_all((ROOT / "deploy/member/rbac.yaml").read_text())
        if d and d["kind"] == "ClusterRole"
    ]

    def allowed(group: str, resource: str) -> set[str]:
        return {
            verb
            for rule in role["rules"]
            if group in rule["apiGroups"] and resource in rule["resources"]
            for verb in rule["verbs"]
        }

    for resource in (
        "configmaps",
        "secrets",
        "serviceaccounts",
        "services",
        "persistentvolumeclaims",
    ):
        assert {"get", "create", "patch", "delete"} <= allowed("", resource), resource
    for group in ("scheduling.volcano.sh", "scheduling.x-k8s.io"):
        assert {"get", "create", "patch", "delete"} <= allowed(group, "podgroups"), group
    assert {"list", "create", "patch"} <= allowed("run.ai", "kartas")
