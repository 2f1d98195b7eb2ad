"""Owner chains (placer.kube.owners) over real HTTPS: owned_by, owner_uids, and owners looked
up in a cache before they are fetched."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from placer.kube import KubeClient, OwnerWalker, load_kubeconfigs, open_client
from placer.testing import ApiServer


def owned(kind: str, name: str, owner: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    api_version = {"Pod": "v1", "Job": "batch/v1", "ReplicaSet": "apps/v1"}[kind]
    metadata: dict[str, Any] = {"name": name, "namespace": "team"}
    if owner is not None:
        metadata["ownerReferences"] = [
            {
                "apiVersion": owner["apiVersion"],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, **extra}


@pytest.fixture
def chain(start_apiserver: Callable[..., ApiServer]) -> dict[str, Any]:
    """team/top (Job) -> team/middle (Job) -> team/pod (Pod), and an orphan pod."""
    server = start_apiserver("owners")
    store = server.store
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    template = {
        "spec": {
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "x"}]}
            }
        }
    }
    top = store.create(owned("Job", "top", None, **template))
    middle = store.create(owned("Job", "middle", top, **template))
    pod = store.create(
        owned("Pod", "pod", middle, spec={"containers": [{"name": "c", "image": "x"}]})
    )
    orphan = store.create(
        owned("Pod", "orphan", None, spec={"containers": [{"name": "c", "image": "x"}]})
    )
    return {"server": server, "top": top, "middle": middle, "pod": pod, "orphan": orphan}


@pytest.fixture
def client(chain: dict[str, Any], kubeconfig_for: Callable[..., Path]) -> Iterator[KubeClient]:
    path = kubeconfig_for(chain["server"])
    made = open_client(load_kubeconfigs([path]), "owners", name="owners")
    yield made
    made.close()


def uid(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["uid"])


def test_owner_uids_are_what_owned_by_finds(chain: dict[str, Any], client: KubeClient) -> None:
    walker = OwnerWalker(client)
    pod, orphan = chain["pod"], chain["orphan"]
    assert walker.owner_uids(pod) == {uid(chain["middle"]), uid(chain["top"])}
    for root in ("top", "middle", "orphan"):
        assert walker.owned_by(pod, uid(chain[root])) == (
            uid(chain[root]) in walker.owner_uids(pod)
        )
    assert walker.owner_uids(orphan) == set()
    # a root looked for stops the walk: nothing above it is fetched
    server = chain["server"]
    server.clear_requests()
    assert OwnerWalker(client).owner_uids(pod, {uid(chain["middle"])}) == {uid(chain["middle"])}
    assert [r for r in server.requests if r.verb == "get" and r.resource == "jobs"] == []


def test_owners_found_in_a_cache_are_not_fetched(chain: dict[str, Any], client: KubeClient) -> None:
    server = chain["server"]
    cached = {"middle": chain["middle"]}
    asked: list[tuple[str, str, str, str]] = []

    def lookup(api_version: str, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        asked.append((api_version, kind, namespace, name))
        return cached.get(name)

    server.clear_requests()
    walker = OwnerWalker(client, lookup=lookup)
    assert walker.owned_by(chain["pod"], uid(chain["top"]))
    assert ("batch/v1", "Job", "team", "middle") in asked
    gets = [r.name for r in server.requests if r.verb == "get" and r.resource == "jobs"]
    assert gets == []  # middle came from the cache; top's uid is on middle's reference
    # a cached object of that name but another uid (deleted and made again) is fetched
    cached["middle"] = {
        **chain["middle"],
        "metadata": {**chain["middle"]["metadata"], "uid": "other"},
    }
    server.clear_requests()
    assert OwnerWalker(client, lookup=lookup).owned_by(chain["pod"], uid(chain["top"]))
    assert [r.name for r in server.requests if r.verb == "get" and r.resource == "jobs"] == [
        "middle"
    ]
