"""Reading queues files: the issue's shape, PriorityClasses, and every invalid queue as a clear
error naming the file, queue and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from placer.errors import QueueError
from placer.quantity import CPU, GPU
from placer.queues import load_queues, queues_from_yaml
from tests.queues.conftest import queue_doc, queues

ROOT = Path(__file__).resolve().parents[2]

ISSUE_SHAPE = """
apiVersion: placer.dev/v1alpha1
kind: Queue
metadata: {name: research}
spec:
  resources:
    nvidia.com/gpu: {quota: 16}
    cpu: {quota: 512}
---
apiVersion: placer.dev/v1alpha1
kind: Queue
metadata: {name: team-a}
spec:
  parent: research                 # optional
  resources:
    nvidia.com/gpu: {quota: 16, limit: 32, overQuotaWeight: 2}
    cpu: {quota: 256}
"""


def test_the_issue_shape_reads_as_written() -> None:
    found = queues_from_yaml(ISSUE_SHAPE, source="q.yaml")
    team = found.queues["team-a"]
    assert team.parent == "research"
    assert team.resources[GPU].quota == 16
    assert team.resources[GPU].limit == 32
    assert team.resources[GPU].over_quota_weight == 2.0
    assert team.resources[CPU].quota == 256_000  # millicores
    assert team.resources[CPU].limit is None
    assert [q.name for q in found.chain("team-a")] == ["team-a", "research"]


def test_the_example_file_and_its_priority_classes() -> None:
    found = load_queues(ROOT / "deploy" / "examples" / "queues" / "queues.yaml")
    assert set(found.queues) == {"research", "team-a", "team-b"}
    assert found.queues["team-b"].resources[GPU].cluster_limits == {"east": 8}
    assert found.classes["urgent"].value == 1000
    assert found.default_class is not None and found.default_class.name == "batch"


def test_limit_minus_one_is_kai_no_limit() -> None:
    found = queues(queue_doc("q", nvidia_com__gpu={"quota": 4, "limit": -1}))
    assert found.queues["q"].resources[GPU].limit is None


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (
            queue_doc("a", parent="b") + "---\n" + queue_doc("b", parent="a"),
            ["queue 'a' is its own ancestor (a -> b -> a)", "spec.parent"],
        ),
        (queue_doc("a", parent="nope"), ["queue 'a' names parent 'nope'", "spec.parent"]),
        (
            queue_doc("top", nvidia_com__gpu={"quota": 8})
            + "---\n"
            + queue_doc("x", parent="top", nvidia_com__gpu={"quota": 6})
            + "---\n"
            + queue_doc("y", parent="top", nvidia_com__gpu={"quota": 6}),
            [
                "children of queue top add up to 12 nvidia.com/gpu",
                "more than its own quota (8)",
                "spec.resources.nvidia.com/gpu.quota",
            ],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": -2}),
            ["queue q: spec.resources.nvidia.com/gpu.quota", "greater than or equal to 0"],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": 4, "limit": -5}),
            ["queue q: spec.resources.nvidia.com/gpu.limit", "greater than or equal to 0"],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": 4, "overQuotaWeight": -1}),
            ["queue q: spec.resources.nvidia.com/gpu.overQuotaWeight", "must be a number >= 0"],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": 8, "limit": 4}),
            ["spec.resources.nvidia.com/gpu.limit", "limit 4 is below the quota 8"],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": "lots"}),
            ["queue q: spec.resources.nvidia.com/gpu.quota"],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": 1, "borrow": 3}),
            ["spec.resources.nvidia.com/gpu.borrow", "unknown field 'borrow'"],
        ),
        (
            queue_doc("q", nvidia_com__gpu={"quota": 1, "clusterLimits": {"east": -1}}),
            ["spec.resources.nvidia.com/gpu.clusterLimits.east"],
        ),
        (queue_doc("q") + "---\n" + queue_doc("q"), ["queue 'q' is defined twice"]),
        (
            "apiVersion: placer.dev/v1alpha1\nkind: Queue\nmetadata: {name: q}\n"
            "spec: {cohort: x}\n",
            ["queue q: spec.cohort: unknown field 'cohort'"],
        ),
        (
            "apiVersion: kueue.x-k8s.io/v1beta1\nkind: ClusterQueue\nmetadata: {name: q}\n",
            ["kind: kind is 'ClusterQueue', expected 'Queue'"],
        ),
        (
            queue_doc("q") + "---\napiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\n"
            "metadata: {name: hi}\nvalue: high\n",
            ["priority class hi: value: must be an integer"],
        ),
        ("# nothing\n", ["holds no Queue"]),
    ],
)
def test_invalid_queues_are_clear_errors(text: str, words: list[str]) -> None:
    with pytest.raises(QueueError) as caught:
        queues_from_yaml(text, source="bad.yaml")
    message = str(caught.value)
    assert message.startswith("bad.yaml")
    for word in words:
        assert word in message


def test_a_missing_file_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(QueueError, match="no such file"):
        load_queues(tmp_path / "absent.yaml")


def test_queue_rows_list_resources_in_name_order_whatever_the_file_order() -> None:
    from placer.queues import Usage
    from placer.queues.report import queue_rows

    found = queues_from_yaml(ISSUE_SHAPE, source="q.yaml")
    assert list(found.queues["team-a"].resources) == [GPU, CPU]  # as written
    rows = queue_rows(found, Usage(found))
    assert [list(row["resources"]) for row in rows] == [[CPU, GPU], [CPU, GPU]]
