"""What a workload needs on its member besides itself: the objects its pod templates name.

A pod does not start without the ConfigMaps and Secrets its containers read (``env[].valueFrom``
``configMapKeyRef``/``secretKeyRef``, ``envFrom[]``), the volumes' ConfigMaps, Secrets and
PersistentVolumeClaims (``volumes[]``, ``projected`` sources), its ServiceAccount
(``serviceAccountName``; ``default`` exists everywhere) — and it is not reachable without the
headless Service its ``subdomain`` names. :func:`references` reads them from every pod template
of the decomposition; ``imagePullSecrets`` and the ``subdomain``'s Service are carried when
given but not required (kubelet and the frameworks do without them), and so is every reference
marked ``optional: true``.

Where they come from: the same input as the workload (``placer submit -f``: ConfigMap, Secret,
ServiceAccount, Service and PersistentVolumeClaim documents next to it, :func:`is_dependency`,
attached to the workloads that name them by :func:`attach`), the hub (the controller reads them
from the workload's namespace there, :func:`read_from`), or the member itself. When a
workload is dispatched (:class:`~placer.dispatch.dispatcher.Dispatcher`):

1. before anything is written for the unit, every required reference that the input does not
   supply must exist on the member — else the cluster fails the unit with a clear error naming
   the object, the workload and the template field, and it is tried elsewhere;
2. the supplied objects are applied first (labelled ``placer.dev/placed-by: placer``) — one
   that exists on the member without placer's label is the user's: used as it is, never
   changed or owned;
3. once the workload is applied, each becomes owned by it (an ownerReference per workload,
   written by that workload's own field manager): Kubernetes' garbage collector removes the
   object with the last workload that uses it, so a ConfigMap two placed workloads share stays
   while one of them remains.

A failed unit removes the ones it created (roll-back, like the workload itself). Secrets' data
is never shown: outcomes, notes and errors name objects only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from placer import objects
from placer.definitions.documents import DEPENDENCY_KINDS, is_dependency
from placer.dispatch.handoff import own
from placer.dispatch.outcomes import Manifest
from placer.dispatch.record import LABEL_PLACED_BY, PLACED_BY, SERVER_METADATA
from placer.errors import KubeError, NotFoundError
from placer.kube import KubeClient
from placer.objects import labels_of, name_of, namespace_of

__all__ = [
    "DEPENDENCY_KINDS",
    "Dependencies",
    "Dependency",
    "attach",
    "body_of",
    "check_expected",
    "existing_state",
    "is_dependency",
    "missing_required",
    "plan_dependencies",
    "read_from",
    "references",
    "refresh",
]


@dataclass(frozen=True)
class Dependency:
    """An object a workload's pods name (``where``: the first template field naming it)."""

    kind: str
    name: str
    namespace: str
    where: str
    required: bool = True

    @property
    def key(self) -> tuple[str, str, str]:
        return (self.kind, self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Dependencies:
    """A workload's dependencies: those the input supplies (with their objects) and the others."""

    supplied: tuple[tuple[Dependency, Mapping[str, Any]], ...] = ()
    #: named by the templates, not in the input: they must be on the member (when required).
    expected: tuple[Dependency, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.supplied or self.expected)


def references(manifest: Manifest) -> list[Dependency]:
    """Every object the workload's pod templates name, once each (first field naming it; a
    reference is required when any field requires it)."""
    namespace = manifest.ref.namespace
    found: dict[tuple[str, str, str], Dependency] = {}
    for component in manifest.decomposition.components:
        spec = component.template.get("spec") or {}
        for dependency in _pod_references(spec, namespace, component.label):
            known = found.get(dependency.key)
            if known is None:
                found[dependency.key] = dependency
            elif dependency.required and not known.required:
                found[dependency.key] = dependency
    return list(found.values())


def attach(
    manifests: Sequence[Manifest], objects: Iterable[Mapping[str, Any]]
) -> dict[str, Dependencies]:
    """Per workload (``str(ref)``), the input objects its templates name, and the others."""
    by_key: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for obj in objects:
        key = (str(obj.get("kind")), namespace_of(obj), name_of(obj))
        by_key[key] = obj
    out: dict[str, Dependencies] = {}
    for manifest in manifests:
        supplied: list[tuple[Dependency, Mapping[str, Any]]] = []
        expected: list[Dependency] = []
        for dependency in references(manifest):
            # an object without a namespace goes where the workload goes
            found = by_key.get(dependency.key) or by_key.get((dependency.kind, "", dependency.name))
            if found is not None:
                supplied.append((dependency, found))
            else:
                expected.append(dependency)
        out[str(manifest.ref)] = Dependencies(tuple(supplied), tuple(expected))
    return out


def plan_dependencies(manifest: Manifest) -> Dependencies:
    """The dependencies of ``manifest`` with the objects it was given (:attr:`Manifest.
    dependencies`)."""
    return attach([manifest], manifest.dependencies)[str(manifest.ref)]


# -- on a cluster ----------------------------------------------------------------------------


def read_from(client: KubeClient, manifest: Manifest) -> tuple[Mapping[str, Any], ...]:
    """The objects the workload's pods name, as ``client``'s cluster has them (the controller
    reads them from the hub, in the workload's namespace); one it cannot read (absent,
    forbidden) is left to the member (:func:`check_expected`)."""
    found: list[Mapping[str, Any]] = []
    for dependency in references(manifest):
        try:
            found.append(
                client.get("v1", dependency.kind, dependency.name, namespace=dependency.namespace)
            )
        except KubeError:
            continue
    return tuple(found)


def missing_required(client: KubeClient, dependencies: Dependencies) -> Iterator[Dependency]:
    """The required dependencies neither supplied nor on ``client``'s member, one by one."""
    for dependency in dependencies.expected:
        if not dependency.required:
            continue
        try:
            client.get("v1", dependency.kind, dependency.name, namespace=dependency.namespace)
        except NotFoundError:
            yield dependency


def check_expected(client: KubeClient, dependencies: Dependencies, workload: str) -> None:
    """Raise NotFoundError for the first required dependency neither supplied nor on the
    member (before anything is written for the workload there)."""
    for dependency in missing_required(client, dependencies):
        raise NotFoundError(
            f"{dependency} (named by {workload}, {dependency.where}) is neither in the "
            f"input nor on cluster {client.name}",
            cluster=client.name,
            code=404,
            reason="NotFound",
            hint=f"give the {dependency.kind} with -f next to the workload, or create it "
            "on the member",
        )


def body_of(dependency: Dependency, obj: Mapping[str, Any]) -> dict[str, Any]:
    """What placer applies for a supplied object: the user's, in the workload's namespace,
    without server-set metadata, labelled as placer's."""
    body = copy.deepcopy(dict(obj))
    body.pop("status", None)
    meta = {k: v for k, v in objects.meta(body).items() if k not in SERVER_METADATA}
    meta["namespace"] = dependency.namespace
    meta["labels"] = {**(meta.get("labels") or {}), LABEL_PLACED_BY: PLACED_BY}
    body["metadata"] = meta
    return body


def existing_state(client: KubeClient, dependency: Dependency) -> str:
    """``absent``, ``placer`` (one of placer's, kept up to date) or ``foreign`` (the user's)."""
    try:
        found = client.get("v1", dependency.kind, dependency.name, namespace=dependency.namespace)
    except NotFoundError:
        return "absent"
    labels = labels_of(found)
    return "placer" if labels.get(LABEL_PLACED_BY) == PLACED_BY else "foreign"


def refresh(
    client: KubeClient,
    manifest: Manifest,
    owner: Mapping[str, Any],
    *,
    field_manager: str,
    dry_run: bool = False,
) -> list[str]:
    """Bring the objects ``manifest``'s pods name up to date beside its copy ``owner`` (placed
    earlier; a resubmission left it unchanged, or updated it in place): each supplied object is
    applied again — one deleted meanwhile is restored, one changed in the input is updated, the
    user's own is left alone — and owned by the copy; a required one neither supplied nor on the
    member is a warning (the copy runs already). What was done, as notes (objects named, never
    shown); never raises for the member's answers."""
    needs = plan_dependencies(manifest)
    notes: list[str] = []
    carried: list[dict[str, Any]] = []
    would = "would be " if dry_run else ""
    try:
        for dependency, obj in needs.supplied:
            try:
                found = client.get(
                    "v1", dependency.kind, dependency.name, namespace=dependency.namespace
                )
            except NotFoundError:
                found = None
            if found is not None and labels_of(found).get(LABEL_PLACED_BY) != PLACED_BY:
                notes.append(f"{dependency} is on the member and not placer's: used as it is")
                continue
            body = body_of(dependency, obj)
            client.apply(body, field_manager=field_manager, dry_run=dry_run)
            carried.append(body)
            if found is None:
                notes.append(f"{dependency} {would}restored (it was missing on the member)")
            elif _content_differs(body, found):
                notes.append(f"{dependency} {would}updated")
        if carried and not dry_run:
            own(client, carried, owner)
        for dependency in missing_required(client, needs):
            notes.append(
                f"warning: {dependency} (named by {manifest.ref}, {dependency.where}) is "
                f"neither in the input nor on cluster {client.name}: its pods cannot start"
            )
    except KubeError as err:
        notes.append(f"the objects its pods name were not all brought up to date ({err.message})")
    return notes


# --------------------------------------------------------------------------------------------


def _content_differs(body: Mapping[str, Any], found: Mapping[str, Any]) -> bool:
    """Whether applying ``body`` changes what ``found`` holds (its content fields and labels;
    a Secret's write-only ``stringData`` counts as a change)."""
    for key, value in body.items():
        if key in ("apiVersion", "kind", "metadata"):
            continue
        if key == "stringData" or found.get(key) != value:
            return True
    wanted = (body.get("metadata") or {}).get("labels") or {}
    return any(labels_of(found).get(k) != v for k, v in wanted.items())


def _pod_references(spec: Mapping[str, Any], namespace: str, label: str) -> list[Dependency]:
    out: list[Dependency] = []

    def add(kind: str, name: object, where: str, required: bool = True) -> None:
        if isinstance(name, str) and name:
            out.append(Dependency(kind, name, namespace, f"{label}: {where}", required))

    for key in ("initContainers", "containers", "ephemeralContainers"):
        for i, container in enumerate(_items(spec.get(key))):
            at = f"{key}[{i}]"
            for j, env in enumerate(_items(container.get("env"))):
                source = env.get("valueFrom") or {}
                for ref_key, kind in (("configMapKeyRef", "ConfigMap"), ("secretKeyRef", "Secret")):
                    ref = source.get(ref_key)
                    if isinstance(ref, Mapping):
                        where = f"{at}.env[{j}].valueFrom.{ref_key}"
                        add(kind, ref.get("name"), where, not ref.get("optional"))
            for j, env_from in enumerate(_items(container.get("envFrom"))):
                for ref_key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
                    ref = env_from.get(ref_key)
                    if isinstance(ref, Mapping):
                        where = f"{at}.envFrom[{j}].{ref_key}"
                        add(kind, ref.get("name"), where, not ref.get("optional"))
    for i, volume in enumerate(_items(spec.get("volumes"))):
        at = f"volumes[{i}]"
        config_map = volume.get("configMap")
        if isinstance(config_map, Mapping):
            add(
                "ConfigMap",
                config_map.get("name"),
                f"{at}.configMap",
                not config_map.get("optional"),
            )
        secret = volume.get("secret")
        if isinstance(secret, Mapping):
            add("Secret", secret.get("secretName"), f"{at}.secret", not secret.get("optional"))
        claim = volume.get("persistentVolumeClaim")
        if isinstance(claim, Mapping):
            add("PersistentVolumeClaim", claim.get("claimName"), f"{at}.persistentVolumeClaim")
        projected = volume.get("projected")
        if isinstance(projected, Mapping):
            for j, source in enumerate(_items(projected.get("sources"))):
                for ref_key, kind in (("configMap", "ConfigMap"), ("secret", "Secret")):
                    ref = source.get(ref_key)
                    if isinstance(ref, Mapping):
                        where = f"{at}.projected.sources[{j}].{ref_key}"
                        add(kind, ref.get("name"), where, not ref.get("optional"))
    account = spec.get("serviceAccountName") or spec.get("serviceAccount")
    if account != "default":
        add("ServiceAccount", account, "serviceAccountName")
    for i, secret_ref in enumerate(_items(spec.get("imagePullSecrets"))):
        add("Secret", secret_ref.get("name"), f"imagePullSecrets[{i}]", required=False)
    add("Service", spec.get("subdomain"), "subdomain", required=False)
    return out


def _items(value: object) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]
