"""Hostile definitions (issue 12, items 3 and 4): no expression may exhaust the process or read
outside its object, and jq's messages are bounded before they travel anywhere.

Every case goes through the ways users meet it: ``placer validate`` on a file, validation of a
decoded definition (what the controller does with hub Kartas: tests/controller/
test_hostile_kartas.py), and the jq runtime itself (defence in depth when validation is skipped).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from placer.cli import main
from placer.definitions import Catalog, definition_from_dict, validate_definition
from placer.definitions.jq import (
    MAX_MESSAGE_CHARS,
    JqLimits,
    compile_jq,
    normalize,
    to_json_text,
)
from placer.definitions.jqcost import cost_of
from placer.definitions.jqsyntax import OUTSIDE_BUILTINS, parse
from placer.definitions.validate import jq_fields
from placer.errors import JqError

FIELD = (
    "spec.structureDefinition.rootComponent.statusDefinition.statusMappings.running[0]"
    ".byExpression.expression"
)

#: Expressions whose cost is exponential in their own length (issue 12, item 3).
EXPONENTIAL = {
    "string doubling": '"ab" | ' + " | ".join([".+."] * 34),
    "array doubling": "[.] | " + " | ".join(["[.,.]"] * 34),
    "output doubling": "[" + " | ".join(["(.,.)"] * 34) + "] | length",
    "escaping": " | ".join(["tojson"] * 30),
    "nested functions": "def f0: .+.; "
    + " ".join(f"def f{i}: f{i - 1} | f{i - 1};" for i in range(1, 25))
    + " f24",
    "object doubling": "{a: .} | " + " | ".join(["{a: ., b: .}"] * 34),
    "interpolation": " | ".join(['"\\(.)\\(.)"'] * 34),
    "comparison of doubled": "(" + " | ".join([".+."] * 34) + ") == 1",
}

#: Every way of reaching outside the object, with a word of the reason validation gives.
OUTSIDE = {
    "error($ENV.AWS_SECRET_ACCESS_KEY)": "environment",
    "$ENV.HOME": "environment",
    "{$ENV}": "environment",
    "env.HOME": "environment",
    '"\\(env)"': "environment",
    "input": "inputs",
    "[inputs]": "inputs",
    "input_filename": "file",
    "input_line_number": "position",
    "$__loc__": "location",
    "{$__loc__}": "location",
    ".a | debug": "standard error",
    '.a | debug("x")': "standard error",
    ".a | stderr": "standard error",
    "halt": "stops",
    'halt_error("x")': "stops",
    "now": "clock",
    "now | localtime": "time zone",
    'strflocaltime("%H")': "time zone",
    "get_search_list": "search path",
    "get_jq_origin": "installed",
    "get_prog_origin": "loaded",
    "modulemeta": "modules",
    'import "a" as a; .': "modules",
    'include "a"; .': "modules",
    "def f: env; f": "environment",
    "[.[] | select(. == $ENV.X)]": "environment",
}


def _problems(karta_with: Callable[..., dict[str, Any]], expression: str) -> list[str]:
    return validate_definition(definition_from_dict(karta_with(expression), source="k.yaml"))


@pytest.mark.parametrize("name", sorted(EXPONENTIAL))
def test_validation_rejects_exponential_cost(
    karta_with: Callable[..., dict[str, Any]], name: str
) -> None:
    expression = EXPONENTIAL[name]
    problems = _problems(karta_with, expression)
    assert len(problems) == 1, problems
    (problem,) = problems
    assert problem.startswith(f"component 'widget' {FIELD}: JQ expression")
    assert "can grow to" in problem and "exhaust the memory or time of placer" in problem


@pytest.mark.parametrize("name", sorted(EXPONENTIAL))
def test_placer_validate_fails_on_exponential_cost(
    karta_with: Callable[..., dict[str, Any]],
    write_yaml: Callable[..., Any],
    capsys: pytest.CaptureFixture[str],
    name: str,
) -> None:
    path = write_yaml("hostile.yaml", karta_with(EXPONENTIAL[name]))
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    assert code != 0
    text = out.out + out.err
    assert "hostile" in text and "can grow to" in text and "Traceback" not in text


@pytest.mark.parametrize("name", sorted(EXPONENTIAL))
def test_exponential_expressions_never_run_in_process(name: str) -> None:
    """Even unvalidated, such an expression runs only in the capped worker, which is stopped."""
    program = compile_jq(EXPONENTIAL[name])
    assert not program.in_process_for('"ab"')
    started = time.monotonic()
    with pytest.raises(JqError) as raised:
        program.run('"ab"', limits=JqLimits(time_limit=5.0))
    assert time.monotonic() - started < 60  # the limit, plus a busy machine's slack
    # stopped by the worker's time limit, or by its memory cap first (libjq's allocation fails
    # inside the worker, which answers "out of memory"): which comes first depends on the
    # machine and on what the worker ran before (it failed after tests/definitions)
    assert any(
        stop in str(raised.value) for stop in ("stopped", "did not finish", "out of memory")
    ), raised.value
    # the worker is replaced: the next evaluation works
    assert compile_jq("def f: .a; [f] | until(true; .)").run('{"a": 1}') == [[1]]


def test_the_builtin_catalog_is_within_the_bounds() -> None:
    """Every built-in expression has a bound, far below the limits (not rejected)."""
    catalog = Catalog.builtin()
    expressions = {e for d in catalog.definitions for _, e in jq_fields(d)}
    for expression in expressions:
        bound = cost_of(parse(expression))
        assert bound.cost is not None, (expression, bound.reason)
        assert not bound.excessive


def test_an_untrusted_copy_runs_in_process_on_small_objects_only() -> None:
    """The static bound decides per input: a quadratic expression on a huge object goes to the
    worker (and gives the same answer there)."""
    expression = "[.items[] as $a | .items[] | select(. == $a)] | length"
    program = compile_jq(expression)
    small = to_json_text(normalize({"items": list(range(10))}))
    large = to_json_text(normalize({"items": list(range(400))}))
    assert program.in_process_for(small)
    assert not program.in_process_for(large)
    assert program.run(small) == [10]
    assert program.run(large) == [400]


@pytest.mark.parametrize("expression", sorted(OUTSIDE))
def test_validation_rejects_reaching_outside_the_object(
    karta_with: Callable[..., dict[str, Any]], expression: str
) -> None:
    problems = _problems(karta_with, expression)
    assert problems, expression
    assert any(OUTSIDE[expression] in p and "is not allowed" in p for p in problems), problems
    assert all(p.startswith(f"component 'widget' {FIELD}") for p in problems)


@pytest.mark.parametrize("expression", sorted(OUTSIDE))
def test_expressions_reaching_outside_never_run(
    expression: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value-never-shown")
    try:
        program = compile_jq(expression)
    except JqError:
        return  # libjq does not compile it at all (modules): never run either
    with pytest.raises(JqError) as raised:
        program.run('{"a": 1}')
    assert "refused" in str(raised.value)
    assert "s3cr3t" not in str(raised.value)


def test_every_listed_builtin_is_a_real_jq_builtin() -> None:
    """The list names jq's own builtins (a typo would leave the real one allowed)."""
    import jq

    builtins = {b.split("/")[0] for b in jq.compile("builtins").input_value(None).first()}
    assert set(OUTSIDE_BUILTINS) <= builtins


def test_look_alikes_are_allowed(karta_with: Callable[..., dict[str, Any]]) -> None:
    for expression in (
        '.spec.env // "x"',
        ".env",
        '"$ENV and now are words"',
        '.metadata.labels["now"]',
        "{env: .spec.env, now: 1} | .now",
        ". as $environment | $environment",
    ):
        assert _problems(karta_with, expression) == [], expression


def test_run_time_messages_are_bounded_and_printable() -> None:
    secretish = "A" * 5000
    program = compile_jq(f'error("{secretish}\\u0007\\nsecond line")')
    with pytest.raises(JqError) as raised:
        program.run("{}")
    message = str(raised.value)
    assert "jq said: " in message
    said = message.split("jq said: ", 1)[1].splitlines()[0]
    assert len(said) <= MAX_MESSAGE_CHARS + 60
    assert "more characters not shown" in said
    assert "second line" not in said and "\u0007" not in said


def test_data_in_messages_is_cut(karta_with: Callable[..., dict[str, Any]]) -> None:
    """``error(.spec.token)``: the object's own data is cut short in the message."""
    program = compile_jq("error(.spec.token)")
    token = "tok-" + "x" * 400
    with pytest.raises(JqError) as raised:
        program.run(to_json_text({"spec": {"token": token}}))
    assert token not in str(raised.value)


@pytest.mark.parametrize(
    "expression",
    ["(" * 3000 + "." + ")" * 3000, "[" * 3000 + "." + "]" * 3000, " | ".join([".a"] * 20000)],
    ids=["parentheses", "brackets", "pipes"],
)
def test_deeply_nested_expressions_are_problems_not_crashes(
    karta_with: Callable[..., dict[str, Any]], expression: str
) -> None:
    """The analysis is recursive: a hostile nesting is a validation problem (hub Kartas too)."""
    from placer.controller.hubconfig import definitions_from_hub

    problems = _problems(karta_with, expression)
    assert any("nested too deeply" in p for p in problems), problems
    hub = definitions_from_hub(Catalog.builtin(), [karta_with(expression, name="deep")])
    assert "deep" in hub.problems and "nested too deeply" in hub.problems["deep"]
