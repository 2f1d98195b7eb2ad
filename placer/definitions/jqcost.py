"""A static bound on what a jq expression can cost: outputs, output size and work.

Why: definitions are untrusted (hub Karta objects, ``--catalog`` files) and run inside placer's
own process, where libjq cannot be interrupted and an allocation failure aborts the process. An
expression can terminate and still cost exponentially much in its own length: ``"ab" | .+. |
.+. | ...`` doubles a string 34 times (32 GiB), ``[.] | [.,.] | ...`` doubles an array,
``(.,.) | (.,.) | ...`` doubles the number of outputs. :mod:`placer.definitions.jqsyntax` proves
termination; this module bounds the cost, so that

* an expression whose cost can grow exponentially (or as a high power of the object's size) is
  rejected by validation (:attr:`CostBound.excessive`), and
* an expression runs in-process only on inputs small enough for its bound to stay within a work
  budget (:func:`max_in_process_input`); the rest runs in the memory- and time-capped worker
  process (:mod:`placer.definitions.jq`).

The model. Sizes are lengths of JSON text; every value has size at least 1, so an expression's
number of outputs is at most the total size of its outputs. For an expression ``e`` the analysis
computes three bounds, each a polynomial with non-negative coefficients in two variables: ``x``,
the size of ``e``'s input, and ``v``, the size of the largest variable in scope:

* ``m(x, v)`` — how many outputs ``e`` produces;
* ``t(x, v)`` — the total size of its outputs;
* ``w(x, v)`` — the work (steps of libjq, each touching a bounded number of bytes).

The rules compose them. The key one is the pipe ``f | g``: ``g`` runs once per output ``s_i`` of
``f``, so its bound is summed over them, and for a monomial ``c x^i v^j`` with ``i >= 1``,
``Σ s_i^i <= (Σ s_i)^i <= t_f^i`` (with ``i = 0`` the sum is ``m_f``). Hence ``.a[] | .b[]``
stays linear while ``.+. | .+.`` multiplies the coefficients: the bound of a chain of doublings
is ``2^k x``. ``src as $x | body`` runs ``body`` once per output of ``src`` with ``v`` raised to
that output's size. Builtins have hand-written bounds (``tostring``: ``6x + 2``: an escape is at
most six bytes; ``to_entries``: ``20x``; ``tostream``: ``20x²``...), closure arguments are bound
by their own analysis, user functions are analysed at each call with their arguments' bounds.
Anything the model does not know (``reduce``, ``foreach``, builtins without a bound, recursion)
has no bound: it runs in the worker, as before, but is not rejected for that.

The bound is conservative, not tight (``.[] | select(.name == $x)`` is bound quadratic: the model
cannot see that each comparison stops at the shorter side). Two numbers decide:
:data:`MAX_GROWTH` (the bound at ``x = v = 1``: how much a tiny input can be amplified) and
:data:`MAX_DEGREE` (the degree of the bound): beyond either the expression is rejected. The
built-in catalog stays far below both (``simulations/bench_decompose.py`` prints them).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from typing import cast

from placer.definitions.jqsyntax import Node, parse

__all__ = [
    "IN_PROCESS_BYTES",
    "IN_PROCESS_WORK",
    "MAX_DEGREE",
    "MAX_GROWTH",
    "MAX_WORK_GROWTH",
    "Cost",
    "CostBound",
    "Poly",
    "cost_of",
    "max_in_process_input",
]

#: Rejected when a tiny input (every size 1) could be amplified more than this (2^30). The
#: bound is loose (the built-in catalog reaches 10^7), so the line sits well above; whatever is
#: accepted still runs in-process only within :data:`IN_PROCESS_BYTES` and
#: :data:`IN_PROCESS_WORK` of its bound.
MAX_GROWTH = float(1 << 30)
#: Rejected when the work on a tiny input (every size 1) could exceed this (2^36).
MAX_WORK_GROWTH = float(1 << 36)
#: Rejected when the bound grows faster than this power of the sizes.
MAX_DEGREE = 6
#: Output (bytes) an evaluation may be bound to and still run in-process (2^26: 64 MiB).
IN_PROCESS_BYTES = float(1 << 26)
#: Work (the model's steps) an evaluation may be bound to and still run in-process (2^24: libjq
#: does some 5·10^7 of them a second, so a fraction of a second at worst). The bound is loose
#: (the catalog's expressions do thousands of times less): placer's own built-in expressions
#: are trusted and run in-process whatever the input (:func:`placer.definitions.jq.
#: trust_expressions`).
IN_PROCESS_WORK = float(1 << 24)

# --------------------------------------------------------------------------------------------
# Polynomials in (x, v) with non-negative coefficients

Poly = Mapping[tuple[int, int], float]

_ZERO: Poly = {}
_ONE: Poly = {(0, 0): 1.0}
_X: Poly = {(1, 0): 1.0}
_V: Poly = {(0, 1): 1.0}


def _const(c: float) -> Poly:
    return {(0, 0): float(c)} if c else _ZERO


def _add(*polys: Poly) -> Poly:
    out: dict[tuple[int, int], float] = {}
    for p in polys:
        for k, c in p.items():
            out[k] = out.get(k, 0.0) + c
    return out


def _max(p: Poly, q: Poly) -> Poly:
    """A bound of both (coefficient by coefficient: all coefficients are non-negative)."""
    out = dict(p)
    for k, c in q.items():
        out[k] = max(out.get(k, 0.0), c)
    return out


def _scale(p: Poly, c: float) -> Poly:
    return {k: v * c for k, v in p.items()} if c else _ZERO


def _mul(p: Poly, q: Poly) -> Poly:
    out: dict[tuple[int, int], float] = {}
    for (i1, j1), c1 in p.items():
        for (i2, j2), c2 in q.items():
            key = (i1 + i2, j1 + j2)
            if key[0] + key[1] > _DEGREE_CAP:
                raise _UnboundedError(
                    f"its cost grows as a power of the object's size above {MAX_DEGREE}",
                    growth=True,
                )
            out[key] = out.get(key, 0.0) + c1 * c2
    return out


def _power(p: Poly, k: int) -> Poly:
    out = _ONE
    for _ in range(k):
        out = _mul(out, p)
    return out


def degree(p: Poly) -> int:
    """The total degree of ``p`` (0 for constants and for the zero polynomial)."""
    return max((i + j for (i, j), c in p.items() if c), default=0)


def at(p: Poly, x: float, v: float | None = None) -> float:
    """``p(x, v)`` (``v`` defaults to ``x``)."""
    v = x if v is None else v
    return sum(c * (x**i) * (v**j) for (i, j), c in p.items())


def _spread(p: Poly, m: Poly, t: Poly) -> Poly:
    """A bound of ``Σ_k p(s_k, v)`` over values of sizes ``s_k`` (at most ``m``, total ``t``).

    For ``i >= 1``, ``Σ s^i <= (Σ s)^i``; for ``i = 0`` each value counts once.
    """
    parts: list[Poly] = []
    for (i, j), c in p.items():
        base = m if i == 0 else _power(t, i)
        parts.append(_scale(_mul(base, _power(_V, j)), c))
    return _add(*parts)


def _rebind(p: Poly, m: Poly, t: Poly, outer: bool) -> Poly:
    """``Σ_k p(x, max(v, s_k))`` over the outputs ``s_k`` of a source (count ``m``, total ``t``).

    ``p(x, max(v, s)) <= p_0(x) + p_+(x, v) + p_+(x, s)`` where ``p_+`` holds the terms with
    ``v``: only those see the new variable. Without ``outer`` variables (``v = 0``), the
    ``p_+(x, v)`` part is not there.
    """
    kept: Poly = p if outer else {(i, j): c for (i, j), c in p.items() if not j}
    parts: list[Poly] = [_mul(m, kept)]
    for (i, j), c in p.items():
        if j:
            parts.append(_scale(_mul(_power(_X, i), _power(t, j)), c))
    return _add(*parts)


_DEGREE_CAP = 2 * MAX_DEGREE


class _UnboundedError(Exception):
    """The model has no bound: ``growth`` says the bound exists but is too large."""

    def __init__(self, reason: str, *, growth: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.growth = growth


# --------------------------------------------------------------------------------------------
# Costs


@dataclass(frozen=True)
class Cost:
    """Bounds of one expression: outputs ``m``, total output size ``t``, work ``w``."""

    m: Poly
    t: Poly
    w: Poly

    def growth(self) -> float:
        """How much a tiny input could be amplified: outputs and their size at ``x = v = 1``."""
        values = (at(self.m, 1.0), at(self.t, 1.0))
        return float("inf") if any(v != v for v in values) else max(values)

    def work_growth(self) -> float:
        """The work bound at ``x = v = 1``."""
        value = at(self.w, 1.0)
        return float("inf") if value != value else value

    def degree(self) -> int:
        return max(degree(self.m), degree(self.t), degree(self.w))


def _cost(m: Poly, t: Poly, w: Poly) -> Cost:
    result = Cost(m, t, w)
    if result.degree() > MAX_DEGREE:
        raise _UnboundedError(
            f"its cost grows as the power {result.degree()} of the object's size "
            f"(at most {MAX_DEGREE} allowed)",
            growth=True,
        )
    if result.growth() > MAX_GROWTH:
        raise _UnboundedError(
            f"its output can grow to {result.growth():.3g} times the size of the object "
            f"(at most {MAX_GROWTH:.3g} allowed)",
            growth=True,
        )
    if result.work_growth() > MAX_WORK_GROWTH:
        raise _UnboundedError(
            f"its work can grow to {result.work_growth():.3g} times the size of the object "
            f"(at most {MAX_WORK_GROWTH:.3g} allowed)",
            growth=True,
        )
    return result


_IDENTITY = Cost(_ONE, _X, _ONE)
#: a part of the input, or `null` when it is missing (4 bytes, more than `{}`)
_PART = Cost(_ONE, _add(_X, _const(4.0)), _ONE)
_EMPTY = Cost(_ZERO, _ZERO, _ONE)


def _scalar(size: float = 24.0, work: Poly = _X) -> Cost:
    """One small output (a number, a boolean), computed in ``work``."""
    return Cost(_ONE, _const(size), _add(_ONE, work))


def _linear(factor: float, extra: float = 2.0, work: float | None = None) -> Cost:
    """One output of size ``factor·x + extra``, in as much work (or ``work·x``)."""
    size = _add(_scale(_X, factor), _const(extra))
    return Cost(_ONE, size, _add(_ONE, _scale(_X, factor if work is None else work)))


def _pipe(f: Cost, g: Cost) -> Cost:
    """``f | g``: ``g`` runs once per output of ``f`` (its ``v`` terms do not depend on it)."""
    m = _spread(g.m, f.m, f.t)
    t = _spread(g.t, f.m, f.t)
    w = _add(f.w, _spread(g.w, f.m, f.t))
    return _cost(m, t, w)


def _product(costs: list[Cost], size: float, factor: float = 1.0) -> Cost:
    """Every combination of one output of each (jq's cartesian evaluation), each output built from
    the parts (``factor`` times their sizes, plus ``size``)."""
    m = _ONE
    for c in costs:
        m = _mul(m, c.m)
    parts: list[Poly] = [_scale(m, size)]
    for index, c in enumerate(costs):
        others = _ONE
        for other_index, other in enumerate(costs):
            if other_index != index:
                others = _mul(others, other.m)
        parts.append(_scale(_mul(c.t, others), factor))
    t = _add(*parts)
    w = _add(*(c.w for c in costs), t, m)
    return _cost(m, t, w)


# --------------------------------------------------------------------------------------------
# Builtins

#: Builtins with one small output (numbers, booleans, short strings) computed in linear work.
_SCALARS = frozenset(
    (
        "length utf8bytelength not type infinite nan isinfinite isnan isnormal isvalid tonumber "
        "floor ceil round sqrt fabs abs significand logb gamma lgamma tgamma lgamma_r frexp modf "
        "trunc rint nearbyint cbrt exp exp2 exp10 log log2 log10 log1p expm1 sin cos tan asin "
        "acos atan sinh cosh tanh asinh acosh atanh have_decnum have_literal_numbers ascii "
        "mktime fromdate fromdateiso8601 gmtime input_line_number now env input_filename "
        "localtime builtins"
    ).split()
)
#: Builtins selecting their input or not (at most one output, no bigger than the input).
_FILTERS = frozenset(
    "values nulls booleans numbers strings arrays objects iterables scalars".split()
)
#: Builtins with one output at most ``factor`` times the input (plus a little), in that work.
_LINEAR: dict[str, float] = {
    "keys": 1.0,
    "keys_unsorted": 1.0,
    "add": 1.0,
    "flatten": 1.0,
    "reverse": 1.0,
    "sort": 1.0,
    "unique": 1.0,
    "min": 1.0,
    "max": 1.0,
    "first": 1.0,
    "last": 1.0,
    "from_entries": 1.0,
    "fromjson": 1.0,
    "ascii_downcase": 1.0,
    "ascii_upcase": 1.0,
    "trim": 1.0,
    "ltrim": 1.0,
    "rtrim": 1.0,
    "toarray": 1.0,
    "todate": 4.0,
    "todateiso8601": 4.0,
    "date": 4.0,
    "tostring": 6.0,
    "tojson": 6.0,
    "explode": 8.0,
    "implode": 12.0,
    "to_entries": 20.0,
}
#: Builtins whose output or work is quadratic in the input (paths of every leaf, padding).
_QUADRATIC: dict[str, float] = {"tostream": 20.0, "leaf_paths": 20.0, "transpose": 5.0}
_QUADRATIC_WORK = frozenset({"add"})  # string concatenation copies: quadratic work

#: Builtins with closure arguments written as jq with the same cost (analysed like user code).
_DESUGARED: dict[tuple[str, int], str] = {
    ("map", 1): "[.[] | f0]",
    ("select", 1): "if f0 then . else empty end",
    ("with_entries", 1): "to_entries | [.[] | f0] | from_entries",
    ("map_values", 1): ". as $o | [.[] | first(f0)] | $o",
    ("any", 1): "[.[] | f0] | length",
    ("all", 1): "[.[] | f0] | length",
    ("any", 2): "[f0 | f1] | length",
    ("all", 2): "[f0 | f1] | length",
    ("IN", 1): ". as $x | [f0 | . == $x] | length",
    ("IN", 2): "[f0 as $x | f1 | . == $x] | length",
    ("isempty", 1): "[f0] | length",
    ("error", 1): "f0 | empty",
    ("first", 1): "f0",
    ("last", 1): "f0",
    ("limit", 2): "f0 as $n | f1",
    ("nth", 2): "f0 as $n | f1",
    ("nth", 1): "f0 as $n | .[$n]",
    ("min_by", 1): "([.[] | [f0]] | length), .",
    ("max_by", 1): "([.[] | [f0]] | length), .",
    ("unique_by", 1): "([.[] | [f0]] | length), .",
    ("sort_by", 1): "([.[] | [f0]] | length), .",
    ("group_by", 1): "([.[] | [f0]] | length), [., .]",
    ("isvalid", 1): "[f0] | length",
    ("flatten", 1): "f0 as $d | flatten",
    ("has", 1): "f0 as $k | .[$k] | length",
    ("in", 1): "f0 as $o | $o | length",
    ("getpath", 1): "f0 as $p | .[$p]",
    ("INDEX", 1): "[f0 | tostring, .] | length, .",
    ("INDEX", 2): "[f0 | f1 | tostring, .]",
    ("truncate_stream", 1): "f0",
    ("path", 1): "f0 as $y | .",
    ("strftime", 1): "f0 | tostring | [., ., ., ., ., ., ., ., ., ., ., .] | tostring",
    ("strptime", 1): "f0 as $f | [., .]",
    ("format", 1): "f0 as $f | tojson | [., .] | tojson",
}
#: (name, arity) of string functions comparing the input with an argument (work: x times the
#: argument's size, as libjq's substring search is naive), with the output size factor.
_STRING_ARGS: dict[tuple[str, int], float] = {
    ("contains", 1): 0.0,
    ("inside", 1): 0.0,
    ("startswith", 1): 0.0,
    ("endswith", 1): 0.0,
    ("ltrimstr", 1): 1.0,
    ("rtrimstr", 1): 1.0,
    ("split", 1): 4.0,
    ("join", 1): 1.0,
    ("index", 1): 8.0,
    ("rindex", 1): 8.0,
    ("indices", 1): 8.0,
}
_NUMERIC_ARGS = frozenset(
    "pow atan2 fmin fmax fmod ldexp scalb scalbln drem dateadd datesub fma".split()
)


@cache
def _desugared(key: tuple[str, int]) -> Node:
    return parse(_DESUGARED[key])


# --------------------------------------------------------------------------------------------
# The analysis


@dataclass(frozen=True)
class _Closure:
    """A function parameter bound to its argument's cost."""

    cost: Cost


@dataclass(frozen=True)
class _Function:
    params: tuple[str, ...]
    body: Node
    scope: _Scope


_Scope = tuple[Mapping[tuple[str, int], "_Closure | _Function"], ...]


def _lookup(scope: _Scope, key: tuple[str, int]) -> _Closure | _Function | None:
    for frame in reversed(scope):
        if key in frame:
            return frame[key]
    return None


class _Analysis:
    def __init__(self) -> None:
        self.steps = 0
        self.active: set[int] = set()
        #: how many variable bindings enclose the expression being analysed (0: no variables)
        self.bound = 0

    def cost(self, node: Node, scope: _Scope) -> Cost:
        self.steps += 1
        if self.steps > 20000:
            raise _UnboundedError("too complex to bound")
        method = getattr(self, f"_{node.kind}", None)
        if method is None:
            raise _UnboundedError(f"has no cost bound for '{node.kind}'")
        result: Cost = method(node, scope)
        return result

    # -- paths ---------------------------------------------------------------------------

    def _identity(self, node: Node, scope: _Scope) -> Cost:
        return _IDENTITY

    def _recurse_all(self, node: Node, scope: _Scope) -> Cost:
        return _cost(_X, _mul(_X, _X), _mul(_X, _X))

    def _target(self, node: Node, scope: _Scope) -> Cost:
        return self.cost(node.children[0], scope) if node.children else _IDENTITY

    def _field(self, node: Node, scope: _Scope) -> Cost:
        return _pipe(self._target(node, scope), _PART)

    def _optional(self, node: Node, scope: _Scope) -> Cost:
        return self.cost(node.children[0], scope)

    def _paren(self, node: Node, scope: _Scope) -> Cost:
        return self.cost(node.children[0], scope)

    def _negate(self, node: Node, scope: _Scope) -> Cost:
        return self.cost(node.children[0], scope)

    def _index(self, node: Node, scope: _Scope) -> Cost:
        target = self.cost(node.children[0], scope)
        key = node.children[1]
        if key.kind == "literal" or (key.kind == "string" and not key.children):
            return _pipe(target, _PART)  # `.["a"]`, `.[0]`: a part of the input
        index = self.cost(node.children[1], scope)  # evaluated on the same input
        m = _mul(target.m, index.m)
        # `.[array]` gives the positions of a sub-array: numbers, each at most 8 bytes per element
        t = _add(_scale(_mul(index.m, target.t), 8.0), m)
        w = _add(target.w, index.w, _mul(index.m, target.t), _mul(target.m, index.t), t)
        return _cost(m, t, w)

    def _slice(self, node: Node, scope: _Scope) -> Cost:
        target, *bounds = (self.cost(c, scope) for c in node.children)
        m = target.m
        counts = _ONE
        for bound in bounds:
            m = _mul(m, bound.m)
            counts = _mul(counts, bound.m)
        t = _mul(counts, target.t)
        w = _add(target.w, *(b.w for b in bounds), t, m)
        return _cost(m, t, w)

    def _iterate(self, node: Node, scope: _Scope) -> Cost:
        target = self._target(node, scope)
        return _cost(target.t, target.t, _add(target.w, target.t))

    # -- values --------------------------------------------------------------------------

    def _literal(self, node: Node, scope: _Scope) -> Cost:
        return _scalar(float(len(str(node.value)) + 16), _ZERO)

    def _string(self, node: Node, scope: _Scope) -> Cost:
        literal = float(node.end - node.start)
        if not node.children:
            return _scalar(literal, _ZERO)
        parts = [self.cost(c, scope) for c in node.children]
        return _product(parts, literal, factor=6.0)  # each part as tostring: escapes <= 6x

    def _formatted(self, node: Node, scope: _Scope) -> Cost:
        literal = float(node.end - node.start) * 12.0
        parts = [self.cost(c, scope) for c in node.children]
        return _product(parts, literal, factor=72.0) if parts else _scalar(literal, _ZERO)

    def _format(self, node: Node, scope: _Scope) -> Cost:
        return _linear(72.0)

    def _variable(self, node: Node, scope: _Scope) -> Cost:
        return Cost(_ONE, _V, _ONE)

    def _array(self, node: Node, scope: _Scope) -> Cost:
        if not node.children:
            return _scalar(2.0, _ZERO)
        inner = self.cost(node.children[0], scope)
        t = _add(inner.t, inner.m, _const(2.0))
        return _cost(_ONE, t, _add(inner.w, t))

    def _object(self, node: Node, scope: _Scope) -> Cost:
        parts: list[Cost] = []
        for entry in node.children:
            key = entry.children[0]
            if len(entry.children) == 1:  # {a}, {$a}, {"a"}, {"a\(.b)"}, {@base64 "..."}
                if key.kind == "variable":
                    parts.append(Cost(_ONE, _add(_V, _const(float(key.end - key.start))), _ONE))
                    continue
                key_cost = self._key(key, scope)
                value = Cost(key_cost.m, _mul(key_cost.m, _X), _add(key_cost.m, key_cost.w))
                parts.extend((key_cost, value))
                continue
            parts.append(self._key(key, scope))
            parts.append(self.cost(entry.children[1], scope))
        return _product(parts, 2.0 + 4.0 * len(node.children))

    def _key(self, key: Node, scope: _Scope) -> Cost:
        if key.kind == "literal":
            return _scalar(float(len(str(key.value)) + 2), _ZERO)
        return self.cost(key, scope)

    # -- combinators ---------------------------------------------------------------------

    def _pipe(self, node: Node, scope: _Scope) -> Cost:
        first, second = node.children
        return _pipe(self.cost(first, scope), self.cost(second, scope))

    def _comma(self, node: Node, scope: _Scope) -> Cost:
        a, b = (self.cost(c, scope) for c in node.children)
        return _cost(_add(a.m, b.m), _add(a.t, b.t), _add(a.w, b.w))

    def _alternative(self, node: Node, scope: _Scope) -> Cost:
        # the truthy outputs of the left side, or else the outputs of the right side
        a, b = (self.cost(c, scope) for c in node.children)
        return _cost(_max(a.m, b.m), _max(a.t, b.t), _add(a.w, b.w))

    def _binary(self, node: Node, scope: _Scope) -> Cost:
        a, b = (self.cost(c, scope) for c in node.children)
        op = str(node.value)
        m = _mul(a.m, b.m)
        sizes = _add(_mul(b.m, a.t), _mul(a.m, b.t))  # Σ over pairs of (s_a + s_b)
        if op in ("+", "*"):  # concatenation, merge; `*` string repetition: see module doc
            t = _add(sizes, _scale(m, 24.0))
            w = _add(a.w, b.w, t)
        elif op == "-":  # array difference compares every pair of elements
            t = _add(sizes, _scale(m, 24.0))
            w = _add(a.w, b.w, t, _mul(a.t, b.t))
        elif op == "/":  # string split: each piece quoted
            t = _add(_scale(sizes, 4.0), _scale(m, 24.0))
            w = _add(a.w, b.w, t, _mul(a.t, b.t))
        else:  # comparisons, %: small outputs
            t = _scale(m, 24.0)
            w = _add(a.w, b.w, sizes, m)
        return _cost(m, t, w)

    def _and(self, node: Node, scope: _Scope) -> Cost:
        a, b = (self.cost(c, scope) for c in node.children)
        # per output of the left side: `false` (or `true`), or the outputs of the right side
        m = _mul(a.m, _max(b.m, _ONE))
        return _cost(m, _scale(m, 5.0), _add(a.w, _mul(a.m, b.w), m))

    _or = _and

    def _if(self, node: Node, scope: _Scope) -> Cost:
        return self._branches(list(node.children), scope)

    def _branches(self, parts: list[Node], scope: _Scope) -> Cost:
        if len(parts) == 1:
            return self.cost(parts[0], scope)
        if not parts:
            return _IDENTITY
        condition = self.cost(parts[0], scope)
        then = self.cost(parts[1], scope)
        rest = self._branches(parts[2:], scope)
        m = _mul(condition.m, _max(then.m, rest.m))  # one branch per output of the condition
        t = _mul(condition.m, _max(then.t, rest.t))
        w = _add(condition.w, _mul(condition.m, _add(then.w, rest.w)))
        return _cost(m, t, w)

    def _try(self, node: Node, scope: _Scope) -> Cost:
        body = self.cost(node.children[0], scope)
        if len(node.children) == 1:
            return body
        handler = self.cost(node.children[1], scope)
        # the handler runs at most once, on the error: a value built by the body (no bigger than
        # its work) or jq's message (quoting at most a short excerpt of a value)
        error = _add(body.w, _const(256.0))
        return _cost(
            _add(body.m, _spread(handler.m, _ONE, error)),
            _add(body.t, _spread(handler.t, _ONE, error)),
            _add(body.w, _spread(handler.w, _ONE, error)),
        )

    def _label(self, node: Node, scope: _Scope) -> Cost:
        return self.cost(node.children[0], scope)

    def _break(self, node: Node, scope: _Scope) -> Cost:
        return _EMPTY

    def _bind(self, node: Node, scope: _Scope) -> Cost:
        source_node, *patterns, body_node = node.children
        for pattern in patterns:
            self._check_pattern(pattern)
        source = self.cost(source_node, scope)
        inner = (*scope, {(p.lstrip("$"), 0): _NOT_A_FILTER for p in _pattern_names(patterns)})
        outer = self.bound > 0
        self.bound += 1
        try:
            body = self.cost(body_node, inner)
        finally:
            self.bound -= 1
        tries = float(len(patterns))  # `?//` alternatives may run the body once each
        return _cost(
            _scale(_rebind(body.m, source.m, source.t, outer), tries),
            _scale(_rebind(body.t, source.m, source.t, outer), tries),
            _add(source.w, _scale(_rebind(body.w, source.m, source.t, outer), tries)),
        )

    def _check_pattern(self, pattern: Node) -> None:
        for sub in pattern.walk():
            if sub.kind not in ("pattern", "entry", "literal", "string", "variable"):
                raise _UnboundedError("destructures with computed keys")
            if sub.kind == "string" and sub.children:
                raise _UnboundedError("destructures with computed keys")

    def _def(self, node: Node, scope: _Scope) -> Cost:
        name, params = cast(tuple[str, tuple[str, ...]], node.value)
        body, rest = node.children
        key = (name, len(params))
        # the function sees the scope of its definition and itself (a recursive call is caught)
        frame: dict[tuple[str, int], _Closure | _Function] = {}
        function = _Function(params, body, (*scope, frame))
        frame[key] = function
        return self.cost(rest, (*scope, {key: function}))

    def _call(self, node: Node, scope: _Scope) -> Cost:
        name, arity = cast(tuple[str, int], node.value)
        binding = _lookup(scope, (name, arity))
        if isinstance(binding, _Closure):
            return binding.cost
        if isinstance(binding, _Function):
            return self._call_function(node, binding, scope)
        return self._builtin(name, arity, node, scope)

    def _call_function(self, node: Node, function: _Function, scope: _Scope) -> Cost:
        if id(function.body) in self.active:
            raise _UnboundedError("calls itself")
        self.active.add(id(function.body))
        outer = self.bound > 0
        self.bound += 1  # conservatively: closures may carry the caller's variables
        try:
            frame: dict[tuple[str, int], _Closure | _Function] = {}
            sources: list[Cost] = []
            for param, argument in zip(function.params, node.children, strict=True):
                closure = _Closure(self.cost(argument, scope))
                if param.startswith("$"):
                    sources.append(closure.cost)
                    frame[(param[1:], 0)] = _NOT_A_FILTER
                else:
                    frame[(param, 0)] = closure
            result = self.cost(function.body, (*function.scope, frame))
        finally:
            self.active.discard(id(function.body))
            self.bound -= 1
        for source in sources:  # `def f($a)` is `a as $a | ...`
            result = Cost(
                _rebind(result.m, source.m, source.t, True),
                _rebind(result.t, source.m, source.t, True),
                _add(source.w, _rebind(result.w, source.m, source.t, True)),
            )
        del outer
        return _cost(result.m, result.t, result.w)

    def _builtin(self, name: str, arity: int, node: Node, scope: _Scope) -> Cost:
        args = node.children
        if (name, arity) in (("empty", 0), ("error", 0)):
            return _EMPTY
        if arity == 0:
            if name in _SCALARS:
                return _scalar(8192.0 if name == "builtins" else 24.0)
            if name in _FILTERS:
                return Cost(_ONE, _X, _ONE)
            if name in _QUADRATIC:
                square = _scale(_mul(_X, _X), _QUADRATIC[name])
                return _cost(_add(_X, _ONE), _add(square, _ONE), _add(square, _ONE))
            if name in _LINEAR:
                linear = _linear(_LINEAR[name])
                if name in _QUADRATIC_WORK:
                    return _cost(linear.m, linear.t, _add(linear.w, _mul(_X, _X)))
                return linear
        if (name, arity) in _DESUGARED:
            frame = {(f"f{i}", 0): _Closure(self.cost(a, scope)) for i, a in enumerate(args)}
            return self.cost(_desugared((name, arity)), ({}, frame))
        if (name, arity) in _STRING_ARGS:
            (argument,) = (self.cost(a, scope) for a in args)
            factor = _STRING_ARGS[(name, arity)]
            t = _add(_scale(_mul(argument.m, _X), factor), _scale(argument.m, 24.0))
            if name == "join":  # the separator between every two elements
                t = _add(t, _mul(_X, argument.t))
            return _cost(argument.m, t, _add(argument.w, t, _mul(_X, argument.t)))
        if name in _NUMERIC_ARGS:
            costs = [self.cost(a, scope) for a in args]
            return _product(costs, 24.0, factor=0.0)
        raise _UnboundedError(f"calls {name}/{arity}, which has no cost bound")


_NOT_A_FILTER = _Closure(_EMPTY)  # `$x` also defines the filter `x`: never called here


def _pattern_names(patterns: list[Node]) -> list[str]:
    return [
        str(p.value)
        for pattern in patterns
        for p in pattern.walk()
        if p.kind == "pattern"
        and not p.children
        and isinstance(p.value, str)
        and p.value not in ("[]", "{}")
    ]


# --------------------------------------------------------------------------------------------
# Entry points


@dataclass(frozen=True)
class CostBound:
    """The analysis of one expression: its bound, or why there is none."""

    cost: Cost | None
    #: why there is no bound (``None`` when there is one)
    reason: str | None = None
    #: the reason is that the bound is too large (the expression is then rejected)
    excessive: bool = False


def cost_of(tree: Node) -> CostBound:
    """The cost bound of ``tree``, or the reason there is none (see the module docstring)."""
    try:
        return CostBound(_Analysis().cost(tree, ()))
    except _UnboundedError as exc:
        return CostBound(None, exc.reason, exc.growth)
    except RecursionError:
        return CostBound(None, "too deeply nested to bound")


def max_in_process_input(bound: CostBound) -> int:
    """The largest input size (JSON bytes) on which the bound stays within the in-process limits.

    Output within :data:`IN_PROCESS_BYTES` and work within :data:`IN_PROCESS_WORK`; ``-1`` when
    the expression has no bound or exceeds them on any input.
    """
    cost = bound.cost
    if cost is None:
        return -1

    def fits(n: int) -> bool:
        size = float(n)
        return (
            at(cost.t, size) <= IN_PROCESS_BYTES
            and at(cost.m, size) <= IN_PROCESS_BYTES
            and at(cost.w, size) <= IN_PROCESS_WORK
        )

    low, high = 1, 1 << 31
    if not fits(low):
        return -1
    if fits(high):
        return high
    while high - low > 1:
        middle = (low + high) // 2
        if fits(middle):
            low = middle
        else:
            high = middle
    return low
