"""Clients for the member clusters of a fleet configuration (no request is sent here)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from placer.errors import PlacerError
from placer.fleet.config import FleetConfig
from placer.kube import ClientSettings, KubeClient, open_client

__all__ = ["member_clients", "open_clients"]

log = logging.getLogger(__name__)


def open_clients(
    config: FleetConfig, names: Sequence[str] | None = None, *, pool_size: int | None = None
) -> dict[str, KubeClient]:
    """One client per member cluster of ``config`` (only ``names`` when given); ``pool_size``:
    connections kept per client (default :class:`~placer.kube.ClientSettings`'; a command
    holding many watches open at once needs one per watch).

    Clusters whose kubeconfig entry is unusable are left out (gathering reports them).
    """
    clients: dict[str, KubeClient] = {}
    for source in config.clusters:
        if names is not None and source.name not in names:
            continue
        if source.problem or source.kubeconfig is None:
            continue
        settings = ClientSettings(
            request_timeout=source.timeout, connect_timeout=min(10.0, source.timeout)
        )
        if pool_size is not None:
            settings = replace(settings, pool_size=pool_size)
        try:
            clients[source.name] = open_client(
                source.kubeconfig, source.context, name=source.name, settings=settings
            )
        except PlacerError as err:
            log.warning("cluster %s: no client: %s", source.name, err.message)
    return clients


@contextmanager
def member_clients(
    config: FleetConfig, names: Sequence[str] | None = None, *, pool_size: int | None = None
) -> Iterator[dict[str, KubeClient]]:
    """:func:`open_clients` for a ``with`` block: every client is closed at its end."""
    clients = open_clients(config, names, pool_size=pool_size)
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()
