"""Upstream's recorded end-to-end flows, replayed through placer's definitions.

``tests/data/workload-map/recorded/`` holds 52 flows (225 status events) that NVIDIA Workload
Map's recorder captured on real clusters, every framework of the catalog; ``catalog/`` next to
it is upstream's own catalog (provenance, license and the version notes: the folder's README).

Upstream's contract (its replay test): for every status event, the definition reads the object
without error and its matched statuses contain the recorded ``state``; a recorded ``Undefined``
is met only by ``["Undefined"]`` (nothing matched).

* **placer's catalog**: every event agrees, or is listed in ``PLACER_DIFFERENCES`` with the
  statuses placer reads instead and the words of the catalog header that documents why. The
  test checks the words are in that header, so an entry cannot point at nothing, and fails on
  an entry that no longer differs.
* **upstream's catalog through placer's engine**: every event agrees except where upstream's
  own replay of these files would not pass either (``UPSTREAM_SKEW``: the catalog copies are not
  the recordings' commits, as the data README says). A regression of the interpreter shows here
  even when placer's own definitions move.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from placer.definitions import Catalog, decompose, phases_of

DATA = Path(__file__).resolve().parents[1] / "data" / "workload-map"
RECORDED = DATA / "recorded"


@dataclass(frozen=True)
class Event:
    """One recorded status event: the object as the cluster returned it and its state."""

    flow: str  # path under recorded/, e.g. "grove/v1.34.0/grove-io-podcliqueset-v1alpha1/running"
    index: int  # position in the flow's events (ACTION events count, as in the file)
    state: str
    definition: str  # upstream's kartaName
    obj: Mapping[str, Any]

    @property
    def key(self) -> str:
        return f"{self.flow}#{self.index}"


@cache
def recorded_events() -> tuple[Event, ...]:
    events = []
    for path in sorted(RECORDED.rglob("*.yaml")):
        flow = yaml.safe_load(path.read_text())
        name = path.relative_to(RECORDED).with_suffix("").as_posix()
        for index, event in enumerate(flow["events"]):
            if event["kind"] == "STATE":
                events.append(
                    Event(name, index, event["state"], flow["kartaName"], event["object"])
                )
    return tuple(events)


def agrees(state: str, phases: tuple[str, ...]) -> bool:
    """Upstream's replay rule: the matched statuses contain the recorded state."""
    if state == "Undefined":
        return phases == ("Undefined",)
    return state in phases


@dataclass(frozen=True)
class Known:
    """Recorded events read differently, on purpose or because of upstream's version skew."""

    phases: tuple[str, ...]  # what is read instead of the recorded state
    source: str  # the file (relative to the repository) whose text explains it
    says: str  # words of that file's explanation (whitespace and comment marks ignored)
    events: Mapping[str, tuple[int, ...]]  # flow -> event indexes

    def keys(self) -> list[str]:
        return [f"{flow}#{i}" for flow, indexes in self.events.items() for i in indexes]


_DYNAMO = "dynamo/v1.34.0/nvidia-com-dynamographdeployment-v1alpha1"
_ISVC_020 = "kserve/v0.20.0/serving-kserve-io-inferenceservice-v1beta1"
_ISVC_134 = "kserve/v1.34.0/serving-kserve-io-inferenceservice-v1beta1"
_LLMISVC_020 = "kserve/v0.20.0/serving-kserve-io-llminferenceservice-v1alpha2"
_RAYCLUSTER = "kuberay/v1.34.0/ray-io-raycluster-v1"
_RAYJOB = "kuberay/v1.34.0/ray-io-rayjob-v1"
_JOBSET = "jobset/v1.34.0/jobset-x-k8s-io-jobset-v1alpha2"
_JOB = "batch-job/v1.34.0/batch-job-v1"
_STS = "statefulset/v1.34.0/apps-statefulset-v1"
_MPIJOB = "kubeflow/v1.34.0/kubeflow-org-mpijob-v2beta1"
_PYTORCHJOB = "kubeflow/v1.34.0/kubeflow-org-pytorchjob-v1"


def _catalog_file(name: str) -> str:
    return f"catalog/{name}.yaml"


#: Where placer's catalog reads a recorded event differently. The first five are placer's
#: deliberate differences (upstream's recorder reports no status while the framework has not
#: said anything conclusive yet; placer says Initializing or Suspending, as its headers explain);
#: the last three are upstream's own version skew, which placer's headers also name.
PLACER_DIFFERENCES = (
    # Dynamo's operator writes `state: ""` before it knows anything
    Known(
        ("Initializing",),
        _catalog_file("nvidia-com-dynamographdeployment-v1alpha1"),
        "Initializing also while the operator has not set a state yet",
        {f"{_DYNAMO}/initializing": (0, 1), f"{_DYNAMO}/running": (0, 1)},
    ),
    # KServe's predictor revision exists, Ready is still Unknown
    Known(
        ("Initializing",),
        _catalog_file("serving-kserve-io-inferenceservice-v1beta1"),
        "Initializing = neither Ready=True nor Ready=False yet",
        {
            f"{_ISVC_020}/failed": (1,),
            f"{_ISVC_020}/running": (1, 2, 3, 4, 5),
            f"{_ISVC_134}/failed": (1,),
            f"{_ISVC_134}/running": (1, 2, 3, 4),
        },
    ),
    # the head pod is being created (and, after a resume, the cluster comes back)
    Known(
        ("Initializing",),
        _catalog_file("ray-io-raycluster-v1"),
        "Initializing = reported by KubeRay, not suspended, not ready and not failed",
        {f"{_RAYCLUSTER}/running": (0, 1, 2), f"{_RAYCLUSTER}/resumed": (3, 4, 5, 6, 7)},
    ),
    # jobDeploymentStatus Running, but the Ray job has no jobStatus yet
    Known(
        ("Initializing",),
        _catalog_file("ray-io-rayjob-v1"),
        "Initializing before a jobStatus exists",
        {f"{_RAYJOB}/running": (6,)},
    ),
    # jobDeploymentStatus Suspending
    Known(
        ("Suspending",),
        _catalog_file("ray-io-rayjob-v1"),
        "statuses also from jobDeploymentStatus: Initializing before a jobStatus exists "
        "(upstream's e2e notes), Suspending",
        {f"{_RAYJOB}/suspended": (2,)},
    ),
    # version skew: upstream's catalog says Initializing too, its recorder of that time did not
    Known(
        ("Initializing",),
        _catalog_file("jobset-x-k8s-io-jobset-v1alpha2"),
        "a JobSet just resumed, whose Jobs are listed with no pod active yet, is Initializing",
        {f"{_JOBSET}/resumed": (4, 5)},
    ),
    # version skew: recorded on the side branch that named Initializing "Progressing"
    Known(
        ("Initializing",),
        _catalog_file("batch-job-v1"),
        "a side branch called this state `Progressing`",
        {f"{_JOB}/failed": (0,)},
    ),
    # version skew: the recording predates upstream's scale-down matcher that placer follows
    Known(
        ("Initializing",),
        _catalog_file("apps-statefulset-v1"),
        "status.replicas > spec.replicas, is Initializing; upstream's older recordings call "
        "that Running",
        {f"{_STS}/scaled": (17,)},
    ),
)

_README = "tests/data/workload-map/README.md"

#: Where upstream's own catalog copies, read by placer's engine, do not give the recorded state:
#: exactly where upstream's replay of these two folders would fail too (version skew).
UPSTREAM_SKEW = (
    Known(
        ("Undefined",),
        _README,
        "the PyTorchJob and MPIJob copies (DK @9eca29c) have no `initializing` mapping",
        {
            f"{_MPIJOB}/completed": (0, 1),
            f"{_MPIJOB}/failed": (0, 1),
            f"{_MPIJOB}/running": (0, 1),
            f"{_PYTORCHJOB}/completed": (0,),
            f"{_PYTORCHJOB}/resumed": (3,),
            f"{_PYTORCHJOB}/running": (0,),
        },
    ),
    Known(
        ("Initializing",),
        _README,
        "the LLMInferenceService copies (@5fce966) predate the v0.20.0 `missing-preset`",
        {f"{_LLMISVC_020}/missing-preset": (1,)},
    ),
    Known(
        ("Failed",),
        _README,
        "predate the v0.20.0 `missing-preset` and `stopped` recordings",
        {f"{_LLMISVC_020}/stopped": (6,)},
    ),
    Known(
        ("Initializing",),
        _README,
        "the StatefulSet copy (@3314756) is newer than the `scaled` recording",
        {f"{_STS}/scaled": (17,)},
    ),
    Known(
        ("Initializing",),
        _README,
        "the JobSet copy (DK @3d47e01) maps a just-resumed JobSet",
        {f"{_JOBSET}/resumed": (4, 5)},
    ),
    Known(
        ("Initializing",),
        _README,
        "the Job `failed` recording comes from the side branch that called Initializing "
        "`Progressing`",
        {f"{_JOB}/failed": (0,)},
    ),
)


def _expected(known: tuple[Known, ...]) -> dict[str, Known]:
    out: dict[str, Known] = {}
    for entry in known:
        for key in entry.keys():
            assert key not in out, f"{key} is listed twice"
            out[key] = entry
    return out


def _prose(text: str) -> str:
    """Text with comment marks and line breaks folded, for quoting a header or README."""
    lines = [re.sub(r"^\s*#\s?", "", line) for line in text.splitlines()]
    return re.sub(r"\s+", " ", " ".join(lines))


def _header(path: Path) -> str:
    """The leading comment block of a catalog file."""
    lines = []
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        lines.append(line)
    return _prose("\n".join(lines))


def _explanation(repo: Path, source: str) -> str:
    path = repo / source
    return _header(path) if source.startswith("catalog/") else _prose(path.read_text())


def test_the_recordings_are_all_there() -> None:
    events = recorded_events()
    assert len({e.flow for e in events}) == 52
    assert len(events) == 225
    frameworks = {e.flow.split("/")[0] for e in events}
    assert len(frameworks) == 16, sorted(frameworks)


def test_every_recording_names_a_definition_of_both_catalogs(
    catalog: Catalog, upstream_catalog: Catalog
) -> None:
    for event in recorded_events():
        assert catalog.get(event.definition).name == event.definition
        assert upstream_catalog.get(event.definition).name == event.definition


def test_placer_reads_every_recorded_state_or_documents_why(catalog: Catalog) -> None:
    known = _expected(PLACER_DIFFERENCES)
    unexplained = []
    for event in recorded_events():
        phases = phases_of(event.obj, catalog, source=event.key)
        entry = known.pop(event.key, None)
        if entry is None:
            if not agrees(event.state, phases):
                unexplained.append(f"{event.key}: recorded {event.state}, placer reads {phases}")
            continue
        assert not agrees(event.state, phases), f"{event.key} agrees now: drop its entry"
        assert phases == entry.phases, f"{event.key}: placer reads {phases}, listed {entry}"
    assert unexplained == []
    assert known == {}, "listed events that are not in the recordings"


def test_placer_reads_the_recorded_state_of_the_fixed_flows(catalog: Catalog) -> None:
    """The four cases issue 20 found, each read as upstream's recorder saw it."""
    expected = {
        "grove/v1.34.0/grove-io-podcliqueset-v1alpha1/initializing#0": ("Initializing",),
        "grove/v1.34.0/grove-io-podcliqueset-v1alpha1/running#0": ("Initializing",),
        "grove/v1.34.0/grove-io-podcliqueset-v1alpha1/scaled#0": ("Initializing",),
        "deployment/v1.34.0/apps-deployment-v1/initializing#0": ("Initializing",),
        "deployment/v1.34.0/apps-deployment-v1/failed#0": ("Initializing",),
        f"{_LLMISVC_020}/missing-preset#1": ("Failed",),
        f"{_LLMISVC_020}/stopped#5": ("Suspending", "Running"),
        f"{_LLMISVC_020}/stopped#6": ("Suspended",),
    }
    seen = {e.key: phases_of(e.obj, catalog) for e in recorded_events() if e.key in expected}
    assert seen == expected


def test_every_difference_points_to_the_words_that_explain_it(repo: Path) -> None:
    for entry in (*PLACER_DIFFERENCES, *UPSTREAM_SKEW):
        assert entry.says in _explanation(repo, entry.source), (
            f"{entry.source} does not say {entry.says!r}"
        )


def test_upstream_catalog_through_placers_engine_agrees_where_upstream_would(
    upstream_catalog: Catalog,
) -> None:
    known = _expected(UPSTREAM_SKEW)
    unexplained = []
    for event in recorded_events():
        phases = phases_of(event.obj, upstream_catalog, source=event.key)
        entry = known.pop(event.key, None)
        if entry is None:
            if not agrees(event.state, phases):
                unexplained.append(f"{event.key}: recorded {event.state}, read {phases}")
            continue
        assert not agrees(event.state, phases), f"{event.key} agrees now: drop its entry"
        assert phases == entry.phases, f"{event.key}: read {phases}, listed {entry}"
    assert unexplained == []
    assert known == {}


def test_every_recorded_object_decomposes_with_placers_catalog(catalog: Catalog) -> None:
    """Upstream's replay also requires every recorded object to be read without error."""
    for event in recorded_events():
        tree = decompose(event.obj, catalog, source=event.key)
        assert tree.definition.name == event.definition
