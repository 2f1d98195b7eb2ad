"""The hub cache and the hub writes, alone (placer.controller.hubcache and .hubwrites).

Objects are plain dicts for the cache's own rules; the informers and the writes talk to a
loopback API server over HTTPS through a real kubeconfig.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from placer.controller.hubcache import HubCache
from placer.controller.hubconfig import HubPolicies, definitions_from_hub
from placer.controller.hubwrites import HubWriter
from placer.controller.records import key_of
from placer.definitions import Catalog
from placer.kube import KubeClient, load_kubeconfigs, open_client
from placer.model import WorkloadRef
from placer.policy import policy_from_dict
from placer.testing import ApiServer
from tests.accelerators.conftest import claim_template
from tests.controller.conftest import NAMESPACE, job, wait_for


@pytest.fixture
def hub(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> Iterator[tuple[ApiServer, KubeClient]]:
    server = start_apiserver("hub")
    server.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}})
    client = open_client(load_kubeconfigs([kubeconfig_for(server)]), "hub", name="hub")
    yield server, client
    client.close()


def live(name: str, uid: str, rv: str = "1", **labels: str) -> dict[str, Any]:
    """A hub Job as an informer would hand it over."""
    obj = job(name)
    obj["metadata"].update(uid=uid, resourceVersion=rv, generation=1)
    obj["metadata"]["labels"].update(labels)
    return obj


def ref(name: str) -> WorkloadRef:
    return WorkloadRef("batch/v1", "Job", NAMESPACE, name)


def cache(client: KubeClient, **options: Any) -> HubCache:
    return HubCache(client, Catalog.builtin(), discovery_interval=0.5, **options)


def test_objects_by_name_and_uid(hub: tuple[ApiServer, KubeClient]) -> None:
    c = cache(hub[1], clock=lambda: 7.0)
    c.put(ref("a"), live("a", "u-a"))
    c.put(ref("b"), live("b", "u-b"))
    assert c.get(ref("a"))["metadata"]["uid"] == "u-a"  # type: ignore[index]
    assert c.ref_of("u-b") == ref("b")
    assert c.ref_of("nobody") is None
    assert sorted(r.name for r in c.refs("batch/v1", "Job")) == ["a", "b"]
    assert c.refs("jobset.x-k8s.io/v1alpha2", "JobSet") == []
    assert c.first_seen(ref("a")) == 7.0


def test_placed_objects_are_counted(hub: tuple[ApiServer, KubeClient]) -> None:
    c = cache(hub[1])
    placed = live("a", "u-a")
    placed["metadata"]["annotations"] = {"placer.dev/placed-cluster": "m1"}
    c.put(ref("a"), placed)
    c.put(ref("b"), live("b", "u-b"))
    assert c.placed_count() == 1
    c.refresh(ref("a"), live("a", "u-a", "2"))  # failed over: the record is gone
    assert c.placed_count() == 0
    c.put(ref("b"), {**placed, "metadata": {**placed["metadata"], "name": "b", "uid": "u-b"}})
    assert c.placed_count() == 1
    c.forget(ref("b"), "u-b")
    assert c.placed_count() == 0


def test_a_write_answer_refreshes_only_the_same_live_object_when_newer(
    hub: tuple[ApiServer, KubeClient],
) -> None:
    c = cache(hub[1])
    c.refresh(ref("a"), live("a", "u-a", "5"))
    assert c.get(ref("a")) is None  # never brought back (or in) by a write's answer
    c.put(ref("a"), live("a", "u-a", "5"))
    c.refresh(ref("a"), live("a", "u-other", "9"))
    c.refresh(ref("a"), live("a", "u-a", "4"))
    assert c.get(ref("a"))["metadata"]["resourceVersion"] == "5"  # type: ignore[index]
    c.refresh(ref("a"), live("a", "u-a", "6"))
    assert c.get(ref("a"))["metadata"]["resourceVersion"] == "6"  # type: ignore[index]


def test_forget_drops_the_object_unless_another_of_its_name_is_cached(
    hub: tuple[ApiServer, KubeClient],
) -> None:
    c = cache(hub[1])
    c.put(ref("a"), live("a", "u-new"))
    assert c.forget(ref("a"), "u-old") == (False, None)  # deleted and created again
    assert c.get(ref("a")) is not None
    obj = live("b", "u-b")
    c.put(ref("b"), obj)
    c.decompose(obj)
    assert c.forget(ref("b"), "u-b") == (True, obj)
    assert c.forget(ref("b"), "u-b") == (True, None)
    assert c.ref_of("u-b") is None and c.first_seen(ref("b")) is None
    assert c.sizes() == {
        "objects": 1,
        "placed": 0,
        "by_uid": 1,
        "first_seen": 1,
        "decomposed": 0,
    }


def test_decompositions_are_cached_per_version_of_live_objects(
    hub: tuple[ApiServer, KubeClient],
) -> None:
    c = cache(hub[1])
    obj = live("a", "u-a", "1")
    first = c.decompose(obj)
    assert c.decompose(obj) is not first  # not on the hub (gone meanwhile): not cached
    c.put(ref("a"), obj)
    first = c.decompose(obj)
    assert c.decompose(obj) is first
    changed = live("a", "u-a", "2")
    assert c.decompose(changed) is not first
    second = c.decompose(changed)
    assert c.decompose(changed) is second
    c.set_definitions(definitions_from_hub(c.base_catalog, []))
    assert c.decompose(changed) is not second
    assert c.sizes()["decomposed"] == 1


def test_opted_in_by_label_or_hub_policy_never_in_an_ignored_namespace(
    hub: tuple[ApiServer, KubeClient],
) -> None:
    c = cache(hub[1], ignored_namespaces=("placer-system",))
    labelled = live("a", "u-a")
    plain = live("b", "u-b")
    del plain["metadata"]["labels"]["placer.dev/queue"]
    plain["metadata"]["labels"]["team"] = "x"
    assert c.opted_in(labelled, ref("a"))
    assert not c.opted_in(plain, ref("b"))
    policy = policy_from_dict(
        {
            "apiVersion": "placer.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "team-x"},
            "spec": {"resourceSelectors": {"labelSelectors": [{"matchLabels": {"team": "x"}}]}},
        }
    )
    c.set_policies(HubPolicies((policy,)))
    assert c.policies == (policy,)
    assert c.opted_in(plain, ref("b"))
    system = WorkloadRef("batch/v1", "Job", "placer-system", "a")
    assert not c.opted_in(labelled, system)


def test_config_versions_and_reports_say_what_is_news(hub: tuple[ApiServer, KubeClient]) -> None:
    c = cache(hub[1])
    karta = {"kind": "Karta", "metadata": {"uid": "k", "resourceVersion": "1"}}
    assert c.config_changed("definitions", [karta])
    assert not c.config_changed("definitions", [karta])
    assert c.config_changed("policies", [karta])
    assert c.config_changed(
        "definitions", [{**karta, "metadata": {"uid": "k", "resourceVersion": "2"}}]
    )
    assert c.report_changed("Karta/x", "bad")
    assert not c.report_changed("Karta/x", "bad")
    assert c.report_changed("Karta/x", "")


def test_informers_list_and_watch_the_hub(hub: tuple[ApiServer, KubeClient]) -> None:
    server, client = hub
    server.store.create(job("before"))
    c = cache(client)
    assert c.unlisted() is None  # nothing watched yet
    seen: list[str] = []
    lock = threading.Lock()

    def on_change(_informer: Any, _old: Any, new: Any) -> None:
        if new is not None:
            with lock:
                seen.append(new["metadata"]["name"])
            c.put(key_of(new), new)

    changes: list[int] = []
    c.watch_config("placer.dev/v1alpha1", "PlacementPolicy", lambda: changes.append(1))
    assert c.watch("batch/v1", "Job", on_change)
    assert not c.watch("batch/v1", "Job", on_change)  # one informer per kind
    assert c.watching("batch/v1", "Job")
    wait_for(lambda: c.synced("batch/v1", "Job"), what="hub Jobs listed")
    c.wait_config(timeout=10)
    assert c.unlisted() == []
    assert changes  # a config kind the hub does not serve is listed (empty) all the same
    assert c.config_objects(("placer.dev/v1alpha1", "PlacementPolicy")) == []
    server.store.create(job("after"))
    wait_for(lambda: c.get(ref("after")) is not None, what="the new Job")
    assert seen[0] == "before"
    assert len(c.informers()) == 1 and len(c.all_informers()) == 2
    for informer in c.all_informers():
        informer.stop()
        informer.join(timeout=5)


def test_metadata_patches_retry_on_conflict_and_keep_the_cache_current(
    hub: tuple[ApiServer, KubeClient],
) -> None:
    server, client = hub
    created = server.store.create(job("a"))
    c = cache(client)
    c.put(ref("a"), created)
    writer = HubWriter(client, c, on_gone=lambda r, u: None)
    server.store.patch(
        "jobs", "a", {"metadata": {"labels": {"other": "write"}}}, namespace=NAMESPACE
    )
    built: list[str] = []

    def build(obj: dict[str, Any]) -> dict[str, Any]:
        built.append(obj["metadata"]["resourceVersion"])
        meta = obj["metadata"]
        return {"metadata": {"resourceVersion": meta["resourceVersion"], "labels": {"mine": "1"}}}

    result = writer.patch_meta(ref("a"), created, build)  # the first try is stale: 409
    assert len(built) == 2 and built[0] != built[1]
    assert result["metadata"]["labels"]["other"] == "write"
    assert c.get(ref("a"))["metadata"]["labels"]["mine"] == "1"  # type: ignore[index]
    status = writer.confirm(ref("a"), result, "m1", "Placed")
    conditions = status["status"]["conditions"]
    assert conditions[0]["reason"] == "Placed" and conditions[0]["message"].startswith("cluster m1")


def test_a_write_that_removes_the_object_for_good_forgets_it(
    hub: tuple[ApiServer, KubeClient],
) -> None:
    server, client = hub
    body = job("a")
    body["metadata"]["finalizers"] = ["placer.dev/placement"]
    created = server.store.create(body)
    c = cache(client)
    c.put(ref("a"), created)
    gone: list[tuple[WorkloadRef, str]] = []
    writer = HubWriter(client, c, on_gone=lambda r, u: gone.append((r, u)))
    server.store.delete("jobs", "a", NAMESPACE)  # held by the finalizer
    deleting = server.store.get("jobs", "a", NAMESPACE)
    writer.patch(ref("a"), {"metadata": {"finalizers": None}})
    assert gone == [(ref("a"), deleting["metadata"]["uid"])]


def test_decompositions_count_the_hub_claims_of_their_namespace(
    hub: tuple[ApiServer, KubeClient], caplog: pytest.LogCaptureFixture
) -> None:
    server, client = hub
    c = cache(client)
    c.watch_claims()
    c.wait_config(timeout=10)
    obj = live("a", "u-a")
    spec = obj["spec"]["template"]["spec"]
    del spec["containers"][0]["resources"]["limits"]
    spec["resourceClaims"] = [{"name": "gpus", "resourceClaimTemplateName": "four-gpus"}]
    c.put(ref("a"), obj)
    assert c.decompose(obj).workload.components[0].pod.gpus == 0  # no such template yet
    server.store.create(claim_template("four-gpus", count=4, namespace=NAMESPACE))
    server.store.create(claim_template("four-gpus", count=1, namespace="default"))
    wait_for(lambda: len(c.claims(NAMESPACE)[1]) == 1, what="the template listed")
    assert c.decompose(obj).workload.components[0].pod.gpus == 4
    broken = claim_template("broken", namespace=NAMESPACE)
    del broken["spec"]["spec"]
    server.store.create(broken)
    wait_for(lambda: c.claims(NAMESPACE)[0] >= 2, what="the broken template seen")
    assert len(c.claims(NAMESPACE)[1]) == 1  # left out, with a warning naming it
    assert "ResourceClaimTemplate/broken" in caplog.text
    assert c.decompose(obj).workload.components[0].pod.gpus == 4
    for informer in c.all_informers():
        informer.stop()
        informer.join(timeout=5)
