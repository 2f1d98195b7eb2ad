"""OpenAPI v2 in protobuf: the encoding kubectl asks ``/openapi/v2`` for.

kubectl (client-go's ``discovery.OpenAPISchema``) requests ``/openapi/v2`` with ``Accept:
application/com.github.proto-openapi.spec.v2@v1.0+protobuf`` and decodes the body as the
gnostic ``openapi.v2.Document`` message; JSON in reply fails with "failed to download openapi".
:func:`encode_document` writes that message from the JSON form of the document (the field
numbers are gnostic's ``OpenAPIv2.proto``), for the parts of OpenAPI v2 this server's documents
use: info, paths with their operations, parameters and responses, definitions with their
schemas, and vendor extensions (``x-...``, carried as YAML text in ``NamedAny``, which is how
kube-openapi reads ``x-kubernetes-group-version-kind`` back). Anything else is an error, so the
document builder and the encoder cannot drift apart silently. Plain protobuf wire format: no
generated code, no dependency.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

import yaml

__all__ = ["PROTOBUF_MEDIA_TYPES", "encode_document"]

#: the Accept values that ask for this encoding; the answer's Content-Type is the first (the
#: second, kubectl's spelling, is no valid media type for Go's ``mime`` parser).
PROTOBUF_MEDIA_TYPES = (
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf",
    "application/com.github.proto-openapi.spec.v2@v1.0+protobuf",
)


# -- wire format --------------------------------------------------------------------------------


def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _varint(len(data)) + data


def _string(number: int, text: str) -> bytes:
    return _bytes(number, text.encode()) if text else b""


def _bool(number: int, value: bool) -> bytes:
    return _key(number, 0) + _varint(1) if value else b""


def _int(number: int, value: int) -> bytes:
    return _key(number, 0) + _varint(value) if value else b""


def _double(number: int, value: float) -> bytes:
    return _key(number, 1) + struct.pack("<d", value) if value else b""


# -- messages -----------------------------------------------------------------------------------


def _any(value: Any) -> bytes:
    """gnostic ``Any``: the value as YAML text (field 2)."""
    return _string(2, yaml.safe_dump(value, default_flow_style=False, sort_keys=False))


def _named_any(number: int, name: str, value: Any) -> bytes:
    return _bytes(number, _string(1, name) + _bytes(2, _any(value)))


def _extensions(number: int, doc: Mapping[str, Any]) -> bytes:
    return b"".join(_named_any(number, k, v) for k, v in doc.items() if k.startswith("x-"))


def _check(doc: Mapping[str, Any], known: set[str], what: str) -> None:
    unknown = [k for k in doc if k not in known and not k.startswith("x-")]
    if unknown:
        raise ValueError(f"OpenAPI v2 {what}: cannot encode {', '.join(sorted(unknown))}")


_SCHEMA_KEYS = {
    "$ref",
    "format",
    "description",
    "default",
    "maximum",
    "minimum",
    "maxLength",
    "minLength",
    "pattern",
    "maxItems",
    "minItems",
    "required",
    "enum",
    "additionalProperties",
    "type",
    "items",
    "allOf",
    "properties",
    "readOnly",
}


def _schema(doc: Mapping[str, Any]) -> bytes:
    _check(doc, _SCHEMA_KEYS, "schema")
    out = _string(1, doc.get("$ref", "")) + _string(2, doc.get("format", ""))
    out += _string(4, doc.get("description", ""))
    if "default" in doc:
        out += _bytes(5, _any(doc["default"]))
    out += _double(7, float(doc.get("maximum", 0))) + _double(9, float(doc.get("minimum", 0)))
    out += _int(11, int(doc.get("maxLength", 0))) + _int(12, int(doc.get("minLength", 0)))
    out += _string(13, doc.get("pattern", ""))
    out += _int(14, int(doc.get("maxItems", 0))) + _int(15, int(doc.get("minItems", 0)))
    out += b"".join(_string(19, name) for name in doc.get("required", ()))
    out += b"".join(_bytes(20, _any(value)) for value in doc.get("enum", ()))
    extra = doc.get("additionalProperties")
    if isinstance(extra, bool):
        out += _bytes(21, _key(2, 0) + _varint(int(extra)))
    elif isinstance(extra, Mapping):
        out += _bytes(21, _bytes(1, _schema(extra)))
    kinds = doc.get("type")
    if kinds:
        out += _bytes(
            22, b"".join(_string(1, t) for t in ([kinds] if isinstance(kinds, str) else kinds))
        )
    items = doc.get("items")
    if isinstance(items, Mapping):
        out += _bytes(23, _bytes(1, _schema(items)))
    out += b"".join(_bytes(24, _schema(part)) for part in doc.get("allOf", ()))
    properties = doc.get("properties")
    if properties is not None:
        out += _bytes(
            25,
            b"".join(
                _bytes(1, _string(1, name) + _bytes(2, _schema(sub)))
                for name, sub in properties.items()
            ),
        )
    out += _bool(27, bool(doc.get("readOnly", False)))
    return out + _extensions(31, doc)


def _parameter(doc: Mapping[str, Any]) -> bytes:
    """A ``ParametersItem``: a ``$ref`` (JsonReference) or a body, query or path parameter."""
    if "$ref" in doc:
        return _bytes(2, _string(1, doc["$ref"]))
    where = doc.get("in", "")
    if where == "body":
        _check(doc, {"name", "in", "description", "required", "schema"}, "body parameter")
        body = _string(1, doc.get("description", "")) + _string(2, doc.get("name", ""))
        body += _string(3, "body") + _bool(4, bool(doc.get("required", False)))
        body += _bytes(5, _schema(doc.get("schema", {})))
        return _bytes(1, _bytes(1, body))
    _check(doc, {"name", "in", "description", "required", "type", "uniqueItems"}, "parameter")
    common = _bool(1, bool(doc.get("required", False))) + _string(2, where)
    common += _string(3, doc.get("description", "")) + _string(4, doc.get("name", ""))
    if where == "query":
        sub = _bytes(
            3, common + _string(6, doc.get("type", "")) + _bool(20, bool(doc.get("uniqueItems")))
        )
    elif where == "path":
        sub = _bytes(4, common + _string(5, doc.get("type", "")))
    else:
        raise ValueError(f"OpenAPI v2 parameter: cannot encode 'in: {where}'")
    return _bytes(1, _bytes(2, sub))


def _operation(doc: Mapping[str, Any]) -> bytes:
    _check(
        doc,
        {
            "tags",
            "description",
            "operationId",
            "produces",
            "consumes",
            "parameters",
            "responses",
            "schemes",
        },
        "operation",
    )
    out = b"".join(_string(1, tag) for tag in doc.get("tags", ()))
    out += _string(3, doc.get("description", "")) + _string(5, doc.get("operationId", ""))
    out += b"".join(_string(6, media) for media in doc.get("produces", ()))
    out += b"".join(_string(7, media) for media in doc.get("consumes", ()))
    out += b"".join(_bytes(8, _parameter(p)) for p in doc.get("parameters", ()))
    responses = b""
    for code, response in (doc.get("responses") or {}).items():
        _check(response, {"description", "schema"}, "response")
        body = _string(1, response.get("description", ""))
        if "schema" in response:
            body += _bytes(2, _bytes(1, _schema(response["schema"])))
        responses += _bytes(1, _string(1, str(code)) + _bytes(2, _bytes(1, body)))
    if responses:
        out += _bytes(9, responses)
    out += b"".join(_string(10, scheme) for scheme in doc.get("schemes", ()))
    return out + _extensions(13, doc)


_METHODS: Mapping[str, int] = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _path_item(doc: Mapping[str, Any]) -> bytes:
    _check(doc, {*_METHODS, "parameters"}, "path item")
    out = b"".join(_bytes(n, _operation(doc[m])) for m, n in _METHODS.items() if m in doc)
    out += b"".join(_bytes(9, _parameter(p)) for p in doc.get("parameters", ()))
    return out + _extensions(10, doc)


def encode_document(doc: Mapping[str, Any]) -> bytes:
    """The gnostic ``openapi.v2.Document`` of an OpenAPI v2 JSON document."""
    _check(doc, {"swagger", "info", "paths", "definitions"}, "document")
    info = doc.get("info") or {}
    out = _string(1, doc.get("swagger", "2.0"))
    out += _bytes(2, _string(1, info.get("title", "")) + _string(2, info.get("version", "")))
    out += _bytes(
        8,
        b"".join(
            _bytes(2, _string(1, name) + _bytes(2, _path_item(item)))
            for name, item in (doc.get("paths") or {}).items()
        ),
    )
    out += _bytes(
        9,
        b"".join(
            _bytes(1, _string(1, name) + _bytes(2, _schema(schema)))
            for name, schema in (doc.get("definitions") or {}).items()
        ),
    )
    return out
