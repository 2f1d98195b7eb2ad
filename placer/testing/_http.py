"""HTTPS front of the loopback API server: connections, routing, the REST protocol.

Built on the standard library (``http.server`` request parsing, ``ssl``, ``socket``) rather than a
web framework because the protocol details that matter are exactly the ones frameworks hide:

* ``HTTP/1.1`` keep-alive with ``TCP_NODELAY`` on every accepted socket (without it Nagle's
  algorithm and delayed ACKs cost ~45 ms per request; with it a request takes ~1 ms);
* every request body is read completely, including DELETE bodies (kubectl sends DeleteOptions),
  chunked or not, before anything is answered, so keep-alive connections never desynchronise;
* POST and PUT bodies without ``Content-Type`` are JSON (the official client sends none);
* watch responses are chunked, one JSON event per chunk, ended by a zero-length chunk;
* one thread per connection, all tracked: stopping the server shuts every socket down, wakes
  every watch and joins every thread, so nothing leaks into the next test.

Discovery (``/version``, ``/api``, ``/apis``, ``/apis/<g>``, ``/apis/<g>/<v>``) is JSON, and
``/api`` and ``/apis`` answer aggregated discovery (``apidiscovery.k8s.io/v2`` or ``v2beta1``,
:mod:`placer.testing._discovery`) to a client whose ``Accept`` header asks for it, as kubectl's
does: its whole discovery is then two requests. Requests for protobuf objects get plain JSON,
which every client accepts as fallback. What kubectl needs beyond that is served:

* ``/openapi/v2`` (JSON, or gnostic protobuf when the ``Accept`` header asks for it, as
  kubectl does) and ``/openapi/v3`` with one document per group/version
  (:mod:`placer.testing._openapi`), so ``kubectl apply`` validates without
  ``--validate=false`` and ``kubectl explain`` works; ``fieldValidation`` (``Ignore``,
  ``Warn``, ``Strict``) is honoured for ``metadata``, the part of every object whose schema
  the server knows;
* ``Table`` responses to gets, lists and watches that ask for them (``Accept:
  application/json;as=Table;v=v1;g=meta.k8s.io``): the real server's columns for built-in
  kinds, a CRD's ``additionalPrinterColumns`` for custom resources
  (:mod:`placer.testing._tables`).

Not Kubernetes: ``GET /placer-testing/requests`` (authenticated) answers how many requests of
each verb and resource the server has had since it started, for benchmarks that count what a
client asks of servers running in other processes (:meth:`ApiServerProcess.request_counts`).
"""

from __future__ import annotations

import hmac
import json
import logging
import selectors
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import yaml

from placer.testing._crds import CRD_GROUP
from placer.testing._discovery import aggregated_discovery, aggregated_media, etag_of
from placer.testing._faults import Faults, RequestLog, RequestRecord, Target
from placer.testing._gnostic import PROTOBUF_MEDIA_TYPES, encode_document
from placer.testing._logs import pod_log
from placer.testing._openapi import (
    OBJECT_META_FIELDS,
    openapi_v2,
    openapi_v3_document,
    openapi_v3_root,
)
from placer.testing._resources import ResourceType
from placer.testing._status import StatusError
from placer.testing._store import PATCH_CONTENT_TYPES, ListQuery, PatchType, Store
from placer.testing._tables import TABLE_MEDIA, table, wants_table

__all__ = ["HttpFront", "ServerContext"]

log = logging.getLogger(__name__)

_DEFAULT_WATCH_TIMEOUT = 1800.0
_MAX_BODY = 64 * 1024 * 1024
_NOT_FOUND = "the server could not find the requested resource"


@dataclass
class ServerContext:
    """What request handlers need from the server that owns them."""

    store: Store
    token: str
    faults: Faults
    requests: RequestLog
    version: dict[str, str]
    stopping: threading.Event
    address: str
    #: a verified TLS client certificate authenticates as well as the token.
    client_certificates: bool = False


@dataclass
class _Route:
    verb: str
    rt: ResourceType | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    document: Callable[[], Any] | None = None
    #: the document's media type when it is not JSON (its body is then ``bytes``).
    media: str = "application/json"
    #: the document's HTTP code.
    code: int = 200
    #: headers to answer with the document.
    headers: dict[str, str] = field(default_factory=dict)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server_version = "placer-loopback-apiserver"
    sys_version = ""
    ctx: ServerContext

    def __init__(self, sock: socket.socket, address: Any, ctx: ServerContext) -> None:
        self.ctx = ctx
        super().__init__(sock, address, None)  # type: ignore[arg-type]

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def do_PUT(self) -> None:
        self._serve()

    def do_PATCH(self) -> None:
        self._serve()

    def do_DELETE(self) -> None:
        self._serve()

    def do_HEAD(self) -> None:
        self._serve()

    def do_OPTIONS(self) -> None:
        self._serve()

    # -- request plumbing --------------------------------------------------------------------

    def _read_body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts: list[bytes] = []
            while True:
                size_line = self.rfile.readline(1024)
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)
        length = int(self.headers.get("Content-Length") or 0)
        if length > _MAX_BODY:
            self.close_connection = True
            raise StatusError(413, "Request entity too large: limit is 67108864")
        return self.rfile.read(length) if length else b""

    def _serve(self) -> None:
        ctx = self.ctx
        split = urlsplit(self.path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query, keep_blank_values=True).items()}
        content_type = self.headers.get("Content-Type", "")
        route = _Route("get")
        headers: dict[str, str] = {}
        self._warnings: list[str] = []
        self._table_sent = False
        try:
            body = self._body = self._read_body()
            if ctx.faults.latency > 0 and ctx.stopping.wait(ctx.faults.latency):
                self.close_connection = True
                self._record(route, path, query, 0, content_type)
                return
            self._authenticate()
            route = self._route(path, query)
            rt = route.rt
            delay, rule = ctx.faults.take(
                Target(
                    route.verb,
                    rt.plural if rt else None,
                    rt.group if rt else "",
                    route.subresource,
                    route.namespace,
                    route.name,
                )
            )
            if delay > 0 and ctx.stopping.wait(delay):
                self.close_connection = True
                self._record(route, path, query, 0, content_type)
                return
            if rule is not None and rule.action == "drop":
                self.close_connection = True
                self._record(route, path, query, 0, content_type)
                return
            if rule is not None:
                raise StatusError(
                    rule.code,
                    rule.message or f"injected fault: {rule.code} for {route.verb} {path}",
                    reason=rule.reason,
                    retry_after=rule.retry_after,
                )
            if route.document is not None:
                code, payload = route.code, route.document()
                if route.media != "application/json":
                    self._record(route, path, query, code, content_type)
                    self._send(code, payload, route.media, route.headers)
                    return
            elif route.verb == "watch":
                self._stream_watch(route, query)
                return
            elif route.subresource == "log" and route.rt is not None:
                pod = ctx.store.do_get(route.rt, route.namespace, route.name or "")
                text = pod_log(pod, query)
                self._record(route, path, query, 200, content_type)
                self._send(200, text, "text/plain")
                return
            else:
                code, payload = self._resource_call(route, query, body, content_type)
        except StatusError as err:
            code, payload = err.code, err.status
            if err.retry_after is not None:
                headers["Retry-After"] = str(err.retry_after)
        except (OSError, ssl.SSLError):
            self.close_connection = True
            raise
        except Exception as exc:  # a bug or a failing reactor: answer 500, keep serving
            log.exception("loopback API server: %s %s failed", self.command, path)
            internal = StatusError(500, f"Internal error occurred: {type(exc).__name__}: {exc}")
            code, payload = 500, internal.status
        self._record(route, path, query, code, content_type)
        if self._warnings:  # RFC 7234 warn-text: a quoted string, quotes escaped
            quoted = (w.replace("\\", "\\\\").replace('"', '\\"') for w in self._warnings)
            headers["Warning"] = ", ".join(f'299 - "{text}"' for text in quoted)
        media = TABLE_MEDIA if code < 300 and self._table_sent else "application/json"
        self._send_json(code, payload, headers, media)

    def _access_review(self, review: Any) -> dict[str, Any]:
        """A SelfSubjectAccessReview answered: allowed, unless a standing 403 fault rule
        (:meth:`Faults.forbidding`) would refuse the request the review describes — the
        server's token has every right otherwise."""
        spec = review.get("spec") if isinstance(review, dict) else None
        attributes = spec.get("resourceAttributes") if isinstance(spec, dict) else None
        if not isinstance(attributes, dict):
            raise StatusError(
                422,
                'SelfSubjectAccessReview.authorization.k8s.io "" is invalid: '
                "spec.resourceAttributes: Invalid value: null: exactly one of "
                "nonResourceAttributes or resourceAttributes must be specified",
            )
        target = Target(
            str(attributes.get("verb") or ""),
            str(attributes.get("resource") or "") or None,
            str(attributes.get("group") or ""),
            str(attributes.get("subresource") or "") or None,
            str(attributes.get("namespace") or "") or None,
            str(attributes.get("name") or "") or None,
        )
        rule = self.ctx.faults.forbidding(target)
        status: dict[str, Any] = {"allowed": rule is None}
        if rule is not None and rule.message:  # RBAC says nothing more than no
            status["reason"] = rule.message
        return {
            "kind": "SelfSubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }

    def _request_counts(self) -> dict[str, Any]:
        """The server's request counts (``GET /placer-testing/requests``: not Kubernetes; for
        benchmarks whose servers run in other processes)."""
        counts = self.ctx.requests.counts()
        return {
            "counts": [
                {"verb": verb, "resource": resource, "count": count}
                for (verb, resource), count in sorted(counts.items())
            ]
        }

    def _record(
        self, route: _Route, path: str, query: dict[str, str], code: int, content_type: str
    ) -> None:
        self.ctx.requests.add(
            RequestRecord(
                method=self.command,
                path=path,
                query=query,
                verb=route.verb,
                resource=route.rt.plural if route.rt else None,
                subresource=route.subresource,
                namespace=route.namespace,
                name=route.name,
                code=code,
                user_agent=self.headers.get("User-Agent", ""),
                content_type=content_type,
            )
        )

    def _authenticate(self) -> None:
        if self.ctx.client_certificates:
            peer = getattr(self.connection, "getpeercert", None)
            if peer is not None and peer():  # verified against the CA by the handshake
                return
        header = self.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            token.strip().encode(), self.ctx.token.encode()
        ):
            raise StatusError(401, "Unauthorized")

    def _send_json(
        self,
        code: int,
        payload: Any,
        headers: dict[str, str] | None = None,
        media: str = "application/json",
    ) -> None:
        """Answer ``payload`` as JSON (``bytes`` are sent as already-encoded JSON)."""
        data = (
            payload
            if isinstance(payload, bytes)
            else json.dumps(payload, separators=(",", ":")).encode()
        )
        self._send(code, data, media, headers)

    def _send(
        self, code: int, data: bytes, media: str, headers: dict[str, str] | None = None
    ) -> None:
        """Answer ``data`` as it is, with its media type."""
        self.send_response(code)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    # -- routing -------------------------------------------------------------------------

    def _route(self, path: str, query: dict[str, str]) -> _Route:
        store = self.ctx.store
        parts = [unquote(p) for p in path.strip("/").split("/") if p]
        method = self.command
        if method not in {"GET", "HEAD"} and (not parts or parts[0] not in {"api", "apis"}):
            raise StatusError(
                405, "the server does not allow this method on the requested resource"
            )
        if parts in (["version"], ["version", ""]):
            return _Route("get", document=lambda: dict(self.ctx.version))
        if parts and parts[0] in {"healthz", "livez", "readyz"}:
            return _Route("get", document=lambda: "ok")
        if parts == ["placer-testing", "requests"]:
            return _Route("get", document=self._request_counts)
        if parts[:1] == ["openapi"]:
            return self._openapi_route(parts[1:])
        if parts == ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"]:
            if method != "POST":
                raise StatusError(
                    405, "the server does not allow this method on the requested resource"
                )
            review = self._decode(self._body, self.headers.get("Content-Type", ""))
            return _Route("create", document=lambda: self._access_review(review), code=201)
        if parts in (["api"], ["apis"]):
            aggregated = self._aggregated_route(parts == ["api"])
            if aggregated is not None:
                return aggregated
        if parts == ["api"]:
            return _Route(
                "get",
                document=lambda: {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": self.ctx.address}
                    ],
                },
            )
        if parts == ["apis"]:
            with store.lock:
                doc = store.registry.api_group_list()
            return _Route("get", document=lambda: doc)
        if parts[:1] == ["api"] and len(parts) >= 2:
            group, version, rest = "", parts[1], parts[2:]
        elif parts[:1] == ["apis"] and len(parts) >= 2:
            group, rest = parts[1], parts[3:]
            if len(parts) == 2:
                with store.lock:
                    group_doc = store.registry.api_group(group)
                if group_doc is None or method not in {"GET", "HEAD"}:
                    raise StatusError(404, _NOT_FOUND)
                return _Route("get", document=lambda: group_doc)
            version = parts[2]
        else:
            raise StatusError(404, _NOT_FOUND)
        if not rest:
            with store.lock:
                listing = store.registry.api_resource_list(group, version)
            if listing is None or method not in {"GET", "HEAD"}:
                raise StatusError(404, _NOT_FOUND)
            return _Route("get", document=lambda: listing)
        return self._resource_route(group, version, rest, query)

    def _aggregated_route(self, core: bool) -> _Route | None:
        """``/api`` or ``/apis`` as aggregated discovery when the ``Accept`` header asks for
        it first (:mod:`placer.testing._discovery`); ``None`` for the legacy document."""
        if self.command not in {"GET", "HEAD"}:
            return None
        asked = aggregated_media(self.headers.get("Accept", ""))
        if asked is None:
            return None
        version, media = asked
        with self.ctx.store.lock:
            doc = aggregated_discovery(self.ctx.store.registry, core=core, version=version)
        etag = etag_of(doc)
        headers = {"Vary": "Accept", "ETag": etag}
        if etag in [t.strip() for t in self.headers.get("If-None-Match", "").split(",")]:
            return _Route("get", document=lambda: b"", media=media, code=304, headers=headers)
        data = json.dumps(doc, separators=(",", ":")).encode()
        return _Route("get", document=lambda: data, media=media, headers=headers)

    def _openapi_route(self, parts: list[str]) -> _Route:
        """``/openapi/v2`` (JSON or protobuf, as asked), ``/openapi/v3`` and its documents."""
        store = self.ctx.store
        version = self.ctx.version.get("gitVersion", "")
        with store.lock:
            types = list(store.registry)
            schemas = self._crd_schemas()
        if parts == ["v2"]:
            doc = openapi_v2(types, version)
            accept = self.headers.get("Accept", "")
            if any(media in accept for media in PROTOBUF_MEDIA_TYPES):
                media = PROTOBUF_MEDIA_TYPES[0]
                return _Route("get", document=lambda: encode_document(doc), media=media)
            return _Route("get", document=lambda: doc)
        if parts == ["v3"]:
            root = openapi_v3_root(types, version, schemas)
            return _Route("get", document=lambda: root)
        if parts[:1] == ["v3"] and len(parts) in (3, 4):
            if parts[1] == "api" and len(parts) == 3:
                group, api_version = "", parts[2]
            elif parts[1] == "apis" and len(parts) == 4:
                group, api_version = parts[2], parts[3]
            else:
                raise StatusError(404, _NOT_FOUND)
            found = openapi_v3_document(types, group, api_version, version, schemas)
            if found is not None:
                return _Route("get", document=lambda: found)
        raise StatusError(404, _NOT_FOUND)

    def _crd_schemas(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """``openAPIV3Schema`` of every stored CRD version that has one (call under the lock)."""
        store = self.ctx.store
        crd_rt = store.resource(f"customresourcedefinitions.{CRD_GROUP}")
        schemas: dict[tuple[str, str, str], dict[str, Any]] = {}
        for crd in store.list(crd_rt):
            spec = crd.get("spec") or {}
            kind = (spec.get("names") or {}).get("kind")
            for version in spec.get("versions") or ():
                schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
                if kind and isinstance(schema, dict):
                    schemas[(str(spec.get("group")), str(version.get("name")), str(kind))] = schema
        return schemas

    def _crd_of(self, rt: ResourceType) -> dict[str, Any] | None:
        """The CustomResourceDefinition that serves ``rt`` (``None`` for built-ins)."""
        if rt.builtin:
            return None
        store = self.ctx.store
        try:
            return store.get(f"customresourcedefinitions.{CRD_GROUP}", f"{rt.plural}.{rt.group}")
        except StatusError:
            return None

    def _as_table(self, rt: ResourceType, objects: list[dict[str, Any]], rv: str) -> Any:
        self._table_sent = True
        query = {
            k: v[-1] for k, v in parse_qs(urlsplit(self.path).query, keep_blank_values=True).items()
        }
        return table(
            rt,
            objects,
            crd=self._crd_of(rt),
            include_object=query.get("includeObject") or "PartialObjectMetadata",
            resource_version=rv,
        )

    def _check_fields(self, rt: ResourceType, payload: Any, query: dict[str, str]) -> None:
        """``fieldValidation``: unknown ``metadata`` fields are an error (Strict), a warning
        (Warn) or dropped silently (Ignore, the default for clients that do not ask)."""
        directive = query.get("fieldValidation") or "Ignore"
        if directive not in ("Ignore", "Warn", "Strict"):
            raise StatusError(
                400,
                f'fieldValidation: Unsupported value: "{directive}": supported values: '
                '"Ignore", "Strict", "Warn"',
            )
        meta = payload.get("metadata") if isinstance(payload, dict) else None
        if directive == "Ignore" or not isinstance(meta, dict):
            return
        unknown = [f'unknown field "metadata.{k}"' for k in meta if k not in OBJECT_META_FIELDS]
        if not unknown:
            return
        if directive == "Strict":
            raise StatusError(
                400,
                f'{rt.kind} in version "{rt.version}" cannot be handled as a {rt.kind}: '
                f"strict decoding error: {', '.join(unknown)}",
            )
        self._warnings.extend(unknown)

    def _resource_route(
        self, group: str, version: str, rest: list[str], query: dict[str, str]
    ) -> _Route:
        registry = self.ctx.store.registry
        namespace: str | None = None
        name: str | None
        sub: str | None
        with self.ctx.store.lock:
            if (
                rest[0] == "namespaces"
                and len(rest) >= 3
                and group == ""
                and rest[2] in {"status", "finalize"}
                and len(rest) == 3
            ):
                rt = registry.get(group, version, "namespaces")
                name, sub = rest[1], rest[2]
            elif rest[0] == "namespaces" and len(rest) >= 3:
                namespace = rest[1]
                rt = registry.get(group, version, rest[2])
                if rt is None or not rt.namespaced:
                    raise StatusError(404, _NOT_FOUND)
                name = rest[3] if len(rest) > 3 else None
                sub = rest[4] if len(rest) > 4 else None
                if len(rest) > 5:
                    raise StatusError(404, _NOT_FOUND)
            else:
                rt = registry.get(group, version, rest[0])
                if rt is None:
                    raise StatusError(404, _NOT_FOUND)
                name = rest[1] if len(rest) > 1 else None
                sub = rest[2] if len(rest) > 2 else None
                if len(rest) > 3 or (rt.namespaced and name is not None):
                    raise StatusError(404, _NOT_FOUND)
        if rt is None:
            raise StatusError(404, _NOT_FOUND)
        if sub == "log" and rt.plural == "pods" and group == "" and self.command == "GET":
            return _Route("get", rt, namespace, name, sub)
        if sub is not None and (
            sub not in {"status", "finalize", "scale"}
            or (sub == "status" and not rt.status)
            or (sub == "scale" and not rt.scale)
            or (sub == "finalize" and rt.plural != "namespaces")
        ):
            raise StatusError(404, _NOT_FOUND)
        method = self.command
        if name is None:
            verbs = {"GET": "list", "HEAD": "list", "POST": "create", "DELETE": "deletecollection"}
            if method not in verbs:
                raise StatusError(
                    405, "the server does not allow this method on the requested resource"
                )
            verb = verbs[method]
            if verb == "list" and query.get("watch") in {"1", "true", "True"}:
                verb = "watch"
        else:
            verbs = {
                "GET": "get",
                "HEAD": "get",
                "PUT": "update",
                "PATCH": "patch",
                "DELETE": "delete",
            }
            if method not in verbs or (sub and method == "DELETE"):
                raise StatusError(
                    405, "the server does not allow this method on the requested resource"
                )
            verb = verbs[method]
        if rt.namespaced and name is not None and namespace is None:
            raise StatusError(404, _NOT_FOUND)
        if verb == "create" and rt.namespaced and namespace is None:
            raise StatusError(404, _NOT_FOUND)
        return _Route(verb, rt, namespace, name, sub)

    # -- resource verbs ------------------------------------------------------------------

    @staticmethod
    def _dry_run(query: dict[str, str]) -> bool:
        value = query.get("dryRun")
        if value in (None, ""):
            return False
        if value != "All":
            raise StatusError(400, f'dryRun: Unsupported value: "{value}": supported values: "All"')
        return True

    @staticmethod
    def _decode(body: bytes, content_type: str) -> Any:
        if not body:
            return None
        media = content_type.split(";")[0].strip().lower()
        try:
            if media.endswith("yaml"):
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise StatusError(400, f"couldn't get version/kind; json parse error: {exc}") from None

    @staticmethod
    def _int(query: dict[str, str], key: str) -> int | None:
        value = query.get(key)
        if value in (None, ""):
            return None
        try:
            return int(value)
        except ValueError:
            raise StatusError(400, f'{key}: Invalid value: "{value}": must be an integer') from None

    def _resource_call(
        self, route: _Route, query: dict[str, str], body: bytes, content_type: str
    ) -> tuple[int, Any]:
        store = self.ctx.store
        rt = route.rt
        assert rt is not None
        ns, name, sub = route.namespace, route.name, route.subresource
        if sub == "finalize":
            sub = None  # namespace finalize: an update of spec.finalizers
        verb = route.verb
        if sub == "scale":
            return 200, self._scale_call(route, query, body, content_type)
        tabled = wants_table(self.headers.get("Accept", "")) and sub is None
        if verb == "get":
            obj = store.do_get(rt, ns, name or "")
            if tabled:
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                return 200, self._as_table(rt, [obj], rv)
            return 200, obj
        if verb == "list":
            listing = store.do_list_json(
                rt,
                ns,
                ListQuery(
                    label_selector=query.get("labelSelector"),
                    field_selector=query.get("fieldSelector"),
                    limit=self._int(query, "limit"),
                    continue_token=query.get("continue") or None,
                    resource_version=query.get("resourceVersion"),
                    resource_version_match=query.get("resourceVersionMatch"),
                ),
            )
            if not tabled:
                return 200, listing
            data = json.loads(listing)
            converted = self._as_table(
                rt, data.get("items") or [], str(data["metadata"].get("resourceVersion", ""))
            )
            converted["metadata"] = data["metadata"]  # keeps continue / remainingItemCount
            return 200, converted
        dry_run = self._dry_run(query)
        media = content_type.split(";")[0].strip().lower()
        if verb in {"create", "update"}:
            if media and media not in {"application/json", "application/yaml", "*/*"}:
                raise StatusError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json, application/yaml",
                )
            payload = self._decode(body, content_type)
            if not isinstance(payload, dict):
                raise StatusError(400, "the body of the request must be a JSON object")
            self._check_fields(rt, payload, query)
            if verb == "create":
                return 201, store.do_create(rt, ns, payload, dry_run=dry_run)
            return 200, store.do_update(
                rt, ns, name or "", payload, subresource=sub, dry_run=dry_run
            )
        if verb == "patch":
            patch_type = PATCH_CONTENT_TYPES.get(media)
            if patch_type is None:
                raise StatusError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/apply-patch+yaml"
                    + (", application/strategic-merge-patch+json" if rt.builtin else ""),
                )
            payload = self._decode(
                body, "application/yaml" if patch_type == "apply" else content_type
            )
            self._check_fields(rt, payload, query)
            obj, created = store.do_patch(
                rt,
                ns,
                name or "",
                patch_type,
                payload,
                subresource=sub,
                dry_run=dry_run,
                field_manager=query.get("fieldManager"),
                force=query.get("force") in {"true", "1"},
            )
            return (201 if created else 200), obj
        options = self._decode(body, content_type) or {}
        if not isinstance(options, dict):
            raise StatusError(400, "DeleteOptions must be a JSON object")
        if query.get("propagationPolicy"):
            options["propagationPolicy"] = query["propagationPolicy"]
        if options.get("dryRun") == ["All"]:
            dry_run = True
        if verb == "delete":
            return 200, store.do_delete(rt, ns, name or "", dry_run=dry_run, options=options)
        return 200, store.do_delete_collection(
            rt,
            ns,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            dry_run=dry_run,
            options=options,
        )

    def _scale_call(
        self, route: _Route, query: dict[str, str], body: bytes, content_type: str
    ) -> Any:
        assert route.rt is not None
        patch_type: PatchType | None = None
        payload = None
        if route.verb == "patch":
            patch_type = PATCH_CONTENT_TYPES.get(content_type.split(";")[0].strip().lower())
            if patch_type is None or patch_type == "apply":
                raise StatusError(
                    415,
                    "the body of the request was in an unknown format - accepted media types "
                    "include: application/json-patch+json, application/merge-patch+json, "
                    "application/strategic-merge-patch+json",
                )
        if route.verb in {"update", "patch"}:
            payload = self._decode(body, content_type)
        return self.ctx.store.do_scale(
            route.rt,
            route.namespace,
            route.name or "",
            payload,
            patch_type=patch_type if route.verb == "patch" else None,
            replace=route.verb == "update",
            dry_run=self._dry_run(query) if route.verb != "get" else False,
        )

    def _stream_watch(self, route: _Route, query: dict[str, str]) -> None:
        rt = route.rt
        assert rt is not None
        timeout = self._int(query, "timeoutSeconds")
        events: Iterator[dict[str, Any]] = self.ctx.store.watch(
            rt,
            route.namespace,
            label_selector=query.get("labelSelector"),
            field_selector=query.get("fieldSelector"),
            resource_version=query.get("resourceVersion"),
            allow_bookmarks=query.get("allowWatchBookmarks") in {"true", "1"},
            send_initial_events=query.get("sendInitialEvents") in {"true", "1"},
            timeout=float(timeout) if timeout and timeout > 0 else _DEFAULT_WATCH_TIMEOUT,
            stop=self.ctx.stopping,
            shared=True,
        )
        self._record(
            route, urlsplit(self.path).path, query, 200, self.headers.get("Content-Type", "")
        )
        tabled = wants_table(self.headers.get("Accept", ""))
        self.send_response(200)
        self.send_header("Content-Type", TABLE_MEDIA if tabled else "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        first = True
        for event in events:
            if tabled and event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                obj = event["object"]
                rv = str((obj.get("metadata") or {}).get("resourceVersion", ""))
                converted = self._as_table(rt, [obj], rv)
                if not first:  # as the real server: the columns come with the first event only
                    converted["columnDefinitions"] = []
                event = {**event, "object": converted}
                first = False
            data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        if self.ctx.stopping.is_set():
            self.close_connection = True
            return
        self.wfile.write(b"0\r\n\r\n")


class HttpFront:
    """Listening socket, TLS and per-connection threads of one server.

    Args:
        ctx: what handlers need.
        ssl_context: server-side TLS context with the leaf certificate loaded.
        host: address to bind.
        port: port to bind (0: any free port).
    """

    def __init__(
        self, ctx: ServerContext, ssl_context: ssl.SSLContext, host: str, port: int
    ) -> None:
        self.ctx = ctx
        self._ssl = ssl_context
        self._listener = socket.create_server((host, port), reuse_port=False, backlog=128)
        self.port: int = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._conns: dict[int, socket.socket] = {}
        self._threads: set[threading.Thread] = set()
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._accept_thread = threading.Thread(
            target=self._accept_loop, name=f"apiserver-{self.port}-accept", daemon=True
        )

    def start(self) -> None:
        """Start accepting connections."""
        self._accept_thread.start()

    def _accept_loop(self) -> None:
        with selectors.DefaultSelector() as sel:
            sel.register(self._listener, selectors.EVENT_READ)
            sel.register(self._wake_r, selectors.EVENT_READ)
            while not self._closing.is_set():
                ready = sel.select()
                if any(key.fileobj is self._wake_r for key, _ in ready) or self._closing.is_set():
                    return
                try:
                    sock, address = self._listener.accept()
                except OSError:
                    continue
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                thread = threading.Thread(
                    target=self._connection,
                    args=(sock, address),
                    name=f"apiserver-{self.port}-conn",
                    daemon=True,
                )
                with self._lock:
                    if self._closing.is_set():
                        sock.close()
                        return
                    self._threads = {t for t in self._threads if t.is_alive()}
                    self._threads.add(thread)
                    self._conns[id(thread)] = sock
                thread.start()

    def _connection(self, sock: socket.socket, address: Any) -> None:
        me = id(threading.current_thread())
        tls: ssl.SSLSocket | None = None
        try:
            tls = self._ssl.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
            with self._lock:
                if self.ctx.stopping.is_set():
                    return
                self._conns[me] = tls  # from now on stop() can cut it, even mid-handshake
            tls.settimeout(10)
            tls.do_handshake()
            tls.settimeout(None)
            _Handler(tls, address, self.ctx)
        except (OSError, ssl.SSLError, ValueError):
            pass  # client went away, bad handshake or the server is stopping
        except Exception:
            log.exception("loopback API server connection failed")
        finally:
            with self._lock:
                self._conns.pop(me, None)
            for s in (tls, sock):
                if s is not None:
                    try:
                        s.close()
                    except OSError:
                        pass

    def stop(self, timeout: float = 5.0) -> None:
        """Stop accepting, cut every connection, wake watches and join every thread.

        The listener closes first, so a client retrying after its connection is cut gets a
        clean "connection refused" instead of a half-accepted connection.
        """
        self._closing.set()
        try:
            self._wake_w.send(b"x")
        except OSError:
            pass
        self._accept_thread.join(timeout)
        self._listener.close()
        self.ctx.stopping.set()
        with self._lock:
            conns = list(self._conns.values())
            threads = list(self._threads)
        for conn in conns:
            try:
                socket.socket.shutdown(conn, socket.SHUT_RDWR)
            except OSError:
                pass
        self.ctx.store.wake()
        for thread in threads:
            thread.join(timeout)
            if thread.is_alive():  # pragma: no cover - would be a bug in a handler
                log.warning("loopback API server thread %s did not stop", thread.name)
        self._wake_r.close()
        self._wake_w.close()
