"""Patch algorithms: JSON merge patch, JSON patch, strategic merge patch and apply.

* **Merge patch** (RFC 7386, ``application/merge-patch+json``): maps merge, ``null`` deletes,
  everything else (lists included) replaces.
* **JSON patch** (RFC 6902, ``application/json-patch+json``) through the ``jsonpatch`` library.
* **Strategic merge patch** (``application/strategic-merge-patch+json``), built-in kinds only:
  lists that Kubernetes declares with a patch merge key (containers and volumes by ``name``,
  ports by ``containerPort``/``port``, conditions by ``type``, ...) merge item by item, and
  ``metadata.finalizers`` merges as a set; the directives ``$patch: replace|delete|merge``,
  ``$retainKeys``, ``$deleteFromPrimitiveList/<f>`` are honoured and ``$setElementOrder/<f>`` is
  accepted and ignored. The merge keys are known by field name, not from the OpenAPI schema, which
  covers the fields clients patch in practice.
* **Apply** (server-side apply, ``application/apply-patch+yaml``): see :func:`apply_config`.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

import jsonpatch

from placer.testing._status import StatusError

__all__ = [
    "apply_config",
    "field_paths",
    "fields_v1",
    "json_patch",
    "merge_patch",
    "parse_fields_v1",
    "strategic_merge_patch",
]

JsonObj = dict[str, Any]
Path = tuple[str, ...]

# Lists that built-in types merge by key (field name -> merge key).
_MERGE_KEYS: Mapping[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "resourceClaims": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "volumeClaimTemplates": "metadata.name",
}
# Primitive lists merged as sets.
_SET_LISTS = frozenset({"finalizers"})


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch; returns a new value, inputs untouched."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result: JsonObj = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def json_patch(target: JsonObj, operations: Any) -> JsonObj:
    """RFC 6902 JSON patch.

    Raises:
        StatusError: 400 when the body is not a list of operations, 422 when an operation does not
            apply (missing path, failed ``test``), as the real server answers.
    """
    if not isinstance(operations, list):
        raise StatusError(
            400, "the body of the request was not a JSON patch: expected a list of operations"
        )
    try:
        result = jsonpatch.JsonPatch(operations).apply(target, in_place=False)
    except jsonpatch.JsonPatchTestFailed as exc:
        raise StatusError(
            422, f"the server rejected our request due to an error in our request: {exc}"
        ) from None
    except (
        jsonpatch.JsonPatchException,
        jsonpatch.JsonPointerException,
        KeyError,
        IndexError,
        TypeError,
    ) as exc:
        raise StatusError(
            422, f"the server rejected our request due to an error in our request: {exc}"
        ) from None
    if not isinstance(result, dict):
        raise StatusError(422, "the patch replaced the whole object with a non-object")
    return result


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        sample = next((i for i in items if isinstance(i, dict)), {})
        return "containerPort" if "containerPort" in sample else "port"
    return _MERGE_KEYS.get(field)


def _key_of(item: Any, key: str) -> Any:
    node = item
    for part in key.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    """Strategic merge patch for built-in kinds; returns a new value, inputs untouched."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    body = {k: v for k, v in patch.items() if k != "$patch"}
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in body.items() if not k.startswith("$")}
    result: JsonObj = dict(target) if isinstance(target, dict) else {}
    retain = body.pop("$retainKeys", None)
    for key, value in body.items():
        if key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            if isinstance(result.get(field), list) and isinstance(value, list):
                result[field] = [v for v in result[field] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, dict) and "$patch" in i)]
    existing = current if isinstance(current, list) else []
    if field in _SET_LISTS:
        merged = list(existing)
        merged.extend(v for v in patch if v not in merged)
        return merged
    key = _merge_key(field, patch)
    if key is None or not all(isinstance(i, dict) for i in patch):
        return copy.deepcopy(patch)
    merged = list(existing)
    for item in patch:
        k = _key_of(item, key)
        index = next(
            (n for n, cur in enumerate(merged) if isinstance(cur, dict) and _key_of(cur, key) == k),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                del merged[index]
        elif index is None:
            merged.append(strategic_merge_patch({}, item))
        else:
            merged[index] = strategic_merge_patch(merged[index], item)
    return merged


# -- server-side apply -------------------------------------------------------------------------


def _item_key(item: Mapping[str, Any], key: str) -> str:
    return "k:" + json.dumps({key.split(".")[-1]: _key_of(item, key)}, separators=(",", ":"))


def field_paths(config: Mapping[str, Any], *, keyed_lists: bool) -> set[Path]:
    """Leaf field paths set by an applied configuration (its "field set").

    Maps recurse; lists with a merge key recurse per item (``k:{"name":"x"}``) when
    ``keyed_lists`` (built-in kinds), otherwise a list is one atomic leaf. ``apiVersion``,
    ``kind``, ``metadata.name`` and ``metadata.namespace`` identify the object and own nothing.
    """
    paths: set[Path] = set()

    def walk(node: Any, path: Path) -> None:
        if isinstance(node, dict) and node:
            for k, v in node.items():
                walk(v, (*path, f"f:{k}"))
            return
        if isinstance(node, list) and keyed_lists and path:
            field = path[-1][2:]
            key = _merge_key(field, node)
            if key and node and all(isinstance(i, dict) for i in node):
                for item in node:
                    item_path = (*path, _item_key(item, key))
                    paths.add((*item_path, "."))
                    walk(item, item_path)
                return
        paths.add(path)

    for k, v in config.items():
        if k in {"apiVersion", "kind"}:
            continue
        if k == "metadata" and isinstance(v, dict):
            for mk, mv in v.items():
                if mk not in {"name", "namespace", "resourceVersion", "managedFields"}:
                    walk(mv, ("f:metadata", f"f:{mk}"))
            continue
        walk(v, (f"f:{k}",))
    return paths


def fields_v1(paths: set[Path]) -> JsonObj:
    """Nest a field set into the ``fieldsV1`` format of ``metadata.managedFields``."""
    root: JsonObj = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(part, {})
    return root


def parse_fields_v1(doc: Mapping[str, Any]) -> set[Path]:
    """Inverse of :func:`fields_v1`."""
    paths: set[Path] = set()

    def walk(node: Mapping[str, Any], path: Path) -> None:
        if not node:
            paths.add(path)
            return
        for k, v in node.items():
            walk(v if isinstance(v, Mapping) else {}, (*path, k))

    walk(doc, ())
    return paths


def _steps(path: Path) -> Iterator[tuple[str, str]]:
    for part in path:
        yield part[:2], part[2:]


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """``(found, value)`` at a field-set path inside ``obj``."""
    node = obj
    for kind, name in _steps(path):
        if kind == "f:":
            if not isinstance(node, dict) or name not in node:
                return False, None
            node = node[name]
        elif kind == "k:":
            want = json.loads(name)
            ((key, val),) = want.items()
            if not isinstance(node, list):
                return False, None
            match = next((i for i in node if isinstance(i, dict) and i.get(key) == val), None)
            if match is None:
                return False, None
            node = match
        elif kind == ".":
            return True, node
    return True, node


def remove_at(obj: Any, path: Path) -> None:
    """Delete the field (or keyed list item) at ``path`` in place, if present; a keyed list
    left empty by the deletion goes too."""
    parent: Any = obj
    holder: Any = None  # the map holding ``parent`` when ``parent`` is a list
    holder_key = ""
    steps = list(_steps(path))
    if steps and steps[-1][0] == ".":
        steps = steps[:-1]
    for n, (kind, name) in enumerate(steps):
        last = n == len(steps) - 1
        if kind == "f:":
            if not isinstance(parent, dict) or name not in parent:
                return
            if last:
                del parent[name]
                return
            holder, holder_key = parent, name
            parent = parent[name]
        elif kind == "k:":
            ((key, val),) = json.loads(name).items()
            if not isinstance(parent, list):
                return
            index = next(
                (i for i, it in enumerate(parent) if isinstance(it, dict) and it.get(key) == val),
                None,
            )
            if index is None:
                return
            if last:
                del parent[index]
                if not parent and isinstance(holder, dict):
                    del holder[holder_key]
                return
            holder = None
            parent = parent[index]


def apply_merge(live: Any, config: Any, *, keyed_lists: bool, field: str = "") -> Any:
    """Merge an applied configuration into a live value (maps merge, keyed lists merge by key)."""
    if isinstance(config, dict):
        result: JsonObj = dict(live) if isinstance(live, dict) else {}
        for k, v in config.items():
            result[k] = apply_merge(result.get(k), v, keyed_lists=keyed_lists, field=k)
        return result
    if isinstance(config, list) and keyed_lists:
        key = _merge_key(field, config)
        if key and isinstance(live, list) and all(isinstance(i, dict) for i in config):
            merged = list(live)
            for item in config:
                k = _key_of(item, key)
                index = next(
                    (
                        n
                        for n, c in enumerate(merged)
                        if isinstance(c, dict) and _key_of(c, key) == k
                    ),
                    None,
                )
                if index is None:
                    merged.append(copy.deepcopy(item))
                else:
                    merged[index] = apply_merge(merged[index], item, keyed_lists=True)
            return merged
    return copy.deepcopy(config)


def _path_text(path: Path) -> str:
    out = ""
    for kind, name in _steps(path):
        if kind == "f:":
            out += f".{name}"
        elif kind == "k:":
            out += f"[{name.replace(':', '=').strip('{}')}]"
    return out


def apply_config(
    live: JsonObj | None,
    config: JsonObj,
    *,
    manager: str,
    api_version: str,
    force: bool,
    keyed_lists: bool,
    subresource: str | None,
    now: str,
) -> JsonObj:
    """Server-side apply of ``config`` by ``manager`` onto ``live`` (``None``: create).

    What is modelled: each ``Apply`` manager owns the field set of its last applied
    configuration, recorded in ``metadata.managedFields`` (``fieldsV1``). Applying a value that
    differs from the live value of a field owned by another ``Apply`` manager is a 409 Conflict
    (``FieldManagerConflict`` causes naming the field), unless ``force``, which moves ownership.
    Fields a manager applied before and omits now are removed when no other manager owns them.
    Values merge into the live object: maps field by field, built-in keyed lists item by item,
    other lists atomically. Not modelled: ownership of ``Update`` (non-apply) writes, ``listType``
    /``mapType`` schema markers of CRDs, and granular set-lists.

    Returns:
        The new object (``live`` is not modified).

    Raises:
        StatusError: 409 Conflict on an ownership conflict.
    """
    base: JsonObj = copy.deepcopy(live) if live is not None else {}
    entries: list[JsonObj] = [
        dict(e)
        for e in (base.get("metadata", {}).get("managedFields") or [])
        if isinstance(e, dict)
    ]
    new_paths = field_paths(config, keyed_lists=keyed_lists)
    owners: dict[int, set[Path]] = {}
    mine: JsonObj | None = None
    for n, entry in enumerate(entries):
        if (
            entry.get("manager") == manager
            and entry.get("operation") == "Apply"
            and entry.get("subresource") == subresource
        ):
            mine = entry
        elif entry.get("operation") == "Apply":
            owners[n] = parse_fields_v1(entry.get("fieldsV1") or {})
    conflicts: list[tuple[str, Path]] = []
    for path in sorted(new_paths):
        if path[-1] == ".":
            continue  # a keyed list item's own entry: shared by everyone who sets its fields
        for n, owned in owners.items():
            if path in owned:
                found, current = value_at(base, path)
                _, applied = value_at(config, path)
                if found and current != applied:
                    if force:
                        owned.discard(path)
                    else:
                        conflicts.append((str(entries[n].get("manager")), path))
    if conflicts:
        causes = [
            {
                "reason": "FieldManagerConflict",
                "message": f'conflict with "{who}"',
                "field": _path_text(p),
            }
            for who, p in conflicts
        ]
        lines = "\n".join(f'- conflict with "{who}": {_path_text(p)}' for who, p in conflicts)
        raise StatusError(
            409,
            f"Apply failed with {len(conflicts)} conflict{'s' if len(conflicts) > 1 else ''}: "
            + lines,
            reason="Conflict",
            details={"causes": causes},
        )
    old_paths = parse_fields_v1(mine.get("fieldsV1") or {}) if mine else set()
    others = set().union(*owners.values()) if owners else set()
    dropped = old_paths - new_paths - others
    # whole keyed list items first (their key fields are among their children), then leaves
    for path in sorted(dropped, key=lambda p: (p[-1] != ".", -len(p))):
        remove_at(base, path)
    merged = apply_merge(base, config, keyed_lists=keyed_lists)
    assert isinstance(merged, dict)
    kept: list[JsonObj] = []
    for n, entry in enumerate(entries):
        if entry is mine:
            continue
        if n in owners:
            if not owners[n]:
                continue
            entry["fieldsV1"] = fields_v1(owners[n])
        kept.append(entry)
    record: JsonObj = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(new_paths),
    }
    if mine is not None and mine.get("fieldsV1") == record["fieldsV1"]:
        record["time"] = mine.get("time", now)
    if subresource:
        record["subresource"] = subresource
    kept.append(record)
    merged.setdefault("metadata", {})["managedFields"] = kept
    return merged
