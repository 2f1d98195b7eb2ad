"""placer's jq parser: it accepts what libjq accepts, and its checks see through every construct."""

from __future__ import annotations

import jq
import pytest

from placer.definitions.jqsyntax import (
    JqSyntaxError,
    parse,
    safety_violations,
    termination_risk,
    value_paths,
)

# Valid jq covering the grammar: paths, optional access, slices, literals, string
# interpolation and formats, object construction (all key forms), reduce/foreach/if/try/label,
# destructuring (including ?//), definitions with filter and $ parameters, comments.
VALID = [
    ".",
    ".a.b.c",
    '.a["b"].c',
    '.["a"]?',
    ".a.[0]",
    '."a b"',
    '.a."b"',
    ".[]?",
    ".a[]?.b",
    ".a[1:2]",
    ".[:2]",
    ".[1:]",
    ".[-1]",
    ".e0",
    ".5",
    "1.",
    "1e3",
    "-1",
    "- 1 - 1",
    ".a-1",
    "1 - -1",
    "-.a",
    "[1][0]",
    '"abc" | .[1:]',
    "$__loc__",
    "$__loc__.file",
    "{if: 1}",
    '{"a"}',
    '{"a\\(1)": 2}',
    "{(.a): 1}",
    "{(1,2|tostring): 3}",
    "{a: (1,2)}",
    "{a: 1 + 2}",
    "{a: .b | .c}",
    "{a: -1}",
    "{a: 1,}",
    "{a: try 1}",
    "{a: if . then 1 else 2 end}",
    "{a: reduce .[] as $x (0; .)}",
    '{"k\\(.a)"}',
    '@base64 "x\\(.)"',
    "@json",
    '@sh "echo \\(.)"',
    '"\\u00e9"',
    '"\\(1 + 2)"',
    '"a" as $x | "b\\($x + "c\\(1)")"',
    "try error catch .",
    "try (1/0) catch .",
    'try error("x") catch . + 1',
    "try 1",
    "label $f | break $f",
    "label $out | foreach .[] as $item (0; .+1; if . > 2 then ., break $out else empty end)",
    "reduce .[] as $x (0; . + $x)",
    "reduce .[] as [$a,$b] (0; .)",
    "foreach .[] as $x (0; .+1; [$x,.])",
    "if . then 1 end",
    "if 1 then 2 elif 3 then 4 else 5 end",
    "if true then 1 elif false then 2 end",
    ". as [$a, {b: $c}] ?// $a | 1",
    ".[] as {a: $x} ?// [$x] | $x",
    ".a as {$b, c: [$d]} | 1",
    "{a:1} as {a:$x} | $x",
    ". as $if | $if",
    "1 + . as $x | $x",
    "1 as $x | 2 as $y | [$x,$y]",
    "def f($a; b): $a + b; f(1; 2)",
    "def f: def g: 3; g; f",
    "def f(g): g | g; f(.+1)",
    "def a: 1; def b: a + 1; b",
    ".. == 1",
    "..|numbers",
    ".a = 1 // 2",
    ".a |= 1",
    ".a //= 1",
    "(.a, .b) = 1",
    "1 # comment \\\n + 1",
    "not",
    ".a | not",
    "true and false or null",
    "limit(3;.[])",
    "[.[] | select(. > 1)]",
    "path(.a[0].b)",
    ".a? // 1",
    "$ENV.PATH",
]

INVALID = [
    ".a[",
    "{a:}",
    "{a b}",
    "if . then 1",
    "reduce . as $x (0)",
    ". as $x",
    "foo(",
    ")",
    '"abc',
    ".a | | .b",
    "1 +",
    "def f: 1",
    "$",
    "@",
    "[1,2",
    "..a",
    '"\\x"',
    ".a?//1",  # the lexer sees the destructuring alternative `?//`
    "",
]


@pytest.mark.parametrize("text", VALID)
def test_accepts_valid_jq(text: str) -> None:
    jq.compile(text)  # libjq agrees it is valid
    parse(text)


@pytest.mark.parametrize("text", INVALID)
def test_rejects_what_libjq_rejects(text: str) -> None:
    if text:
        with pytest.raises(ValueError):
            jq.compile(text)
    with pytest.raises(JqSyntaxError):
        parse(text)


def test_syntax_errors_have_positions() -> None:
    with pytest.raises(JqSyntaxError) as info:
        parse(".a | {b: }")
    assert info.value.position == 9


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("del(.a)", "del function is not allowed"),
        ("range(3)", "function 'range' may produce excessive output"),
        ("[paths]", "function 'paths' may produce excessive output"),
        ("recurse(.a)", "function 'recurse' may produce excessive output"),
        ("walk(.)", "function 'walk' may produce excessive output"),
        ("repeat(.)", "function 'repeat' may produce excessive output"),
        ("..", "recursive descent operator '..' is not allowed"),
        (".a = 1", "modifying operator '=' is not allowed"),
        (".a |= 1", "modifying operator '|=' is not allowed"),
        (".a += 1", "modifying operator '+=' is not allowed"),
        (".a -= 1", "modifying operator '-=' is not allowed"),
        (".a *= 1", "modifying operator '*=' is not allowed"),
        (".a /= 1", "modifying operator '/=' is not allowed"),
        (".a %= 1", "modifying operator '%=' is not allowed"),
        (".a //= 1", "modifying operator '//=' is not allowed"),
        # hidden inside every construct
        ("def f: del(.x); f", "del function"),
        ('"\\(range(3))"', "function 'range'"),
        ("{(.. | tostring): 1}", "'..'"),
        ("if true then 1 else range(2) end", "'range'"),
        ("try (.a = 1) catch 0", "'='"),
        ("reduce range(3) as $x (0; .)", "'range'"),
        (".[range(1)]", "'range'"),
        (".a[:walk(.)]", "'walk'"),
        ("map(select(.a |= 1))", "'|='"),
    ],
)
def test_safety_rules_find_forbidden_constructs(text: str, problem: str) -> None:
    problems = safety_violations(parse(text))
    assert any(problem in p for p in problems), problems


@pytest.mark.parametrize(
    "text",
    [
        '"range"',
        ".range",
        ".paths.recurse",
        "{del: 1}",
        '.metadata.labels["a"] // "0"',
        "$__loc__",
        "[.[] | select(.x == 1)] | length > 0",
    ],
)
def test_safety_rules_do_not_flag_look_alikes(text: str) -> None:
    assert safety_violations(parse(text)) == []


@pytest.mark.parametrize(
    "text",
    [
        ".a.b",
        ".spec.replicatedJobs[] | .replicas * .template.spec.parallelism",
        "if .a then 1 else 0 end",
        "[.x[]? | select(.k == 1)] | first // 1",
        'any(.conditions[]?; .type == "Ready")',
        "def g: . + 1; g | g",
        "def f($x): $x + x; f(1)",
        "def apply(f): f; apply(. * 2)",
        "limit(3; .[])",
        'to_entries | map(.key) | join(",")',
        "label $out | .[] | if . then ., break $out else empty end",
        "(.a // {}) | keys",
    ],
)
def test_terminating_expressions_run_in_process(text: str) -> None:
    assert termination_risk(parse(text)) is None


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("def f: f; f", "recursive function f/0"),
        ("def f(x): x | f(x); f(.)", "recursive function f/1"),
        ("def f: def g: f; g; f", "recursive function f/0"),
        ("until(false; .)", "calls until/2"),
        ("while(true; .)", "calls while/2"),
        ("repeat(.)", "calls repeat/1"),
        ("range(1e9)", "calls range/1"),
        ("recurse(. + 1)", "calls recurse/1"),
        ("[inputs]", "calls inputs/0"),
        ('test("(a+)+$")', "calls test/1"),
        ("setpath([1e9]; 1)", "calls setpath/2"),
        ("reduce .[] as $x (.; . + .)", "uses reduce"),
        ("foreach .[] as $x (0; .; .)", "uses foreach"),
        ("[.[] | combinations]", "calls combinations/0"),
    ],
)
def test_expressions_that_may_not_terminate_are_sent_to_the_worker(text: str, reason: str) -> None:
    risk = termination_risk(parse(text))
    assert risk is not None and reason in risk


def test_a_user_function_shadows_a_risky_builtin() -> None:
    assert termination_risk(parse("def range: 1; range")) is None
    assert termination_risk(parse("def range: 1; 2 | range(1)")) == "calls range/1"


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        # the builtin Job's replicasPath: both fields can become the count
        (
            "(.spec.parallelism // 1) as $p | [$p, (.spec.completions // $p)] | min",
            [("spec", "parallelism"), ("spec", "completions")],
        ),
        # through a pipe, under each item of the list
        (
            ".spec.jobs[] | (.replicas // 1) * .size",
            [("spec", "jobs", None, "replicas"), ("spec", "jobs", None, "size")],
        ),
        ('.spec["min-size"]', [("spec", "min-size")]),
        ('if .spec.mode == "x" then .spec.a else .spec.b end', [("spec", "a"), ("spec", "b")]),
        (".spec.a[] | .", [("spec", "a", None)]),
        # tested, measured or passed to functions: not values
        (".spec.a | length", []),
        ("[.spec.a[] | select(.on)] | length", []),
        # after a pipe from a computed value, the input is no longer the object's
        ("(.x // {}) | .y", [("x",)]),
    ],
)
def test_value_paths_are_the_input_fields_a_value_comes_from(
    text: str, paths: list[tuple[str | None, ...]]
) -> None:
    assert value_paths(parse(text)) == paths
