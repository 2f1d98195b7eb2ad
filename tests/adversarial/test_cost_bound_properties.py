"""Property: the static cost bound (placer.definitions.jqcost) is sound.

For random jq expressions built from the constructs definitions use and random JSON inputs,
libjq's real outputs never outnumber the bound ``m`` nor outsize the bound ``t``. A bound that
could be beaten would let an untrusted expression run in-process on an input it can blow up.
Evaluations run in placer's killable worker with a time limit, so an unsound bound fails the
test instead of hanging it.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from placer.definitions.jq import _WORKER, JqLimits, to_json_text
from placer.definitions.jqcost import at, cost_of
from placer.definitions.jqsyntax import parse
from placer.errors import JqError

ATOMS = [
    ".",
    ".a",
    ".b",
    ".[]?",
    ".a[]?",
    ".[0]?",
    "1",
    '"s"',
    "null",
    "$x",
    "$x.a",
    "length",
    "keys?",
    "tostring",
    "tojson",
    "to_entries?",
    "add?",
    "reverse?",
    "sort?",
    "flatten?",
    "not",
    "type",
    "tostream",
    "empty",
]
UNARY = [
    "[{}]",
    "{{a: ({})}}",
    "({})?",
    "select({})",
    "map({})?",
    "first({})",
    '"<\\({})>"',
    "[{}] | length",
    "with_entries({})?",
    "try ({}) catch .",
    "({})[1:2]?",
    "any({}; .)",
    "[limit(3; {})]",
]
BINARY = [
    "({}) | ({})",
    "({}), ({})",
    "({}) + ({})",
    "({}) - ({})",
    "({}) == ({})",
    "({}) and ({})",
    "({}) // ({})",
    "if {} then {} else . end",
    "({}) as $y | {}",
    "{{a: ({}), b: ({})}}",
    '"\\({})\\({})"',
    "[{}, {}]",
]

expressions = st.recursive(
    st.sampled_from(ATOMS),
    lambda inner: st.one_of(
        st.tuples(st.sampled_from(UNARY), inner).map(lambda p: p[0].format(p[1])),
        st.tuples(st.sampled_from(BINARY), inner, inner).map(lambda p: p[0].format(p[1], p[2])),
    ),
    max_leaves=10,
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["a", "b", "c"]), inner, max_size=3)
    ),
    max_leaves=12,
)


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


@given(expression=expressions, value=json_values)
def test_real_outputs_stay_within_the_bound(expression: str, value: Any) -> None:
    program = f". as $x | {expression}"
    bound = cost_of(parse(program))
    if bound.cost is None:
        return  # no bound: never runs in-process (and nothing to check)
    text = to_json_text(value)
    n = float(len(text))
    count_bound, size_bound = at(bound.cost.m, n), at(bound.cost.t, n)
    if size_bound > 1e6 or at(bound.cost.w, n) > 1e7:
        return  # too big to run in a test; not in-process either at this size
    try:
        outputs = _WORKER.run(
            f"({program}\n\n)", text, JqLimits(time_limit=20, max_outputs=10**6), None
        )
    except JqError as exc:
        assert "failed at run time" in str(exc), str(exc)  # jq errors are fine, limits are not
        return
    assert len(outputs) <= count_bound, (program, text, len(outputs), bound.cost.m)
    total = sum(_size(o) for o in outputs)
    assert total <= size_bound, (program, text, total, bound.cost.t)
