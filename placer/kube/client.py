"""One client per member cluster: any kind by apiVersion/kind, raw JSON, placer's errors.

:func:`open_client` turns one kubeconfig context into a :class:`KubeClient` backed by its own
transport (:mod:`placer.kube.transport`): urllib3 configured from the kubeconfig entry when
placer understands it (token, token file, client certificate, basic auth, CA, proxy-url), else
the official client's ``ApiClient`` (built by its loader with ``persist_config=False``, so exec
plugins and OIDC work and nothing is ever written back). Clients share no state: one per
context is the multi-cluster pattern, safe to use from one thread each (and the connection pool
lets a few threads share one).

Why raw JSON instead of the typed ``CoreV1Api``: the typed models are pydantic in client 37 and
validating 5,000 pods costs far more than reading them (and fails on objects a fake or an older
server leaves incomplete); placer reads a few fields of many objects, and dispatches custom
resources that have no typed model anyway. So every verb builds a pure
:class:`placer.kube.requests.Request`, and :meth:`KubeClient.send` — the single place that does
I/O — sends it through the transport and parses the body with ``json.loads``.

Errors: every failure leaves this module as a :class:`placer.errors.KubeError` subclass (see
:mod:`placer.kube.translate`), with the cluster name and the action in the message.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

import urllib3
from urllib3.exceptions import ReadTimeoutError

from placer.errors import (
    ClusterUnreachableError,
    ConflictError,
    FleetConfigError,
    InputError,
    KubeError,
    NotFoundError,
)
from placer.kube.kubeconfig import ContextInfo, KubeconfigSet
from placer.kube.requests import (
    PatchType,
    Request,
    apply_request,
    create_request,
    delete_request,
    get_request,
    list_request,
    patch_request,
    replace_request,
)
from placer.kube.resources import (
    AGGREGATED_DISCOVERY,
    WELL_KNOWN,
    ResourceRef,
    api_prefix,
    resources_from_aggregated,
    resources_from_discovery,
    split_api_version,
)
from placer.kube.settings import ClientSettings, WatchSettings
from placer.kube.translate import error_from_exception, error_from_status
from placer.kube.transport import LightTransport, OfficialTransport, Transport, light_connection
from placer.objects import meta, name_of, namespace_of, version_of

if TYPE_CHECKING:
    from placer.kube.watching import Watcher

__all__ = ["KubeClient", "ObjectList", "open_client"]

JSON = dict[str, Any]


@dataclass(frozen=True)
class ObjectList:
    """A complete list: every item (with ``apiVersion``/``kind`` set) and the list's RV."""

    items: list[JSON]
    resource_version: str


class KubeClient:
    """A client for one API server (one kubeconfig context). Build it with :func:`open_client`.

    Args:
        transport: how requests reach the API server (:mod:`placer.kube.transport`).
        name: member cluster name (used in errors and logs).
        settings: timeouts, retries, paging.
        namespace: default namespace (the context's).
        page_gate: see :attr:`page_gate`.
    """

    def __init__(
        self,
        transport: Transport,
        *,
        name: str,
        settings: ClientSettings | None = None,
        namespace: str = "default",
        page_gate: AbstractContextManager[Any] | None = None,
    ) -> None:
        self.transport = transport
        #: held while a list page is decoded and processed (see :meth:`iter_pages`); share a
        #: ``threading.BoundedSemaphore`` between clients to bound the pages alive at once.
        self.page_gate: AbstractContextManager[Any] = page_gate or nullcontext()
        self.name = name
        self.settings = settings or ClientSettings()
        self.namespace = namespace
        self.server: str = transport.server
        self._discovered: dict[str, dict[str, ResourceRef]] = {}
        #: ``/api`` or ``/apis`` -> whether its whole discovery was read at once (aggregated
        #: discovery) since the cache was last dropped, ``False`` once the server answered it
        #: with a legacy document (each group/version is then asked on its own).
        self._aggregated: dict[str, bool] = {}
        self._lock = threading.Lock()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubeClient({self.name!r}, {self.server!r})"

    def close(self) -> None:
        """Release the connections."""
        self.transport.close()

    # ----------------------------------------------------------------------------------------
    # the I/O seam

    def send(self, request: Request, *, timeout: float | None = None) -> Any:
        """Send ``request`` and return the parsed JSON body.

        Args:
            request: what to send.
            timeout: seconds for this request (default ``settings.request_timeout``).

        Raises:
            KubeError: the matching subclass for an error Status or a transport failure.
        """
        return self._decode(request, self._fetch(request, timeout=timeout))

    def _fetch(self, request: Request, *, timeout: float | None) -> bytes:
        with self._open(request, timeout=timeout) as response:
            data: bytes = response.data
        return data

    def _decode(self, request: Request, data: bytes) -> Any:
        if not data:
            return None
        try:
            return json.loads(data)
        except ValueError:
            raise KubeError(
                f"{request.action}: the server answered something that is not JSON",
                cluster=self.name,
            ) from None

    @contextmanager
    def stream(self, request: Request, *, read_timeout: float) -> Iterator[Any]:
        """Open ``request`` as a stream and yield the urllib3 response (for watches).

        The response is closed when the block ends. Errors as in :meth:`send`.
        """
        timeout = (self.settings.connect_timeout, read_timeout)
        with self._open(request, timeout=timeout, streaming=True) as response:
            yield response

    @contextmanager
    def _open(
        self,
        request: Request,
        *,
        timeout: float | tuple[float, float] | None,
        streaming: bool = False,
    ) -> Iterator[Any]:
        headers: dict[str, str] = {"Accept": request.accept or "application/json"}
        if request.body is not None:
            headers["Content-Type"] = request.content_type or "application/json"
        if timeout is None:
            timeout = (self.settings.connect_timeout, self.settings.request_timeout)
        elif isinstance(timeout, (int, float)):
            timeout = (min(self.settings.connect_timeout, timeout), timeout)
        response = None
        try:
            response = self.transport.send(
                request.method,
                self.server + request.url,
                headers=headers,
                body=request.body,
                timeout=timeout,
            )
            if response.status >= 400:
                body = response.data
                raise error_from_status(
                    response.status,
                    body,
                    cluster=self.name,
                    action=request.action,
                    http_reason=str(response.reason or ""),
                )
            yield response
        except KubeError:
            raise
        except Exception as exc:
            error = error_from_exception(
                exc, cluster=self.name, server=self.server, action=request.action
            )
            if error is None:
                raise
            raise error from exc
        finally:
            if response is not None:
                if streaming:
                    # a stream is left half-read: the connection cannot be reused
                    response.close()
                else:
                    response.release_conn()

    # ----------------------------------------------------------------------------------------
    # discovery

    def resource(self, api_version: str, kind: str) -> ResourceRef:
        """Where ``kind`` of ``api_version`` lives (discovery, cached per group/version).

        Raises:
            NotFoundError: the server does not serve that kind (CRD not installed?).
        """
        known = WELL_KNOWN.get((api_version, kind))
        if known is not None:
            return known
        side = "/apis" if split_api_version(api_version)[0] else "/api"
        with self._lock:
            cached = self._discovered.get(api_version)
            tried = side in self._aggregated
        if cached is not None and kind in cached:
            return cached[kind]
        if not tried and self._discover_all(side):
            with self._lock:
                cached = self._discovered.get(api_version)
            if cached is not None and kind in cached:
                return cached[kind]
        # unknown or not yet seen: (re)discover once — a CRD may have been installed meanwhile
        try:
            document = self.send(
                Request("GET", api_prefix(api_version), action=f"discover {api_version}")
            )
        except NotFoundError:
            document = {}
        kinds = resources_from_discovery(api_version, document or {})
        with self._lock:
            self._discovered[api_version] = kinds
        if kind not in kinds:
            raise NotFoundError(
                f"the server does not serve kind {kind} in {api_version}",
                cluster=self.name,
                code=404,
                reason="NotFound",
                hint="check apiVersion and kind, or install the CustomResourceDefinition",
            )
        return kinds[kind]

    def _discover_all(self, path: str) -> bool:
        """Read every group/version of ``path`` (``/apis``, or ``/api``: the core group) in one
        request, when the server serves aggregated discovery (kubectl asks for it the same
        way); ``False`` when it answers a legacy document (its groups/versions are then asked
        one at a time)."""
        try:
            document = self.send(
                Request("GET", path, action="discover API resources", accept=AGGREGATED_DISCOVERY)
            )
        except NotFoundError:
            document = None
        found = resources_from_aggregated(document) if isinstance(document, Mapping) else None
        with self._lock:
            self._aggregated[path] = found is not None
            if found is not None:
                self._discovered.update(found)
        return found is not None

    def served_kinds(self, api_version: str) -> Mapping[str, ResourceRef]:
        """Every kind the server serves in ``api_version``, from discovery (not cached: it is
        for resolving what a user typed, once per command); empty when the group/version is
        not served.
        """
        try:
            document = self.send(
                Request("GET", api_prefix(api_version), action=f"discover {api_version}")
            )
        except NotFoundError:
            return {}
        return resources_from_discovery(api_version, document or {})

    def group_versions(self) -> list[str]:
        """The preferred version of every API group the server serves (``v1`` for the core
        group first, then ``apps/v1``...), from ``/api`` and ``/apis`` (not cached)."""
        core = self.send(Request("GET", "/api", action="discover API versions")) or {}
        found = [str(v) for v in (core.get("versions") or ())[:1]]
        groups = self.send(Request("GET", "/apis", action="discover API groups")) or {}
        for group in groups.get("groups") or ():
            preferred = (group.get("preferredVersion") or {}).get("groupVersion")
            if isinstance(preferred, str) and preferred:
                found.append(preferred)
        return found

    def forget_discovery(self) -> None:
        """Drop cached discovery (after CRDs changed)."""
        with self._lock:
            self._discovered.clear()
            self._aggregated = {p: False for p, whole in self._aggregated.items() if not whole}

    def server_version(self) -> JSON:
        """``/version`` of the server."""
        result: JSON = self.send(Request("GET", "/version", action="get version"))
        return result

    # ----------------------------------------------------------------------------------------
    # reading

    def get(self, api_version: str, kind: str, name: str, *, namespace: str | None = None) -> JSON:
        """One object. Raises ``NotFoundError`` when it does not exist."""
        ref = self.resource(api_version, kind)
        request = self._build(get_request, ref, name, namespace=self._ns(ref, namespace))
        result: JSON = self.send(request)
        return result

    def iter_pages(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int | None = None,
        deadline: float | None = None,
    ) -> Iterator[JSON]:
        """List page by page (``limit``/``continue``), yielding each raw list document.

        Every item gets ``apiVersion`` and ``kind`` set (servers omit them in lists). All pages
        come from one consistent snapshot; the last page's ``metadata.resourceVersion`` is the
        list's RV. A page is decoded and handed over while holding :attr:`page_gate`, which is
        released when the next page is asked for: consumers should drop their reference to a
        page before asking for the next one.

        Args:
            deadline: ``time.monotonic()`` value after which no request may still run; each
                request's timeout is cut to the time left.

        Raises:
            GoneError: the continue token expired mid-way (list again).
        """
        ref = self.resource(api_version, kind)
        token: str | None = None
        limit = page_size or self.settings.page_size
        while True:
            request = self._build(
                list_request,
                ref,
                namespace=namespace,
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=token,
            )
            data = self._fetch(request, timeout=self._time_left(deadline, request))
            with self.page_gate:
                page: JSON = self._decode(request, data)
                del data
                for item in page.get("items") or ():
                    item.setdefault("apiVersion", ref.api_version)
                    item.setdefault("kind", ref.kind)
                token = meta(page).get("continue") or None
                yield page
                del page
            if not token:
                return

    def list(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int | None = None,
        deadline: float | None = None,
    ) -> ObjectList:
        """Every matching object and the list's resourceVersion (paginated under the hood).

        If the continue token expires mid-way (410), the list starts over once without paging,
        as client-go's pager does.
        """
        for attempt in (1, 2):
            items: list[JSON] = []
            version = ""
            try:
                for page in self.iter_pages(
                    api_version,
                    kind,
                    namespace=namespace,
                    label_selector=label_selector,
                    field_selector=field_selector,
                    page_size=page_size if attempt == 1 else 1 << 30,
                    deadline=deadline,
                ):
                    items.extend(page.get("items") or ())
                    version = version_of(page)
                return ObjectList(items, version)
            except KubeError as err:
                if err.code != 410 or attempt == 2:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    def watch(
        self,
        api_version: str,
        kind: str,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        settings: WatchSettings | None = None,
    ) -> Watcher:
        """A :class:`placer.kube.Watcher` (list, then watch; see :mod:`placer.kube.watching`)."""
        from placer.kube.watching import Watcher  # here: the controller watches, a CLI does not

        return Watcher(
            self,
            api_version,
            kind,
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            settings=settings,
        )

    # ----------------------------------------------------------------------------------------
    # writing

    def create(
        self,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """Create ``body`` (its apiVersion/kind pick the resource).

        Raises:
            ConflictError: it exists already (reason ``AlreadyExists``).
        """
        ref = self._ref_of(body)
        request = self._build(
            create_request,
            ref,
            body,
            namespace=self._ns(ref, namespace, body),
            field_manager=field_manager,
            dry_run=dry_run,
        )
        result: JSON = self.send(request)
        return result

    def replace(
        self,
        body: Mapping[str, Any],
        *,
        namespace: str | None = None,
        subresource: str = "",
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """Replace an object (PUT); conditional on ``metadata.resourceVersion`` when present."""
        ref = self._ref_of(body)
        request = self._build(
            replace_request,
            ref,
            body,
            name=_name_of(body),
            namespace=self._ns(ref, namespace, body),
            subresource=subresource,
            field_manager=field_manager,
            dry_run=dry_run,
        )
        result: JSON = self.send(request)
        return result

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any] | Sequence[Mapping[str, Any]],
        *,
        namespace: str | None = None,
        patch_type: PatchType = PatchType.MERGE,
        subresource: str = "",
        field_manager: str | None = None,
        dry_run: bool = False,
    ) -> JSON:
        """Merge patch (default) or JSON patch (``PatchType.JSON``, a list of operations)."""
        ref = self.resource(api_version, kind)
        request = self._build(
            patch_request,
            ref,
            name,
            patch,
            patch_type=patch_type,
            namespace=self._ns(ref, namespace),
            subresource=subresource,
            field_manager=field_manager,
            dry_run=dry_run,
        )
        result: JSON = self.send(request)
        return result

    def patch_status(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str | None = None,
        field_manager: str | None = None,
    ) -> JSON:
        """Merge-patch the ``status`` subresource."""
        return self.patch(
            api_version,
            kind,
            name,
            patch,
            namespace=namespace,
            subresource="status",
            field_manager=field_manager,
        )

    def apply(
        self,
        body: Mapping[str, Any],
        *,
        field_manager: str,
        namespace: str | None = None,
        force: bool = False,
        dry_run: bool = False,
        subresource: str = "",
    ) -> JSON:
        """Server-side apply ``body`` as ``field_manager`` (``force`` takes over conflicts)."""
        ref = self._ref_of(body)
        request = self._build(
            apply_request,
            ref,
            body,
            field_manager=field_manager,
            namespace=self._ns(ref, namespace, body),
            force=force,
            dry_run=dry_run,
            subresource=subresource,
        )
        result: JSON = self.send(request)
        return result

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        *,
        namespace: str | None = None,
        propagation_policy: str | None = "Background",
        grace_period_seconds: int | None = None,
        dry_run: bool = False,
        missing_ok: bool = False,
    ) -> JSON | None:
        """Delete an object; the answer (object or Status), or ``None`` if it was already gone
        and ``missing_ok``."""
        ref = self.resource(api_version, kind)
        request = self._build(
            delete_request,
            ref,
            name,
            namespace=self._ns(ref, namespace),
            propagation_policy=propagation_policy,
            grace_period_seconds=grace_period_seconds,
            dry_run=dry_run,
        )
        try:
            result: JSON | None = self.send(request)
        except NotFoundError:
            if missing_ok:
                return None
            raise
        return result

    def ensure_namespace(self, name: str, *, labels: Mapping[str, str] | None = None) -> bool:
        """Create namespace ``name`` unless it exists; ``True`` when it was created."""
        body: JSON = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        if labels:
            body["metadata"]["labels"] = dict(labels)
        try:
            self.create(body)
        except ConflictError as err:
            if err.reason == "AlreadyExists":
                return False
            raise
        return True

    # ----------------------------------------------------------------------------------------
    # helpers

    def _ref_of(self, body: Mapping[str, Any]) -> ResourceRef:
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str):
            raise InputError(
                "the object has no apiVersion and kind", source=_describe(body), field="apiVersion"
            )
        return self.resource(api_version, kind)

    def _ns(
        self, ref: ResourceRef, namespace: str | None, body: Mapping[str, Any] | None = None
    ) -> str | None:
        if not ref.namespaced:
            return None
        if namespace:
            return namespace
        return namespace_of(body or {}) or self.namespace

    def _build(self, builder: Any, *args: Any, **kwargs: Any) -> Request:
        try:
            request: Request = builder(*args, **kwargs)
        except ValueError as exc:
            raise InputError(str(exc), source=f"cluster {self.name}") from None
        return request

    def _time_left(self, deadline: float | None, request: Request) -> float | None:
        if deadline is None:
            return None
        left = deadline - time.monotonic()
        if left <= 0:
            raise ClusterUnreachableError(
                f"{request.action}: timed out (deadline passed)",
                cluster=self.name,
                reason="Timeout",
                status_message="deadline passed",
            )
        return min(left, self.settings.request_timeout)


def _name_of(body: Mapping[str, Any]) -> str:
    name = name_of(body)
    if not name:
        raise InputError("the object has no metadata.name", source=_describe(body))
    return name


def _describe(body: Mapping[str, Any]) -> str:
    return f"{body.get('kind', '?')}/{name_of(body) or '?'}"


class _Retry(urllib3.Retry):
    """urllib3's retry policy, except that a read timeout is never retried.

    NB: one read retry is kept for a pooled keep-alive connection the server closed while idle;
    but a server too slow to answer would only get the same request again, doubling the wait.
    """

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: Any = None,
        error: Exception | None = None,
        _pool: Any = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        policy = self.new(read=0) if isinstance(error, ReadTimeoutError) else self
        return super(_Retry, policy).increment(method, url, response, error, _pool, _stacktrace)


def open_client(
    kubeconfigs: KubeconfigSet,
    context: str,
    *,
    name: str | None = None,
    settings: ClientSettings | None = None,
    page_gate: AbstractContextManager[Any] | None = None,
) -> KubeClient:
    """A :class:`KubeClient` for ``context`` of ``kubeconfigs``.

    Nothing is sent yet: an unreachable server only shows on the first request. The client
    talks through the light transport when it understands the context's entries, else through
    the official client (exec plugins, auth-provider, environment proxies...; see
    :mod:`placer.kube.transport`, and ``ClientSettings.light_transport``).

    Args:
        kubeconfigs: the merged kubeconfig files.
        context: context name.
        name: member cluster name for messages (default: the context name).
        settings: per-cluster client settings.
        page_gate: see :attr:`KubeClient.page_gate`.

    Raises:
        FleetConfigError: unknown context, dangling reference, or the entry cannot be used
            (message redacted of credentials, naming file and context).
    """
    settings = settings or ClientSettings()
    info: ContextInfo = kubeconfigs.context(context)
    missing = kubeconfigs.exec_plugin_problem(context)
    if missing is not None:
        raise missing
    config = kubeconfigs.client_config(context)
    retries = _Retry(
        total=settings.connect_retries + 1,
        connect=settings.connect_retries,
        # one read retry: a pooled keep-alive connection the server closed while idle
        read=1,
        redirect=0,
        status=0,
        other=0,
        backoff_factor=0.1,
        raise_on_status=False,
        raise_on_redirect=False,
    )
    connection = light_connection(config, source=info.source) if settings.light_transport else None
    transport: Transport
    if connection is not None and not connection.declined:
        transport = LightTransport(
            connection,
            retries=retries,
            pool_size=settings.pool_size,
            user_agent=settings.user_agent,
            source=info.source,
            context=context,
        )
    else:
        transport = _official_transport(kubeconfigs, context, config, retries, settings)
    return KubeClient(
        transport,
        name=name or context,
        settings=settings,
        namespace=info.namespace,
        page_gate=page_gate,
    )


def _official_transport(
    kubeconfigs: KubeconfigSet,
    context: str,
    config: dict[str, Any],
    retries: urllib3.Retry,
    settings: ClientSettings,
) -> OfficialTransport:
    """The official client's ``ApiClient`` for ``context``, built by its own loader with
    ``persist_config=False`` (exec plugins, OIDC, token files work; nothing is written back)."""
    from kubernetes.client import Configuration
    from kubernetes.config import new_client_from_config_dict as _new_client

    new_client_from_config_dict: Any = _new_client  # the loader has no annotations

    configuration = Configuration()
    configuration.retries = retries
    configuration.connection_pool_maxsize = settings.pool_size
    try:
        api_client = new_client_from_config_dict(
            config_dict=config,
            context=context,
            persist_config=False,
            client_configuration=configuration,
        )
    except Exception as exc:
        raise FleetConfigError(
            f"context {context!r} cannot be used: {kubeconfigs.redact(str(exc))}",
            source=kubeconfigs.context(context).source,
            field=f"contexts[name={context}]",
        ) from None
    api_client.user_agent = settings.user_agent
    hook = getattr(api_client.configuration, "refresh_api_key_hook", None)
    if hook is not None:
        api_client.configuration.refresh_api_key_hook = _throttled(hook, _REFRESH_INTERVAL)
    return OfficialTransport(api_client)


#: seconds between two runs of the official loader's token refresh hook.
_REFRESH_INTERVAL = 1.0


def _throttled(hook: Any, interval: float) -> Any:
    """``hook`` run at most once per ``interval`` seconds.

    NB: the official loader installs a hook that runs before *every* request: it reloads an
    expired exec/OIDC token and then copies host, certificates and token into the
    configuration again — a sizeable share of a request's CPU cost in the placement
    controller. A token that expires is still reloaded within ``interval``.
    """
    lock = threading.Lock()
    last = [float("-inf")]

    def call(configuration: Any) -> None:
        now = time.monotonic()
        with lock:
            if now - last[0] < interval:
                return
            last[0] = now
        hook(configuration)
        # the official hook re-installs itself on every run: put the throttle back in front
        configuration.refresh_api_key_hook = call

    return call
