"""Clients for the member clusters of a fleet configuration (no request is sent here)."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from placer.errors import PlacerError
from placer.fleet.config import FleetConfig
from placer.kube import ClientSettings, KubeClient, open_client

__all__ = ["MemberClients", "member_clients", "open_clients"]

log = logging.getLogger(__name__)


class MemberClients(dict[str, KubeClient]):
    """The clients by cluster name, and in :attr:`problems` why each member left out has none."""

    def __init__(self) -> None:
        super().__init__()
        #: why each member cluster left out has no client (its kubeconfig entry's problem).
        self.problems: dict[str, str] = {}


def open_clients(
    config: FleetConfig, names: Sequence[str] | None = None, *, pool_size: int | None = None
) -> MemberClients:
    """One client per member cluster of ``config`` (only ``names`` when given); ``pool_size``:
    connections kept per client (default :class:`~placer.kube.ClientSettings`'; a command
    holding many watches open at once needs one per watch).

    Clusters whose kubeconfig entry is unusable are left out, the reason in the result's
    ``problems`` (the caller reports them: gathering does, the CLI's ``warning:`` lines do).
    """
    clients = MemberClients()
    for source in config.clusters:
        if names is not None and source.name not in names:
            continue
        if source.problem or source.kubeconfig is None:
            clients.problems[source.name] = source.problem or "no kubeconfig"
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
            log.debug("cluster %s: no client: %s", source.name, err.message)
            clients.problems[source.name] = err.message
    return clients


@contextmanager
def member_clients(
    config: FleetConfig, names: Sequence[str] | None = None, *, pool_size: int | None = None
) -> Iterator[MemberClients]:
    """:func:`open_clients` for a ``with`` block: every client is closed at its end."""
    clients = open_clients(config, names, pool_size=pool_size)
    try:
        yield clients
    finally:
        for client in clients.values():
            client.close()
