"""The controller's HTTP endpoints: probes, metrics and a read-only API.

==================  ===========================================================================
``/healthz``        200 while the controller's threads run (liveness)
``/readyz``         200 once a leader's hub caches are listed, or while a replica stands by;
                    503 with the reason otherwise (readiness)
``/metrics``        Prometheus text format (:mod:`placer.controller.metrics`)
``/v1/fleet``       the fleet as the controller decides on it — last gathered capacity with
                    in-flight placements charged — as a FleetSnapshot document (the format of
                    ``placer snapshot``), so ``placer fleet show --server URL`` and ``placer
                    plan --snapshot`` read it like a file
``/v1/placements``  every hub object the controller manages, with its record and condition
==================  ===========================================================================

A standby replica answers ``/v1/*`` with 503 and the leader's identity. The server is the
standard library's threading HTTP server: a handful of GETs per minute needs nothing more, and
nothing in it can change the controller's state.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from placer.controller.metrics import CONTENT_TYPE_LATEST

__all__ = ["Endpoints", "HttpServer"]

log = logging.getLogger(__name__)


class UnavailableError(Exception):
    """Raised by an endpoint callback to answer 503 with this message."""


@dataclass(frozen=True)
class Endpoints:
    """What the server asks the controller (each called per request, from the server thread)."""

    healthy: Callable[[], tuple[bool, str]]
    ready: Callable[[], tuple[bool, str]]
    metrics: Callable[[], bytes]
    #: raises :class:`UnavailableError` when there is nothing to show (standby, no gather yet).
    fleet: Callable[[], dict[str, Any]]
    placements: Callable[[], dict[str, Any]]


class HttpServer:
    """Serves :class:`Endpoints` on ``host:port`` in a background thread (port 0 picks one)."""

    def __init__(self, endpoints: Endpoints, *, host: str = "0.0.0.0", port: int = 8080) -> None:
        self.endpoints = endpoints
        handler = _handler(endpoints)
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        host = str(self._server.server_address[0])
        host = "127.0.0.1" if host == "0.0.0.0" else host
        return f"http://{host}:{self.port}"

    def start(self) -> HttpServer:
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.2}, name="http"
        )
        self._thread.daemon = True
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _handler(endpoints: Endpoints) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "placer-controller"

        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0].rstrip("/") or "/"
            try:
                if path == "/healthz":
                    self._probe(*endpoints.healthy())
                elif path == "/readyz":
                    self._probe(*endpoints.ready())
                elif path == "/metrics":
                    self._send(200, endpoints.metrics(), CONTENT_TYPE_LATEST)
                elif path == "/v1/fleet":
                    self._json(200, endpoints.fleet())
                elif path == "/v1/placements":
                    self._json(200, endpoints.placements())
                else:
                    self._json(404, {"error": f"no such endpoint: {path}"})
            except UnavailableError as exc:
                self._json(503, {"error": str(exc)})
            except Exception:  # an endpoint bug must not kill the server thread
                log.exception("HTTP %s failed", path, extra={"event": "http-error"})
                self._json(500, {"error": "internal error; see the controller's log"})

        def _probe(self, ok: bool, text: str) -> None:
            self._send(200 if ok else 503, (text + "\n").encode(), "text/plain; charset=utf-8")

        def _json(self, code: int, body: dict[str, Any]) -> None:
            data = json.dumps(body, indent=1, sort_keys=False).encode()
            self._send(code, data, "application/json")

        def _send(self, code: int, data: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            log.debug("http: " + format, *args)

    return Handler
