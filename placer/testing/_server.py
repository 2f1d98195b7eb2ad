"""``ApiServer``: one loopback Kubernetes API server (HTTPS, bearer token) on 127.0.0.1.

The server owns a :class:`~placer.testing.Store` (objects and rules), :class:`Faults` (injected
trouble) and a request log, and serves them over HTTPS with a certificate issued by a throwaway
CA (``trustme``). State lives in the store, not in the listening socket, so a server can be
stopped (an unreachable cluster: connections are cut, new ones refused) and started again on
the same port with its objects intact, which is what failover tests need.
"""

from __future__ import annotations

import secrets
import ssl
import threading
from types import TracebackType

import trustme

from placer.testing._faults import Faults, RequestLog, RequestRecord
from placer.testing._http import HttpFront, ServerContext
from placer.testing._store import Store

__all__ = ["ApiServer"]

#: What ``/version`` answers by default (a 1.31 server: kubectl's dispatcher picks v1.31).
DEFAULT_VERSION: dict[str, str] = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0-placer-loopback",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}


class ApiServer:
    """A loopback Kubernetes API server.

    Use as a context manager (``with ApiServer() as server: ...``) or call :meth:`start` and
    :meth:`stop`. Point clients at it with :func:`~placer.testing.write_kubeconfig`.

    Args:
        name: a label for logs and thread names (the kubeconfig context name is chosen when
            writing the kubeconfig).
        token: the bearer token clients must send (default: a random one).
        ca: the certificate authority to issue the server certificate from; share one across
            servers (e.g. a session fixture) to save ~10 ms per server.
        host: address to bind (loopback by default).
        port: port to bind; 0 picks a free one (kept across :meth:`stop`/:meth:`start`).
        store: the store to serve (default: a new one, with ``history_size`` and
            ``bookmark_interval``).
        history_size: events kept per resource for watches and continue tokens.
        bookmark_interval: seconds between BOOKMARK events on watches that allow them.
        version: fields overriding the ``/version`` answer (e.g. ``{"minor": "30"}``).
        client_certificates: also authenticate clients by a TLS client certificate issued by
            ``ca`` (:meth:`issue_client_certificate`), as kube-apiserver's x509 authenticator
            does; a client presenting one needs no token.
    """

    def __init__(
        self,
        *,
        name: str = "loopback",
        token: str | None = None,
        ca: trustme.CA | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        store: Store | None = None,
        history_size: int = 10_000,
        bookmark_interval: float = 1.0,
        version: dict[str, str] | None = None,
        client_certificates: bool = False,
    ) -> None:
        self.name = name
        self.token = token or secrets.token_urlsafe(24)
        self.ca = ca or trustme.CA()
        self.host = host
        self.port = port
        self.store = store or Store(history_size=history_size, bookmark_interval=bookmark_interval)
        self.faults = Faults()
        self._requests = RequestLog()
        self._version = {**DEFAULT_VERSION, **(version or {})}
        cert = self.ca.issue_cert(host, "localhost")
        self._ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        cert.configure_cert(self._ssl)
        self.client_certificates = client_certificates
        if client_certificates:
            self._ssl.verify_mode = ssl.CERT_OPTIONAL
            self._ssl.load_verify_locations(cadata=self.ca.cert_pem.bytes().decode())
        self._front: HttpFront | None = None
        self._lock = threading.Lock()

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ApiServer:
        """Start serving (on the same port as before after a :meth:`stop`); returns ``self``."""
        with self._lock:
            if self._front is not None:
                return self
            ctx = ServerContext(
                store=self.store,
                token=self.token,
                faults=self.faults,
                requests=self._requests,
                version=self._version,
                stopping=threading.Event(),
                address=f"{self.host}:{self.port}",
                client_certificates=self.client_certificates,
            )
            front = HttpFront(ctx, self._ssl, self.host, self.port)
            self.port = front.port
            ctx.address = f"{self.host}:{self.port}"
            front.start()
            self._front = front
        return self

    def stop(self) -> None:
        """Stop serving: refuse new connections, cut open ones (watches end), join threads.

        The store keeps its objects; :meth:`start` serves them again on the same port.
        """
        with self._lock:
            front, self._front = self._front, None
        if front is not None:
            front.stop()

    def restart(self) -> None:
        """:meth:`stop` then :meth:`start` (same port, same objects)."""
        self.stop()
        self.start()

    @property
    def running(self) -> bool:
        """Whether the server is accepting connections."""
        return self._front is not None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- what clients need -------------------------------------------------------------------

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT`` (valid once started)."""
        return f"https://{self.host}:{self.port}"

    def issue_client_certificate(self, user: str) -> tuple[bytes, bytes]:
        """A client certificate for ``user`` (its common name) from this server's CA, and its
        private key, both PEM; accepted when the server has ``client_certificates``."""
        leaf = self.ca.issue_cert(f"{user}.clients.placer.test", common_name=user)
        return leaf.cert_chain_pems[0].bytes(), leaf.private_key_pem.bytes()

    @property
    def ca_pem(self) -> bytes:
        """PEM of the CA that signed the server certificate."""
        return bytes(self.ca.cert_pem.bytes())

    # -- inspection --------------------------------------------------------------------------

    @property
    def requests(self) -> list[RequestRecord]:
        """The most recent requests (up to 10,000), oldest first."""
        return self._requests.snapshot()

    def request_counts(self) -> dict[tuple[str, str], int]:
        """``(verb, resource)`` -> requests since the server was made (not cleared by
        :meth:`clear_requests`; ``""`` for discovery and other non-resource paths)."""
        return self._requests.counts()

    def clear_requests(self) -> None:
        """Forget the recorded requests."""
        self._requests.clear()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<ApiServer {self.name} {self.url} {state}>"
