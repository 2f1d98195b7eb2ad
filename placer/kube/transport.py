"""How a :class:`~placer.kube.KubeClient`'s requests reach its API server.

Two transports, one interface (:class:`Transport`: send one request, get urllib3's response):

* :class:`LightTransport` — urllib3 alone, configured from the kubeconfig entry by
  :func:`light_connection` here. It understands what most kubeconfigs use: the server URL, the
  CA (``certificate-authority-data`` or ``certificate-authority``), ``insecure-skip-tls-verify``,
  ``tls-server-name``, an ``http(s)`` ``proxy-url``, client certificates (``-data`` or file),
  a bearer ``token`` or ``tokenFile`` (re-read every minute, as client-go does) and basic auth.
  It exists for start-up time: importing the official client (and the pydantic, requests and
  oauthlib it drags in) costs a ``placer get`` more than the rest of the command.
* :class:`OfficialTransport` — the official ``kubernetes`` client's ``ApiClient`` and its REST
  layer, for everything else: exec credential plugins, auth-provider (OIDC, GCP), proxies taken
  from the environment, SOCKS proxies and any field this module does not know.
  :func:`light_connection` says why it declined (``LightConnection.declined``), so the choice is
  explicit, never a silent half-configuration.

Both send the same bytes (JSON bodies, the same headers) through the same urllib3 retry policy,
so errors reach :mod:`placer.kube.translate` in the same shapes. Credentials stay in the
transport objects: they are never part of a message, and their ``repr`` omits them.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import urllib3

from placer.errors import FleetConfigError

__all__ = [
    "LightConnection",
    "LightTransport",
    "OfficialTransport",
    "Transport",
    "light_connection",
]

#: kubeconfig ``cluster`` keys the light transport understands.
_CLUSTER_KEYS = frozenset(
    {
        "server",
        "certificate-authority",
        "certificate-authority-data",
        "insecure-skip-tls-verify",
        "tls-server-name",
        "proxy-url",
        "disable-compression",
        "extensions",
    }
)
#: kubeconfig ``user`` keys the light transport understands.
_USER_KEYS = frozenset(
    {
        "token",
        "tokenFile",
        "client-certificate",
        "client-certificate-data",
        "client-key",
        "client-key-data",
        "username",
        "password",
        "extensions",
    }
)
#: environment variables that give a proxy (the official client honours them, with NO_PROXY).
_PROXY_ENV = ("https_proxy", "HTTPS_PROXY", "http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY")
#: seconds a ``tokenFile``'s content is reused before it is read again (client-go: 1 minute).
TOKEN_FILE_TTL = 60.0


class Transport(Protocol):
    """Sends one request to one API server."""

    #: the API server URL (no trailing slash).
    server: str

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        body: Any,
        timeout: tuple[float, float],
    ) -> Any:
        """Send ``body`` (JSON-encoded unless ``None``) to ``url``; the urllib3 response, its
        content not read yet. Transport failures raise urllib3's (or the official client's)
        exceptions, which :func:`placer.kube.translate.error_from_exception` understands."""
        ...

    def close(self) -> None:
        """Release the connections."""
        ...


# --------------------------------------------------------------------------------------------
# the light transport


@dataclass(frozen=True)
class LightConnection:
    """What the light transport needs of one kubeconfig context, or why it declined."""

    server: str = ""
    #: PEM text of the CA bundle (from ``certificate-authority-data``), or a file path.
    ca_data: str | None = None
    ca_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy_url: str | None = None
    #: client certificate and key: PEM text or file paths.
    cert_data: bytes | None = field(default=None, repr=False)
    cert_file: str | None = None
    key_data: bytes | None = field(default=None, repr=False)
    key_file: str | None = None
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    basic_auth: str | None = field(default=None, repr=False)
    #: why the light transport cannot serve this context ("" when it can).
    declined: str = ""


def light_connection(
    config: Mapping[str, Any],
    *,
    source: str = "",
    environ: Mapping[str, str] | None = None,
) -> LightConnection:
    """The light transport's settings for the single-context kubeconfig dict ``config`` (as
    :meth:`placer.kube.KubeconfigSet.client_config` builds it: file paths already absolute),
    or a :class:`LightConnection` whose ``declined`` says why the official client is needed.

    Raises:
        FleetConfigError: a ``-data`` field is not base64 (naming the file and field).
    """
    env = os.environ if environ is None else environ
    cluster_entry = (config.get("clusters") or [{}])[0]
    cluster: Mapping[str, Any] = cluster_entry.get("cluster") or {}
    users = config.get("users") or []
    user_entry: Mapping[str, Any] = users[0] if users else {}
    user: Mapping[str, Any] = user_entry.get("user") or {}
    unknown = sorted(set(user) - _USER_KEYS)
    if unknown:
        return LightConnection(declined=f"user fields {', '.join(unknown)}")
    unknown = sorted(set(cluster) - _CLUSTER_KEYS)
    if unknown:
        return LightConnection(declined=f"cluster fields {', '.join(unknown)}")
    server = str(cluster.get("server") or "").rstrip("/")
    proxy = cluster.get("proxy-url")
    if proxy is not None and not (
        isinstance(proxy, str) and proxy.startswith(("http://", "https://"))
    ):
        return LightConnection(declined="a proxy-url that is not http(s)")
    if proxy is None and any(env.get(name) for name in _PROXY_ENV):
        return LightConnection(declined="a proxy from the environment")
    cluster_field = f"clusters[name={cluster_entry.get('name')}].cluster"
    user_field = f"users[name={user_entry.get('name')}].user"
    token = user.get("token")
    username, password = user.get("username"), user.get("password")
    basic = None
    if not token and isinstance(username, str) and isinstance(password, str):
        basic = base64.b64encode(f"{username}:{password}".encode()).decode()
    ca_data = _decoded(cluster, "certificate-authority-data", source, cluster_field)
    return LightConnection(
        server=server,
        ca_data=ca_data.decode() if ca_data is not None else None,
        ca_file=_text(cluster.get("certificate-authority")),
        insecure=cluster.get("insecure-skip-tls-verify") is True,
        tls_server_name=_text(cluster.get("tls-server-name")),
        proxy_url=proxy,
        cert_data=_decoded(user, "client-certificate-data", source, user_field),
        cert_file=_text(user.get("client-certificate")),
        key_data=_decoded(user, "client-key-data", source, user_field),
        key_file=_text(user.get("client-key")),
        token=str(token) if token else None,
        token_file=None if token else _text(user.get("tokenFile")),
        basic_auth=basic,
    )


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _decoded(entry: Mapping[str, Any], key: str, source: str, where: str) -> bytes | None:
    value = entry.get(key)
    if value is None or value == "":
        return None
    try:
        return base64.b64decode(str(value), validate=False)
    except (binascii.Error, ValueError):
        raise FleetConfigError(
            "is not base64 (a -data field holds the base64 of the PEM file)",
            source=source,
            field=f"{where}.{key}",
        ) from None


class LightTransport:
    """Requests through one urllib3 pool, configured by a :class:`LightConnection`.

    Args:
        connection: what :func:`light_connection` read (not declined).
        retries: urllib3's retry policy (the same one the official client gets).
        pool_size: connections kept.
        user_agent: ``User-Agent`` header.
        source: the kubeconfig file, for errors.
        context: the context's name, for errors.
    """

    def __init__(
        self,
        connection: LightConnection,
        *,
        retries: urllib3.Retry,
        pool_size: int,
        user_agent: str,
        source: str = "",
        context: str = "",
    ) -> None:
        self.server = connection.server
        self._connection = connection
        self._source, self._context = source, context
        self._user_agent = user_agent
        self._token_lock = threading.Lock()
        self._token_read: tuple[float, str] | None = None
        pool_args: dict[str, Any] = {"retries": retries, "maxsize": pool_size}
        if self.server.startswith("https"):
            pool_args["ssl_context"] = _ssl_context(connection, source, context)
            if connection.insecure:
                pool_args["cert_reqs"] = ssl.CERT_NONE
                pool_args["assert_hostname"] = False
            if connection.tls_server_name:
                pool_args["server_hostname"] = connection.tls_server_name
        if connection.token_file:
            self._file_token(connection.token_file)  # an unreadable file: refused here, at once
        self._pool: urllib3.PoolManager = (
            urllib3.ProxyManager(connection.proxy_url, **pool_args)
            if connection.proxy_url
            else urllib3.PoolManager(**pool_args)
        )

    def __repr__(self) -> str:
        return f"LightTransport({self.server!r})"

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        body: Any,
        timeout: tuple[float, float],
    ) -> Any:
        headers = {"User-Agent": self._user_agent, **headers}
        authorization = self._authorization()
        if authorization:
            headers["Authorization"] = authorization
        return self._pool.request(
            method,
            url,
            body=None if body is None else json.dumps(body),
            headers=headers,
            timeout=urllib3.Timeout(connect=timeout[0], read=timeout[1]),
            preload_content=False,
        )

    def close(self) -> None:
        self._pool.clear()

    def _authorization(self) -> str | None:
        connection = self._connection
        if connection.token:
            return f"Bearer {connection.token}"
        if connection.token_file:
            return f"Bearer {self._file_token(connection.token_file)}"
        if connection.basic_auth:
            return f"Basic {connection.basic_auth}"
        return None

    def _file_token(self, path: str) -> str:
        now = time.monotonic()
        with self._token_lock:
            if self._token_read is not None and now - self._token_read[0] < TOKEN_FILE_TTL:
                return self._token_read[1]
            try:
                token = Path(path).read_text(encoding="utf-8").strip()
            except OSError as exc:
                if self._token_read is not None:  # mid-rotation: the last token, until it works
                    return self._token_read[1]
                raise FleetConfigError(
                    f"context {self._context!r}: the tokenFile {path} cannot be read: "
                    f"{exc.strerror or exc}",
                    source=self._source,
                    field=f"contexts[name={self._context}]",
                    hint="check the user's tokenFile in the kubeconfig",
                ) from None
            self._token_read = (now, token)
            return token


def _ssl_context(connection: LightConnection, source: str, context_name: str) -> ssl.SSLContext:
    """The TLS context: the kubeconfig's CA only (or the system's when it names none), and the
    client certificate. Unreadable files and bad PEM raise :class:`FleetConfigError` naming the
    kubeconfig, the context, the field and the file."""
    from urllib3.util.ssl_ import create_urllib3_context

    context = create_urllib3_context(
        cert_reqs=ssl.CERT_NONE if connection.insecure else ssl.CERT_REQUIRED
    )
    if connection.insecure:
        context.check_hostname = False
    what, named = "certificate-authority", connection.ca_file
    try:
        if connection.ca_data is not None:
            what, named = "certificate-authority-data", None
            context.load_verify_locations(cadata=connection.ca_data)
        elif connection.ca_file is not None:
            context.load_verify_locations(cafile=connection.ca_file)
        elif not connection.insecure:
            context.load_default_certs()
        what = "client-certificate(-data) and client-key(-data)"
        named = " and ".join(f for f in (connection.cert_file, connection.key_file) if f) or None
        _load_client_certificate(context, connection)
    except (OSError, ssl.SSLError, ValueError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or "unusable"
        where = f" ({named})" if named else ""
        raise FleetConfigError(
            f"context {context_name!r}: the {what}{where} cannot be used: {reason}",
            source=source,
            field=f"contexts[name={context_name}]",
            hint="check that the file exists and holds PEM data (a -data field: base64 of PEM)",
        ) from None
    return context


def _load_client_certificate(context: ssl.SSLContext, connection: LightConnection) -> None:
    """Load the client certificate and key; ``-data`` values pass through a private temporary
    directory (``ssl`` loads them from files only), removed at once."""
    cert, key = connection.cert_file, connection.key_file
    if connection.cert_data is None and connection.key_data is None:
        if cert:
            context.load_cert_chain(cert, key)
        return
    with tempfile.TemporaryDirectory(prefix="placer-tls-") as folder:
        if connection.cert_data is not None:
            cert = _private_file(Path(folder) / "client.crt", connection.cert_data)
        if connection.key_data is not None:
            key = _private_file(Path(folder) / "client.key", connection.key_data)
        if cert:
            context.load_cert_chain(cert, key)


def _private_file(path: Path, data: bytes) -> str:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    return str(path)


# --------------------------------------------------------------------------------------------
# the official client


class OfficialTransport:
    """Requests through the official client's ``ApiClient`` (its auth hooks, TLS and proxy)."""

    def __init__(self, api_client: Any) -> None:
        self.api_client = api_client
        self.server = str(api_client.configuration.host).rstrip("/")

    def __repr__(self) -> str:
        return f"OfficialTransport({self.server!r})"

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str],
        body: Any,
        timeout: tuple[float, float],
    ) -> Any:
        api = self.api_client
        headers = {**api.default_headers, **headers}
        path = url[len(self.server) :].split("?", 1)[0]
        api.update_params_for_auth(headers, [], ["BearerToken"], path, method, body)
        rest = api.rest_client.request(
            method, url, headers=headers, body=body, _request_timeout=timeout
        )
        return rest.response

    def close(self) -> None:
        self.api_client.close()
