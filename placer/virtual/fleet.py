"""The virtual fleet: a snapshot served by one loopback API server per cluster.

``placer fleet up``, ``make demo`` and integration tests need clusters to talk to without a
real Kubernetes. :class:`VirtualFleet` starts one :class:`placer.testing.ApiServer` (HTTPS,
throwaway CA, bearer token; in this process) per cluster of a snapshot, seeds it with the
objects of :mod:`placer.virtual.seeding` — so gathering from it reproduces the snapshot's
capacity — and writes a kubeconfig with one context per cluster, named after it (and, if asked,
a fleet file with the snapshot's cluster labels and taints, so that a snapshot taken through it
keeps them too).

A cluster the snapshot marks unreachable gets a server that is started and stopped again: its
context points at a closed port and gathering reports it unreachable, as in the snapshot.

With ``hub=NAME`` it also serves an empty hub cluster for the placement controller
(:mod:`placer.virtual.hub`) — alone when the snapshot has no clusters — whose context in the
kubeconfig is marked as a hub, so that commands reaching members leave it out, and is the
current context, so that kubectl talks to the hub.

Seam for "realism" (materialising pods of workloads applied to a virtual cluster): pass
``setup=callback``; it is called as ``callback(cluster, server)`` for every cluster after
seeding and before serving, and may register reactors or admission hooks on ``server.store``.
:meth:`VirtualFleet.server` gives access to a running cluster's server later.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import trustme
import yaml

from placer.fleet.config import FLEET_API_VERSION, FLEET_KIND
from placer.kube import ROLE_EXTENSION, ROLE_HUB
from placer.model import Cluster, Fleet
from placer.testing import ApiServer, write_kubeconfig
from placer.virtual.hub import serve_hub
from placer.virtual.seeding import cluster_objects

__all__ = ["Setup", "VirtualFleet"]

#: ``setup(cluster, server)``: called per cluster after seeding, before serving.
Setup = Callable[[Cluster, ApiServer], None]


class VirtualFleet:
    """One seeded loopback API server per cluster of ``fleet``.

    Use as a context manager, or :meth:`start` / :meth:`stop`.

    Args:
        fleet: the snapshot to serve.
        setup: per-cluster hook (see module docstring).
        bookmark_interval: seconds between watch BOOKMARKs on the servers: a minute, as from a
            real API server's watch cache (plus one 2 s before each watch's timeout).
        hub: also serve an empty hub cluster of this name (:mod:`placer.virtual.hub`).

    Raises:
        ValueError: ``hub`` is the name of a cluster of the snapshot.
    """

    def __init__(
        self,
        fleet: Fleet,
        *,
        setup: Setup | None = None,
        bookmark_interval: float = 60.0,
        hub: str | None = None,
    ) -> None:
        if hub is not None and hub in fleet.names:
            raise ValueError(f"the hub cannot be named {hub!r}: a member cluster is")
        self.fleet = fleet
        self.setup = setup
        self.bookmark_interval = bookmark_interval
        self.hub = hub
        self.servers: dict[str, ApiServer] = {}
        self._ca: trustme.CA | None = None

    def __enter__(self) -> VirtualFleet:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> VirtualFleet:
        """Seed and start every cluster's server (idempotent); returns ``self``."""
        if self.servers:
            return self
        self._ca = trustme.CA()
        try:
            for cluster in self.fleet.clusters:
                server = ApiServer(
                    name=cluster.name, ca=self._ca, bookmark_interval=self.bookmark_interval
                )
                self.servers[cluster.name] = server
                if cluster.reachable:
                    server.store.seed(cluster_objects(cluster))
                    if self.setup is not None:
                        self.setup(cluster, server)
                    server.start()
                else:
                    # reserve a port, then close it: the context points at a refusing port
                    server.start()
                    server.stop()
            if self.hub is not None:
                hub = ApiServer(
                    name=self.hub, ca=self._ca, bookmark_interval=self.bookmark_interval
                )
                self.servers[self.hub] = hub
                serve_hub(hub.store)
                hub.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop every server."""
        servers, self.servers = self.servers, {}
        for server in servers.values():
            server.stop()

    def server(self, name: str) -> ApiServer:
        """The server of cluster ``name`` (``KeyError`` when there is none)."""
        return self.servers[name]

    @property
    def urls(self) -> dict[str, str]:
        """Cluster name -> API server URL."""
        return {name: server.url for name, server in self.servers.items()}

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """Write a kubeconfig (mode 0600) with one context per cluster, named after it. The
        hub's context is marked as a hub and is the current context (kubectl talks to the hub,
        where users create workloads); without a hub the first cluster's is."""
        if not self.servers:
            raise RuntimeError("the virtual fleet is not started")
        if self.hub is None:
            return write_kubeconfig(path, self.servers)
        return write_kubeconfig(
            path,
            self.servers,
            current_context=self.hub,
            extensions={self.hub: {ROLE_EXTENSION: {"role": ROLE_HUB}}},
        )

    def write_fleet_file(
        self, path: str | os.PathLike[str], *, kubeconfig: str | os.PathLike[str]
    ) -> Path:
        """Write a fleet file naming ``kubeconfig`` with the snapshot's labels and taints (and its
        accelerator table, when it has one)."""
        target = Path(path)
        data: dict[str, Any] = {
            "apiVersion": FLEET_API_VERSION,
            "kind": FLEET_KIND,
            "clusters": [_fleet_entry(c, Path(kubeconfig).resolve()) for c in self.fleet.clusters],
        }
        if self.fleet.accelerators:
            data["accelerators"] = dict(self.fleet.accelerators)
        if self.fleet.topologies:
            data["topologies"] = [dict(t) for t in self.fleet.topologies]
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return target


def _fleet_entry(cluster: Cluster, kubeconfig: Path) -> dict[str, Any]:
    entry: dict[str, Any] = {"name": cluster.name, "kubeconfig": str(kubeconfig)}
    labels: Mapping[str, str] = cluster.labels
    if labels:
        entry["labels"] = dict(labels)
    if cluster.taints:
        entry["taints"] = [
            {"key": t.key, "value": t.value, "effect": t.effect} for t in cluster.taints
        ]
    return entry
