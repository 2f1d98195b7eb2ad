"""The jq runtime: gojq-compatible inputs and outputs, limits, and never hanging."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from placer.definitions.jq import (
    JqLimits,
    compile_batch,
    compile_jq,
    normalize,
    to_json_text,
)
from placer.errors import JqError

QUICK = JqLimits(time_limit=0.5)


def run(expression: str, value: object, limits: JqLimits = QUICK) -> list[object]:
    return compile_jq(expression).run(to_json_text(normalize(value)), limits=limits)


def test_input_is_normalised_like_gojq() -> None:
    value = {"b": 1.0, "a": {"z": 2, "y": [1.5, 3.0]}, 7: "seven"}
    assert to_json_text(normalize(value)) == '{"7":"seven","a":{"y":[1.5,3],"z":2},"b":1}'
    # object iteration in key order, integral floats print as integers
    assert run("[.[] | type]", {"b": 1, "a": "x"}) == [["string", "number"]]
    assert run(".b | tostring", value) == ["1"]
    assert run("to_entries | map(.key)", {"b": 1, "a": 2}) == [["a", "b"]]


def test_timestamps_become_text() -> None:
    stamp = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    assert normalize({"t": stamp, "d": dt.date(2026, 1, 2)}) == {
        "d": "2026-01-02",
        "t": "2026-01-02T03:04:05Z",
    }


def test_values_json_cannot_hold_are_refused() -> None:
    with pytest.raises(TypeError):
        normalize({"x": object()})
    with pytest.raises(ValueError):
        to_json_text(normalize({"x": float("nan")}))


def test_all_outputs_in_order_and_null_for_missing() -> None:
    assert run(".a[]", {"a": [3, 1, 2]}) == [3, 1, 2]
    assert run(".missing", {}) == [None]
    assert run(".a[]", {"a": []}) == []
    assert run("select(false)", {}) == []


def test_output_cap_is_999() -> None:
    assert len(run(".[]", list(range(999)))) == 999
    with pytest.raises(JqError, match="1000 outputs or more"):
        run(".[]", list(range(1000)))


def test_endless_generators_stop_at_the_cap() -> None:
    with pytest.raises(JqError, match="outputs or more"):
        run("repeat(1)", None)
    with pytest.raises(JqError, match="outputs or more"):
        run("def f: ., f; f", None)


@pytest.mark.parametrize(
    "expression",
    ["def f: f; f", "until(false; .)", "[range(1e15)]", "last(range(1e15))", "[repeat(1)] | 1"],
)
def test_expressions_that_never_end_fail_after_the_time_limit(expression: str) -> None:
    started = time.monotonic()
    with pytest.raises(JqError, match=r"did not finish within 0.5 s") as info:
        run(expression, None)
    elapsed = time.monotonic() - started
    assert 0.5 <= elapsed < 5
    assert info.value.expression == expression


def test_the_worker_recovers_after_a_kill() -> None:
    with pytest.raises(JqError, match="did not finish"):
        run("def f: f; f", None)
    # the same kind of expression (not proven to terminate) works again right away
    assert run("def f(n): if n > 0 then f(n - 1) else 42 end; f(5)", None) == [42]


def test_runtime_errors_name_the_location() -> None:
    with pytest.raises(JqError) as info:
        compile_jq(".a[]").run('{"a": null}', location="JobSet/x: component 'w' replicasPath")
    message = str(info.value)
    assert message.startswith("JobSet/x: component 'w' replicasPath: jq '.a[]'")
    assert "Cannot iterate over null" in message


def test_parse_errors_are_reported_with_libjq_positions() -> None:
    with pytest.raises(JqError, match=r"does not compile: syntax error.*line 1"):
        compile_jq(".a[")


def test_compiled_programs_are_cached() -> None:
    assert compile_jq(".cached") is compile_jq(".cached")
    assert compile_batch((".a", ".b")) is compile_batch((".a", ".b"))


def test_a_batch_equals_separate_runs_and_names_the_failing_expression() -> None:
    expressions = (".a", ".b[]", "def f: 1; f", "reduce .b[] as $x (0; . + $x)", ".c")
    value = to_json_text(normalize({"a": 1, "b": [1, 2], "c": None}))
    batch = compile_batch(expressions)
    assert batch.run(value) == [compile_jq(e).run(value) for e in expressions]
    with pytest.raises(JqError) as info:
        batch.run(to_json_text({"a": 1, "b": 3}), locate=lambda i: f"slot {i}")
    assert str(info.value).startswith("slot 1: jq '.b[]'")


def test_a_trailing_comment_does_not_break_the_wrapping() -> None:
    assert run(".a # the a field \\", {"a": 5}) == [5]
    assert compile_batch((".a # one", ".b # two")).run('{"a":1,"b":2}') == [[1], [2]]


def test_string_repetition_is_bounded_like_gojq() -> None:
    started = time.monotonic()
    with pytest.raises(JqError, match="cannot repeat string"):
        run('"x" * 1e12', None)
    with pytest.raises(JqError, match="cannot repeat string"):
        run(".n * .s", {"n": 3e8, "s": "x"})
    assert time.monotonic() - started < 2
    assert compile_jq('"x" * 3').risk is None  # still in-process
    assert run('"ab" * 3, 3 * "ab"', None) == ["ababab", "ababab"]


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("[(1,2) * (10,20)]", [[10, 20, 20, 40]]),
        (".a * (.b * .c)", [24]),
        ('"\\(.a * .b)"', ["6"]),
        ("{(.a * .b | tostring): [.c * 2]}", [{"6": [8]}]),
        ("{a: 1} * {b: 2}", [{"a": 1, "b": 2}]),
        (".a*.b # comment", [6]),
        ("def f: . * 2; .a | f", [4]),
        ("[.[] | . * 2]", [[4, 6, 8]]),
    ],
)
def test_guarded_multiplication_keeps_jq_semantics(expression: str, expected: object) -> None:
    value = {"a": 2, "b": 3, "c": 4}
    if expression.startswith("[.[]"):
        value = [2, 3, 4]  # type: ignore[assignment]
    assert run(expression, value) == expected
