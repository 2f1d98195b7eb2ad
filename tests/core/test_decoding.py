"""placer.decoding: the typed reads of user documents, each wrong value an error naming the
file and the field."""

from __future__ import annotations

import math
from typing import Any

import pytest

from placer.decoding import Decoder, type_name, whole_number_problem
from placer.errors import FleetConfigError, SnapshotError

SOURCE = "fleet.yaml"


@pytest.fixture
def read() -> Decoder:
    return Decoder(SnapshotError, SOURCE)


def fails(call: Any, field: str, message: str) -> SnapshotError:
    with pytest.raises(SnapshotError) as caught:
        call()
    assert caught.value.source == SOURCE
    assert caught.value.field == field
    assert message in caught.value.message
    return caught.value


@pytest.mark.parametrize(
    ("value", "name"),
    [
        (None, "null"),
        (True, "a boolean"),
        (3, "a number"),
        (1.5, "a number"),
        ("x", "a string"),
        ([], "a list"),
        ({}, "a mapping"),
    ],
)
def test_type_names(value: object, name: str) -> None:
    assert type_name(value) == name


def test_the_error_is_the_readers_own() -> None:
    with pytest.raises(FleetConfigError) as caught:
        Decoder(FleetConfigError, "f.yaml").string(5, "clusters[0].name")
    assert str(caught.value).startswith("f.yaml: clusters[0].name: must be a non-empty string")


def test_absent_reads_as_empty_or_default(read: Decoder) -> None:
    assert read.mapping(None, "a") == {}
    assert read.entries(None, "a") == []
    assert read.string(None, "a") == ""
    assert read.flag(None, "a", default=True) is True
    assert read.labels(None, "a") == {}
    assert read.resources(None, "a") == {}


def test_typed_values_come_back_typed(read: Decoder) -> None:
    assert read.entries(["x", "y"], "names") == [("names[0]", "x"), ("names[1]", "y")]
    assert read.flag(False, "ready", default=True) is False
    assert read.count(7, "count", maximum=10) == 7
    assert read.number(2, "timeout", positive=True) == 2.0
    assert read.labels({"a": "b", "n": 4, "t": True}, "labels") == {"a": "b", "n": "4", "t": "true"}
    assert read.resources({"cpu": "500m", "memory": "1Gi"}, "allocatable") == {
        "cpu": 500,
        "memory": 2**30,
    }


def test_wrong_types_name_the_field(read: Decoder) -> None:
    fails(lambda: read.mapping([1], "spec"), "spec", "must be a mapping")
    fails(lambda: read.entries({}, "clusters"), "clusters", "must be a list")
    fails(lambda: read.string("", "name", required=True), "name", "must be a non-empty string")
    fails(lambda: read.flag("yes", "c[0].ready", default=True), "c[0].ready", "true or false")
    fails(lambda: read.count(-1, "count", maximum=10), "count", "from 0 to 10, got -1")
    fails(lambda: read.count(True, "count", maximum=10), "count", "it is a boolean")
    fails(lambda: read.labels({"a": [1]}, "labels"), "labels", "entry 'a' must map a string")
    err = fails(lambda: read.resources({"cpu": "lots"}, "alloc"), "alloc.cpu", "'lots'")
    assert err.hint is not None and "500m" in err.hint


@pytest.mark.parametrize("value", [0, -1, math.inf, math.nan, "3", None, True])
def test_positive_numbers(read: Decoder, value: object) -> None:
    fails(
        lambda: read.number(value, "timeout", positive=True, unit="seconds"),
        "timeout",
        "must be a positive number of seconds",
    )


def test_unknown_fields_and_headers(read: Decoder) -> None:
    fails(lambda: read.only({"name": 1, "colour": 2}, ("name",), "spec"), "spec.colour", "'colour'")
    read.only({"name": 1}, ("name",), "spec")
    fails(
        lambda: read.header({"kind": "Fleet", "apiVersion": "v1"}, "v1", "FleetSnapshot"),
        "kind",
        "expected 'FleetSnapshot'",
    )
    fails(
        lambda: read.header({"kind": "K", "apiVersion": "v2"}, "v1", "K"),
        "apiVersion",
        "expected 'v1'",
    )


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        (3, None),
        ("3", "is the string '3', not a number: write 3 without quotes"),
        (" 12 ", "is the string ' 12 ', not a number: write 12 without quotes"),
        ("3x", "is the string '3x', not a whole number"),
        (2.5, "is 2.5, not a whole number"),
        (True, "is a boolean, not a whole number"),
        (None, "is null, not a whole number"),
    ],
)
def test_whole_number_problem_says_what_to_write(value: object, problem: str | None) -> None:
    assert whole_number_problem(value) == problem


def test_a_quoted_count_is_an_error_saying_what_to_write(read: Decoder) -> None:
    fails(
        lambda: read.count("4", "nodeGroups[0].count", maximum=10),
        "nodeGroups[0].count",
        "must be a whole number from 0 to 10; it is the string '4', not a number: write 4 "
        "without quotes",
    )
