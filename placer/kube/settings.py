"""Client settings: timeouts, retries, paging and watching, as documented dataclasses.

One :class:`ClientSettings` per cluster (so every member cluster can have its own timeout);
defaults are safe for a CLI talking to a handful of clusters. Nothing here is read from globals:
callers build the settings and pass them in.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["ClientSettings", "WatchSettings"]


@dataclass(frozen=True)
class WatchSettings:
    """How :class:`placer.kube.Watcher` watches."""

    #: ``timeoutSeconds`` asked of the server per watch request; the stream then ends cleanly
    #: and the watcher resumes from the last resourceVersion. Also bounds how long ``stop()``
    #: may wait when the server sends nothing.
    server_timeout: int = 60
    #: ask for BOOKMARK events (RV progress without object changes).
    allow_bookmarks: bool = True
    #: seconds to wait before reconnecting after a transport failure (doubles, capped at 30).
    reconnect_backoff: float = 1.0
    #: consecutive transport failures tolerated before the watcher gives up and raises.
    max_reconnects: int = 5


@dataclass(frozen=True)
class ClientSettings:
    """How one :class:`placer.kube.KubeClient` talks to its API server."""

    #: seconds allowed for one request (connect + answer); streaming reads of a watch use the
    #: watch's own ``server_timeout`` plus a margin instead.
    request_timeout: float = 30.0
    #: seconds allowed to establish the TCP + TLS connection.
    connect_timeout: float = 10.0
    #: connection attempts retried on connect failures (reads are never retried: a slow server
    #: would only get more load).
    connect_retries: int = 1
    #: objects per list page (``limit``); the ``continue`` token fetches the next page.
    page_size: int = 500
    #: connections kept per client; gathering uses one, a controller a few.
    pool_size: int = 4
    #: ``User-Agent`` sent with every request.
    user_agent: str = "placer"
    #: talk through placer's light transport when it understands the kubeconfig entry (see
    #: :mod:`placer.kube.transport`); ``False``: always through the official client.
    light_transport: bool = True
    watch: WatchSettings = field(default_factory=WatchSettings)
