"""A tokenizer and parser for the jq language, and the static checks built on its syntax tree.

Why placer parses jq itself when libjq does the evaluating: two questions about a definition's jq
expression must be answered *before* it runs, and libjq answers neither.

* **Is it allowed?** Upstream (Workload Map) rejects definitions whose jq could modify the object
  or produce unbounded output: ``del``, ``range``, ``paths``, ``recurse``, ``walk``, ``repeat``, the
  recursive-descent operator ``..`` and every assignment operator, wherever they hide (inside
  ``def`` bodies, arguments, string interpolation, object keys, ``reduce``...). That needs a real
  syntax tree, not a regular expression: ``"range"`` in a string literal is fine, ``.range`` is a
  field, ``$__loc__`` is a variable.
* **Does it surely terminate?** libjq cannot be interrupted from Python: its C loop never looks at
  signals, so ``def f: f; f`` or ``until(false; .)`` would hang the caller for good. The runtime
  (:mod:`placer.definitions.jq`) therefore runs in-process only expressions this module proves
  terminating (:func:`termination_risk` returns ``None``), and everything else in a killable
  worker process with a time limit.

The termination proof is conservative and cheap. An expression surely terminates, in time
polynomial in the size of its input and of the expression, when it:

* calls only builtins from :data:`TERMINATING_BUILTINS` (functions whose running time is bounded
  by their input and arguments: ``select``, ``map``, ``to_entries``, ``length``, ``any``, ...),
  its own function parameters, or user functions that are not recursive (a ``def`` whose body
  never refers back to itself; jq's lexical scoping means a call cycle needs such a reference);
* has no ``reduce``/``foreach`` (an accumulator fed back into itself can double at each step);
* has no ``import``/``include``, ``input``/``inputs``, regular expressions (catastrophic
  backtracking), ``range``/``repeat``/``while``/``until``/``recurse(f)``, ``combinations``, or
  builtins that materialise a path chosen by the data (``setpath``, ``pick``, ``fromstream``:
  ``setpath([1e9]; 1)`` allocates a billion-element array).

Everything in catalog definitions falls in the terminating class. One more hazard is data, not
code: jq's string repetition (``"x" * n``) has no bound, so a manifest field holding a string
where a definition multiplies replicas could make libjq build gigabytes in-process.
:func:`guard_repetition` rewrites every ``*`` into a guarded multiplication that refuses, as
gojq does, to build a string over 256 MiB.

The grammar follows jq 1.7 (``parser.y``): precedence from loosest to tightest is ``|``, ``,``,
``//`` (right), assignments (non-associative), ``or``, ``and``, comparisons (non-associative),
``+ -``, ``* / %``, unary minus, postfix (``.a``, ``[...]``, ``?``); ``Term as $x | body``,
``def``, ``reduce``, ``foreach``, ``if``, ``try``, ``label`` as in jq. The parser accepts a
superset of jq where that costs nothing (e.g. ``{a: 1 + 2}``); whether an expression really
compiles is always decided by libjq.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import cast

__all__ = [
    "ASSIGNMENT_OPERATORS",
    "FORBIDDEN_OUTPUT_FUNCTIONS",
    "GUARDED_MULTIPLY_DEF",
    "OUTSIDE_BUILTINS",
    "OUTSIDE_VARIABLES",
    "TERMINATING_BUILTINS",
    "JqSyntaxError",
    "Node",
    "Segment",
    "guard_repetition",
    "isolation_violations",
    "parse",
    "safety_violations",
    "termination_risk",
    "value_paths",
]

ASSIGNMENT_OPERATORS = ("=", "|=", "+=", "-=", "*=", "/=", "%=", "//=")
#: Functions upstream's validator rejects as "may produce excessive output".
FORBIDDEN_OUTPUT_FUNCTIONS = frozenset({"range", "paths", "recurse", "walk", "repeat"})

_KEYWORDS = frozenset(
    {
        "def",
        "if",
        "then",
        "elif",
        "else",
        "end",
        "as",
        "reduce",
        "foreach",
        "try",
        "catch",
        "label",
        "import",
        "include",
        "and",
        "or",
        "__loc__",
    }
)

# Builtins (name, arity) whose running time is bounded by their input and arguments (closure
# arguments run a bounded number of times per input element). Absent on purpose: until, while,
# repeat, range, recurse/1-2, limit-free regex functions (test, match, capture, scan, splits,
# sub, gsub, split/2), input(s), setpath, pick, fromstream, combinations, getpath-free writers,
# halt, halt_error, debug, stderr, module and search-path functions.
_TERMINATING = {
    0: (
        "empty not length utf8bytelength keys keys_unsorted values nulls booleans numbers "
        "strings arrays objects iterables scalars type add any all flatten floor ceil round "
        "sqrt fabs abs tostring tonumber ascii_downcase ascii_upcase explode implode tojson "
        "fromjson to_entries from_entries reverse sort unique min max first last infinite nan "
        "isinfinite isnan isnormal error env builtins input_filename input_line_number now "
        "todate fromdate todateiso8601 fromdateiso8601 date mktime gmtime localtime ascii "
        "trim ltrim rtrim toarray transpose tostream leaf_paths recurse paths "
        "have_decnum have_literal_numbers significand logb gamma lgamma tgamma lgamma_r frexp "
        "modf trunc rint nearbyint cbrt exp exp2 exp10 log log2 log10 log1p expm1 sin cos tan "
        "asin acos atan sinh cosh tanh asinh acosh atanh"
    ),
    1: (
        "select map map_values path del delpaths to_entries with_entries has in inside "
        "contains startswith endswith ltrimstr rtrimstr split join index rindex indices "
        "flatten add any all min_by max_by unique_by group_by sort_by error first last "
        "isempty isvalid getpath paths walk strftime strptime strflocaltime IN INDEX "
        "truncate_stream"
    ),
    2: (
        "any all limit nth IN INDEX pow atan2 fmin fmax fmod ldexp scalb scalbln drem dateadd "
        "datesub"
    ),
    3: "fma",
}
#: (name, arity) pairs of builtins proven to terminate (see module docstring).
TERMINATING_BUILTINS = frozenset(
    (name, arity) for arity, names in _TERMINATING.items() for name in names.split()
)


class JqSyntaxError(ValueError):
    """The text is not a jq program; ``position`` is the 0-based offset of the problem."""

    def __init__(self, message: str, position: int) -> None:
        super().__init__(f"{message} at offset {position}")
        self.message = message
        self.position = position


# --------------------------------------------------------------------------------------------
# Tokens


@dataclass(frozen=True)
class _Token:
    #: ``num``, ``str``, ``format``, ``ident``, ``field``, ``var``, ``kw`` (keyword), ``op``,
    #: ``eof``.
    kind: str
    #: the token text; for ``str`` the raw text between the quotes.
    text: str
    start: int
    end: int
    #: ``str`` tokens: literal pieces (str) and interpolated token lists, in order.
    parts: tuple[str | tuple[_Token, ...], ...] = ()


# longest first, so that e.g. "?//" wins over "?" and "//=" over "//"
_OPERATORS = tuple(
    "?// //= != == // |= += -= *= /= %= <= >= .. . [ ] { } ( ) | , : ; = < > + - * / % ?".split()
)
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "\\": "\\", "/": "/", '"': '"'}


def _is_ident_start(ch: str) -> bool:
    return ch == "_" or ("a" <= ch <= "z") or ("A" <= ch <= "Z")


def _is_ident_char(ch: str) -> bool:
    return _is_ident_start(ch) or ("0" <= ch <= "9")


class _Lexer:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def tokens(self, *, until_paren: bool = False) -> tuple[_Token, ...]:
        """Tokenize to the end, or (inside ``\\(...)``) to the matching ``)``, consumed."""
        out: list[_Token] = []
        depth = 0
        while True:
            self._skip_space()
            if self.pos >= len(self.text):
                if until_paren:
                    raise JqSyntaxError("unterminated string interpolation", self.pos)
                out.append(_Token("eof", "", self.pos, self.pos))
                return tuple(out)
            ch = self.text[self.pos]
            if until_paren and ch == ")" and depth == 0:
                self.pos += 1
                out.append(_Token("eof", "", self.pos - 1, self.pos - 1))
                return tuple(out)
            token = self._next()
            if token.kind == "op" and token.text == "(":
                depth += 1
            elif token.kind == "op" and token.text == ")":
                depth -= 1
            out.append(token)

    def _skip_space(self) -> None:
        text = self.text
        while self.pos < len(text):
            ch = text[self.pos]
            if ch in " \t\r\n":
                self.pos += 1
            elif ch == "#":
                # A comment runs to the end of the line; a line ending in an odd number of
                # backslashes continues it (jq >= 1.7.1).
                while self.pos < len(text):
                    newline = text.find("\n", self.pos)
                    if newline < 0:
                        self.pos = len(text)
                        break
                    backslashes = len(text[self.pos : newline]) - len(
                        text[self.pos : newline].rstrip("\\")
                    )
                    self.pos = newline + 1
                    if backslashes % 2 == 0:
                        break
            else:
                return

    def _next(self) -> _Token:
        text, start = self.text, self.pos
        ch = text[start]
        if ch == '"':
            return self._string(start)
        if ch.isdigit() or (ch == "." and start + 1 < len(text) and text[start + 1].isdigit()):
            return self._number(start)
        if ch == "." and start + 1 < len(text) and _is_ident_start(text[start + 1]):
            end = start + 2
            while end < len(text) and _is_ident_char(text[end]):
                end += 1
            self.pos = end
            return _Token("field", text[start + 1 : end], start, end)
        if ch == "$":
            end = start + 1
            if end < len(text) and _is_ident_start(text[end]):
                end = self._ident_end(end)
                self.pos = end
                return _Token("var", text[start + 1 : end], start, end)
            raise JqSyntaxError("'$' must be followed by a variable name", start)
        if ch == "@":
            end = start + 1
            while end < len(text) and _is_ident_char(text[end]):
                end += 1
            if end == start + 1:
                raise JqSyntaxError("'@' must be followed by a format name", start)
            self.pos = end
            return _Token("format", text[start + 1 : end], start, end)
        if _is_ident_start(ch):
            end = self._ident_end(start)
            self.pos = end
            word = text[start:end]
            kind = "kw" if word in _KEYWORDS else "ident"
            return _Token(kind, word, start, end)
        for op in _OPERATORS:
            if text.startswith(op, start):
                self.pos = start + len(op)
                return _Token("op", op, start, self.pos)
        raise JqSyntaxError(f"unexpected character {ch!r}", start)

    def _ident_end(self, start: int) -> int:
        text = self.text
        end = start
        while True:
            while end < len(text) and _is_ident_char(text[end]):
                end += 1
            # module-qualified names: mod::name
            if (
                text.startswith("::", end)
                and end + 2 < len(text)
                and _is_ident_start(text[end + 2])
            ):
                end += 2
                continue
            return end

    def _number(self, start: int) -> _Token:
        text = self.text
        end = start
        while end < len(text) and text[end].isdigit():
            end += 1
        if end < len(text) and text[end] == ".":
            end += 1
            while end < len(text) and text[end].isdigit():
                end += 1
        if end < len(text) and text[end] in "eE":
            exp = end + 1
            if exp < len(text) and text[exp] in "+-":
                exp += 1
            if exp < len(text) and text[exp].isdigit():
                end = exp
                while end < len(text) and text[end].isdigit():
                    end += 1
        self.pos = end
        return _Token("num", text[start:end], start, end)

    def _string(self, start: int) -> _Token:
        text = self.text
        self.pos = start + 1
        parts: list[str | tuple[_Token, ...]] = []
        buf: list[str] = []
        while True:
            if self.pos >= len(text):
                raise JqSyntaxError("unterminated string", start)
            ch = text[self.pos]
            if ch == '"':
                self.pos += 1
                break
            if ch != "\\":
                buf.append(ch)
                self.pos += 1
                continue
            if self.pos + 1 >= len(text):
                raise JqSyntaxError("unterminated string", start)
            esc = text[self.pos + 1]
            if esc == "(":
                if buf:
                    parts.append("".join(buf))
                    buf = []
                self.pos += 2
                parts.append(self.tokens(until_paren=True))
            elif esc == "u":
                digits = text[self.pos + 2 : self.pos + 6]
                if len(digits) != 4 or any(c not in "0123456789abcdefABCDEF" for c in digits):
                    raise JqSyntaxError("invalid \\u escape in string", self.pos)
                buf.append(chr(int(digits, 16)))
                self.pos += 6
            elif esc in _ESCAPES:
                buf.append(_ESCAPES[esc])
                self.pos += 2
            else:
                raise JqSyntaxError(f"invalid escape '\\{esc}' in string", self.pos)
        if buf or not parts:
            parts.append("".join(buf))
        return _Token("str", text[start + 1 : self.pos - 1], start, self.pos, tuple(parts))


# --------------------------------------------------------------------------------------------
# Syntax tree


@dataclass(frozen=True)
class Node:
    """One node of a jq syntax tree.

    ``kind`` is one of: ``identity`` (``.``), ``recurse_all`` (``..``), ``field`` (``value`` =
    name; ``children`` = optional target), ``index`` (target, index), ``slice`` (target, from,
    to; missing bounds are ``null`` literals), ``iterate`` (target), ``optional`` (postfix ``?``),
    ``literal`` (``value`` = number text or key name), ``paren``, ``string`` (``value`` = the
    decoded text, or ``None`` when interpolated; children = interpolated expressions),
    ``formatted`` (``@base64 "..."``; ``value`` = format name), ``format`` (bare ``@json``),
    ``array``, ``object`` (children = ``entry`` nodes: key, value), ``pipe``, ``comma``,
    ``alternative`` (``//``), ``binary`` (``value`` = operator), ``assign`` (``value`` =
    operator), ``and``, ``or``, ``negate``, ``call`` (``value`` = (name, arity); children =
    arguments), ``variable`` (``value`` = name), ``bind`` (source, patterns..., body), ``pattern``,
    ``reduce``, ``foreach``, ``if``, ``try``, ``label``, ``break``, ``def`` (``value`` = (name,
    params); children = body, rest), ``module`` (import/include directive).

    ``start``/``end`` are offsets in the source text.
    """

    kind: str
    start: int
    end: int
    children: tuple[Node, ...] = ()
    value: object = None

    def walk(self) -> Iterator[Node]:
        """This node and all its descendants, depth first."""
        stack = [self]
        while stack:
            node = stack.pop()
            yield node
            stack.extend(reversed(node.children))


@dataclass
class _Parser:
    tokens: tuple[_Token, ...]
    pos: int = 0
    text: str = field(default="")

    # -- token helpers -------------------------------------------------------------------

    @property
    def tok(self) -> _Token:
        return self.tokens[self.pos]

    def peek(self, offset: int = 1) -> _Token:
        index = min(self.pos + offset, len(self.tokens) - 1)
        return self.tokens[index]

    def at(self, kind: str, text: str | None = None) -> bool:
        tok = self.tok
        return tok.kind == kind and (text is None or tok.text == text)

    def at_op(self, *ops: str) -> bool:
        return self.tok.kind == "op" and self.tok.text in ops

    def advance(self) -> _Token:
        tok = self.tok
        if tok.kind != "eof":
            self.pos += 1
        return tok

    def expect_op(self, op: str) -> _Token:
        if not self.at_op(op):
            raise self.error(f"expected '{op}'")
        return self.advance()

    def expect_kw(self, word: str) -> _Token:
        if not self.at("kw", word):
            raise self.error(f"expected '{word}'")
        return self.advance()

    def error(self, message: str) -> JqSyntaxError:
        tok = self.tok
        found = "end of expression" if tok.kind == "eof" else repr(tok.text or tok.kind)
        return JqSyntaxError(f"{message}, found {found}", tok.start)

    # -- grammar ---------------------------------------------------------------------------

    def program(self) -> Node:
        start = self.tok.start
        directives: list[Node] = []
        while self.at("kw", "import") or self.at("kw", "include"):
            directives.append(self.module_directive())
        if self.at("eof") and directives:
            body = Node("identity", start, start)
        else:
            body = self.pipe()
        if not self.at("eof"):
            raise self.error("unexpected token")
        for directive in reversed(directives):
            body = Node("module", directive.start, body.end, (directive, body))
        return body

    def module_directive(self) -> Node:
        tok = self.advance()
        path = self.primary()
        if tok.text == "import":
            self.expect_kw("as")
            if not (self.at("ident") or self.at("var")):
                raise self.error("expected a module name")
            self.advance()
        if not self.at_op(";"):
            self.primary()  # optional metadata object
        end = self.expect_op(";").end
        return Node("directive", tok.start, end, (path,), tok.text)

    def pipe(self) -> Node:
        if self.at("kw", "def"):
            return self.funcdef_then_rest()
        if self.at("kw", "label"):
            start = self.advance().start
            if not self.at("var"):
                raise self.error("expected '$name' after label")
            name = self.advance().text
            self.expect_op("|")
            body = self.pipe()
            return Node("label", start, body.end, (body,), name)
        left = self.comma()
        if self.at_op("|"):
            self.advance()
            right = self.pipe()
            return Node("pipe", left.start, right.end, (left, right))
        return left

    def funcdef_then_rest(self) -> Node:
        """``def name(params): body; rest`` as one ``def`` node."""
        start = self.tok.start
        name, params, body = self.funcdef()
        rest = self.pipe()
        return Node("def", start, rest.end, (body, rest), (name, params))

    def funcdef(self) -> tuple[str, tuple[str, ...], Node]:
        self.expect_kw("def")
        if not (self.at("ident") or self.at("kw")):
            raise self.error("expected a function name after def")
        name = self.advance().text
        params: list[str] = []
        if self.at_op("("):
            self.advance()
            while True:
                if self.at("var"):
                    params.append("$" + self.advance().text)
                elif self.at("ident") or self.at("kw"):
                    params.append(self.advance().text)
                else:
                    raise self.error("expected a parameter name")
                if self.at_op(";"):
                    self.advance()
                    continue
                self.expect_op(")")
                break
        self.expect_op(":")
        body = self.pipe()
        self.expect_op(";")
        return name, tuple(params), body

    def comma(self) -> Node:
        return self._left_associative(self.alternative, lambda: self.at_op(","), "comma")

    def alternative(self) -> Node:
        left = self.assignment()
        if self.at_op("//"):
            self.advance()
            right = self.alternative()
            return Node("alternative", left.start, right.end, (left, right))
        return left

    def assignment(self) -> Node:
        left = self.or_()
        if self.at_op(*ASSIGNMENT_OPERATORS):
            op = self.advance().text
            right = self.alternative()
            return Node("assign", left.start, right.end, (left, right), op)
        return left

    def _left_associative(
        self, operand: Callable[[], Node], matches: Callable[[], bool], kind: str
    ) -> Node:
        """``operand (op operand)*``, grouped to the left (``value`` = the operator)."""
        left = operand()
        while matches():
            op = self.advance().text
            right = operand()
            left = Node(kind, left.start, right.end, (left, right), op)
        return left

    def or_(self) -> Node:
        return self._left_associative(self.and_, lambda: self.at("kw", "or"), "or")

    def and_(self) -> Node:
        return self._left_associative(self.comparison, lambda: self.at("kw", "and"), "and")

    def comparison(self) -> Node:
        left = self.additive()
        if self.at_op("==", "!=", "<", "<=", ">", ">="):
            op = self.advance().text
            right = self.additive()
            return Node("binary", left.start, right.end, (left, right), op)
        return left

    def additive(self) -> Node:
        return self._left_associative(self.multiplicative, lambda: self.at_op("+", "-"), "binary")

    def multiplicative(self) -> Node:
        return self._left_associative(self.unary, lambda: self.at_op("*", "/", "%"), "binary")

    def unary(self) -> Node:
        if self.at_op("-"):
            start = self.advance().start
            operand = self.unary()
            return Node("negate", start, operand.end, (operand,))
        return self.postfix(allow_bind=True)

    def postfix(self, *, allow_bind: bool) -> Node:
        term = self.primary()
        while True:
            tok = self.tok
            if tok.kind == "field":
                self.advance()
                term = Node("field", term.start, tok.end, (term,), tok.text)
            elif tok.kind == "op" and tok.text == "." and self.peek().kind == "str":
                self.advance()
                key = self.string_literal()
                term = Node("index", term.start, key.end, (term, key))
            elif tok.kind == "op" and tok.text == "." and self.peek().text == "[":
                self.advance()  # jq 1.7: .a.[0]
            elif tok.kind == "op" and tok.text == "[":
                term = self.bracket_suffix(term)
            elif tok.kind == "op" and tok.text == "?":
                self.advance()
                term = Node("optional", term.start, tok.end, (term,))
            else:
                break
        if allow_bind and self.at("kw", "as"):
            self.advance()
            patterns = [self.pattern()]
            while self.at_op("?//"):
                self.advance()
                patterns.append(self.pattern())
            self.expect_op("|")
            body = self.pipe()
            return Node("bind", term.start, body.end, (term, *patterns, body))
        return term

    def bracket_suffix(self, target: Node) -> Node:
        start = self.expect_op("[").start
        if self.at_op("]"):
            end = self.advance().end
            return Node("iterate", target.start, end, (target,))
        if self.at_op(":"):
            self.advance()
            upper = self.pipe()
            end = self.expect_op("]").end
            lower = Node("literal", start, start, (), "null")
            return Node("slice", target.start, end, (target, lower, upper))
        index = self.pipe()
        if self.at_op(":"):
            self.advance()
            if self.at_op("]"):
                upper = Node("literal", self.tok.start, self.tok.start, (), "null")
            else:
                upper = self.pipe()
            end = self.expect_op("]").end
            return Node("slice", target.start, end, (target, index, upper))
        end = self.expect_op("]").end
        return Node("index", target.start, end, (target, index))

    def primary(self) -> Node:
        tok = self.tok
        kind, text = tok.kind, tok.text
        if kind == "num":
            self.advance()
            return Node("literal", tok.start, tok.end, (), text)
        if kind == "str":
            return self.string_literal()
        if kind == "format":
            self.advance()
            if self.at("str"):
                string = self.string_literal()
                return Node("formatted", tok.start, string.end, string.children, text)
            return Node("format", tok.start, tok.end, (), text)
        if kind == "field":
            self.advance()
            return Node("field", tok.start, tok.end, (), text)
        if kind == "var":
            self.advance()
            return Node("variable", tok.start, tok.end, (), text)
        if kind == "op":
            return self.primary_op(tok)
        if kind == "kw":
            return self.primary_keyword(tok)
        if kind == "ident":
            return self.call()
        raise self.error("expected an expression")

    def primary_op(self, tok: _Token) -> Node:
        text = tok.text
        if text == ".":
            self.advance()
            if self.at("str"):
                key = self.string_literal()
                return Node("index", tok.start, key.end, (Node("identity", *_span(tok)), key))
            return Node("identity", tok.start, tok.end)
        if text == "..":
            self.advance()
            return Node("recurse_all", tok.start, tok.end)
        if text == "(":
            self.advance()
            inner = self.pipe()
            end = self.expect_op(")").end
            return Node("paren", tok.start, end, (inner,))
        if text == "[":
            self.advance()
            if self.at_op("]"):
                end = self.advance().end
                return Node("array", tok.start, end)
            inner = self.pipe()
            end = self.expect_op("]").end
            return Node("array", tok.start, end, (inner,))
        if text == "{":
            return self.object()
        if text == "-":
            return self.unary()
        raise self.error("expected an expression")

    def primary_keyword(self, tok: _Token) -> Node:
        word = tok.text
        if word == "if":
            return self.if_()
        if word == "try":
            self.advance()
            body = self.postfix(allow_bind=False)
            children = [body]
            end = body.end
            if self.at("kw", "catch"):
                self.advance()
                handler = self.postfix(allow_bind=False)
                children.append(handler)
                end = handler.end
            return Node("try", tok.start, end, tuple(children))
        if word in ("reduce", "foreach"):
            self.advance()
            source = self.postfix(allow_bind=False)
            self.expect_kw("as")
            pattern = self.pattern()
            self.expect_op("(")
            parts = [self.pipe()]
            while self.at_op(";"):
                self.advance()
                parts.append(self.pipe())
            end = self.expect_op(")").end
            wanted = (2,) if word == "reduce" else (2, 3)
            if len(parts) not in wanted:
                raise JqSyntaxError(
                    f"{word} takes {' or '.join(map(str, wanted))} parts", tok.start
                )
            return Node(word, tok.start, end, (source, pattern, *parts))
        if word == "def":
            return self.funcdef_then_rest()
        if word == "label":
            return self.pipe()
        if word == "__loc__":
            self.advance()
            return Node("literal", tok.start, tok.end, (), "$__loc__")
        raise self.error("unexpected keyword")

    def if_(self) -> Node:
        start = self.expect_kw("if").start
        children = [self.pipe()]
        self.expect_kw("then")
        children.append(self.pipe())
        while self.at("kw", "elif"):
            self.advance()
            children.append(self.pipe())
            self.expect_kw("then")
            children.append(self.pipe())
        if self.at("kw", "else"):
            self.advance()
            children.append(self.pipe())
        end = self.expect_kw("end").end
        return Node("if", start, end, tuple(children))

    def call(self) -> Node:
        tok = self.advance()
        name = tok.text
        if name in ("true", "false", "null"):
            return Node("literal", tok.start, tok.end, (), name)
        if name == "break":
            if not self.at("var"):
                raise self.error("expected '$name' after break")
            var = self.advance()
            return Node("break", tok.start, var.end, (), var.text)
        args: list[Node] = []
        end = tok.end
        if self.at_op("("):
            self.advance()
            args.append(self.pipe())
            while self.at_op(";"):
                self.advance()
                args.append(self.pipe())
            end = self.expect_op(")").end
        return Node("call", tok.start, end, tuple(args), (name, len(args)))

    def string_literal(self) -> Node:
        tok = self.tok
        if tok.kind != "str":
            raise self.error("expected a string")
        self.advance()
        children: list[Node] = []
        for part in tok.parts:
            if isinstance(part, tuple):
                sub = _Parser(part, text=self.text)
                inner = sub.pipe()
                if not sub.at("eof"):
                    raise sub.error("unexpected token in string interpolation")
                children.append(inner)
        literal = None if children else "".join(p for p in tok.parts if isinstance(p, str))
        return Node("string", tok.start, tok.end, tuple(children), literal)

    def object(self) -> Node:
        start = self.expect_op("{").start
        entries: list[Node] = []
        while not self.at_op("}"):
            entries.append(self.object_entry())
            if self.at_op(","):
                self.advance()
                continue
            if not self.at_op("}"):
                raise self.error("expected ',' or '}' in object")
        end = self.advance().end
        return Node("object", start, end, tuple(entries))

    def object_entry(self) -> Node:
        tok = self.tok
        if tok.kind == "var":
            self.advance()
            key = Node("variable", tok.start, tok.end, (), tok.text)
            if not self.at_op(":"):
                return Node("entry", tok.start, tok.end, (key,))
        elif tok.kind == "kw" and tok.text == "__loc__":
            self.advance()
            key = Node("literal", tok.start, tok.end, (), "$__loc__")
        elif tok.kind in ("ident", "kw"):
            self.advance()
            key = Node("literal", tok.start, tok.end, (), tok.text)
        elif tok.kind == "num":
            self.advance()
            key = Node("literal", tok.start, tok.end, (), tok.text)
        elif tok.kind == "str":
            key = self.string_literal()
        elif tok.kind == "format" and self.peek().kind == "str":
            self.advance()
            string = self.string_literal()
            key = Node("formatted", tok.start, string.end, string.children, tok.text)
        elif tok.kind == "op" and tok.text == "(":
            self.advance()
            inner = self.pipe()
            end = self.expect_op(")").end
            key = Node("paren", tok.start, end, (inner,))
        else:
            raise self.error("expected an object key")
        if not self.at_op(":"):
            return Node("entry", key.start, key.end, (key,))
        self.advance()
        value = self.object_value()
        return Node("entry", key.start, value.end, (key, value))

    def object_value(self) -> Node:
        # jq's ObjVal: pipes of comma-free expressions (a comma ends the entry)
        return self._left_associative(self.alternative, lambda: self.at_op("|"), "pipe")

    def pattern(self) -> Node:
        tok = self.tok
        if tok.kind == "var":
            self.advance()
            return Node("pattern", tok.start, tok.end, (), tok.text)
        if tok.kind == "op" and tok.text == "[":
            self.advance()
            items = [self.pattern()]
            while self.at_op(","):
                self.advance()
                items.append(self.pattern())
            end = self.expect_op("]").end
            return Node("pattern", tok.start, end, tuple(items), "[]")
        if tok.kind == "op" and tok.text == "{":
            self.advance()
            items = [self.pattern_entry()]
            while self.at_op(","):
                self.advance()
                items.append(self.pattern_entry())
            end = self.expect_op("}").end
            return Node("pattern", tok.start, end, tuple(items), "{}")
        raise self.error("expected a destructuring pattern ($name, [...] or {...})")

    def pattern_entry(self) -> Node:
        tok = self.tok
        if tok.kind == "var":
            self.advance()
            var = Node("pattern", tok.start, tok.end, (), tok.text)
            if self.at_op(":"):
                self.advance()
                sub = self.pattern()
                return Node("entry", tok.start, sub.end, (var, sub))
            return Node("entry", tok.start, tok.end, (var,))
        if tok.kind in ("ident", "kw"):
            self.advance()
            key = Node("literal", tok.start, tok.end, (), tok.text)
        elif tok.kind == "str":
            key = self.string_literal()
        elif tok.kind == "op" and tok.text == "(":
            self.advance()
            inner = self.pipe()
            end = self.expect_op(")").end
            key = Node("paren", tok.start, end, (inner,))
        else:
            raise self.error("expected an object pattern key")
        self.expect_op(":")
        sub = self.pattern()
        return Node("entry", key.start, sub.end, (key, sub))


def _span(tok: _Token) -> tuple[int, int]:
    return tok.start, tok.end


def parse(text: str) -> Node:
    """Parse a jq program into a :class:`Node` tree; raises :class:`JqSyntaxError`."""
    if not text.strip():
        raise JqSyntaxError("empty expression", 0)
    tokens = _Lexer(text).tokens()
    return _Parser(tokens, text=text).program()


# --------------------------------------------------------------------------------------------
# Checks


def safety_violations(tree: Node) -> list[str]:
    """Upstream's jq safety rules (spec 10.2), one message per offending construct, in order.

    Rejected anywhere in the tree (``def`` bodies, arguments, interpolation, ...): ``del``;
    ``range``, ``paths``, ``recurse``, ``walk``, ``repeat``; ``..``; assignment operators.
    """
    problems: list[str] = []
    for node in tree.walk():
        if node.kind == "call":
            name, _arity = cast(tuple[str, int], node.value)
            if name == "del":
                problems.append("del function is not allowed")
            elif name in FORBIDDEN_OUTPUT_FUNCTIONS:
                problems.append(
                    f"function '{name}' may produce excessive output and is not allowed"
                )
        elif node.kind == "recurse_all":
            problems.append("recursive descent operator '..' is not allowed")
        elif node.kind == "assign":
            problems.append(f"modifying operator '{node.value}' is not allowed")
    return problems


#: Builtins that reach outside the object (environment, clock, files, the process, other
#: inputs), by name, with what they reach. A definition is a pure function of its object: these
#: are refused wherever they hide (:func:`isolation_violations`).
OUTSIDE_BUILTINS: dict[str, str] = {
    "env": "reads the environment variables of the process",
    "input": "reads further inputs",
    "inputs": "reads further inputs",
    "input_filename": "reads the name of the input file",
    "input_line_number": "reads the position in the input file",
    "debug": "writes to the standard error of the process",
    "stderr": "writes to the standard error of the process",
    "halt": "stops the program",
    "halt_error": "stops the program and writes to the standard error of the process",
    "now": "reads the clock (the result would change from one evaluation to the next)",
    "localtime": "reads the time zone of the process",
    "strflocaltime": "reads the time zone of the process",
    "get_search_list": "reads jq's module search path",
    "get_jq_origin": "reads where jq is installed",
    "get_prog_origin": "reads where the program was loaded from",
    "modulemeta": "reads jq modules from files",
}
#: Predefined variables that reach outside the object, with what they reach.
OUTSIDE_VARIABLES: dict[str, str] = {
    "ENV": "reads the environment variables of the process",
    "__loc__": "reads the location of the expression in the program",
    "__prog_args": "reads the arguments of the program",
    "ARGS": "reads the arguments of the program",
}


def isolation_violations(tree: Node) -> list[str]:
    """Every construct of ``tree`` that reaches outside the object, one message each, in order.

    A definition runs in placer's own process (CLI and controller): ``$ENV.AWS_SECRET_ACCESS_KEY``
    would put a credential into conditions, Events and logs, ``now`` makes results change from
    one look to the next, ``debug``/``stderr``/``halt_error`` write to the process's streams,
    ``input``/``inputs`` and ``import``/``include`` read other data. Refused by name wherever they
    appear (``def`` bodies, arguments, string interpolation, object keys, ``reduce``...).
    """
    problems: list[str] = []
    for node in tree.walk():
        if node.kind == "call":
            name, _arity = cast(tuple[str, int], node.value)
            reason = OUTSIDE_BUILTINS.get(name)
            if reason is not None:
                problems.append(f"function '{name}' {reason} and is not allowed")
        elif node.kind == "variable" and str(node.value) in OUTSIDE_VARIABLES:
            name = str(node.value)
            problems.append(f"variable '${name}' {OUTSIDE_VARIABLES[name]} and is not allowed")
        elif node.kind == "literal" and node.value == "$__loc__":
            problems.append(
                f"variable '$__loc__' {OUTSIDE_VARIABLES['__loc__']} and is not allowed"
            )
        elif node.kind == "directive":
            problems.append(f"'{node.value}' reads jq modules from files and is not allowed")
    return problems


_Scope = tuple[dict[tuple[str, int], str], ...]


def termination_risk(tree: Node) -> str | None:
    """Why ``tree`` might not terminate quickly, or ``None`` when it surely does.

    See the module docstring for the rules. The reason is a short phrase for messages
    (``"calls until/2"``, ``"defines recursive function f/0"``).
    """
    return _risk(tree, ({},))


def _risk(node: Node, scope: _Scope) -> str | None:
    kind = node.kind
    if kind in ("reduce", "foreach"):
        return f"uses {kind} (an accumulator can grow at every step)"
    if kind == "module":
        return "imports a module"
    if kind == "call":
        name, arity = cast(tuple[str, int], node.value)
        binding = _lookup(scope, (name, arity))
        if binding == "recursive":
            return f"defines recursive function {name}/{arity}"
        if binding is None and (name, arity) not in TERMINATING_BUILTINS:
            return f"calls {name}/{arity}"
    if kind == "def":
        name, params = cast(tuple[str, tuple[str, ...]], node.value)
        body, rest = node.children
        inner: dict[tuple[str, int], str] = {(name, len(params)): "recursive"}
        for param in params:
            # a `$x` parameter also defines the filter `x` (jq desugars it that way)
            inner[(param.lstrip("$"), 0)] = "param"
        reason = _risk(body, (*scope, inner))
        if reason is not None:
            return reason
        return _risk(rest, (*scope, {(name, len(params)): "def"}))
    for child in node.children:
        reason = _risk(child, scope)
        if reason is not None:
            return reason
    return None


def _lookup(scope: _Scope, key: tuple[str, int]) -> str | None:
    for frame in reversed(scope):
        if key in frame:
            return frame[key]
    return None


# --------------------------------------------------------------------------------------------
# Bounded string repetition

#: Name of the guarded multiplication the rewrite calls (unlikely to clash with user functions).
GUARDED_MULTIPLY = "_placer_guarded_multiply_"
#: Largest string ``"s" * n`` may build, as gojq allows (256 MiB).
MAX_REPEAT_BYTES = 0x10000000
#: jq definition of :data:`GUARDED_MULTIPLY`; evaluates ``b`` then ``a`` as jq's ``a * b`` does,
#: so generators produce their outputs in the same order.
GUARDED_MULTIPLY_DEF = (
    f"def {GUARDED_MULTIPLY}(a; b): b as $y | a as $x | "
    f'if ($x | type) == "string" and ($y | type) == "number" '
    f"and ($x | utf8bytelength) * $y > {MAX_REPEAT_BYTES} "
    f'or ($y | type) == "string" and ($x | type) == "number" '
    f"and ($y | utf8bytelength) * $x > {MAX_REPEAT_BYTES} "
    f'then error("cannot repeat string: the result would exceed 256 MiB") '
    f"else $x * $y end;"
)


def guard_repetition(text: str, tree: Node) -> str:
    """``text`` with every ``a * b`` replaced by the guarded multiplication.

    jq repeats a string multiplied by a number (``"x" * 1e9``) without limit, so a manifest field
    holding a huge number could make libjq allocate gigabytes in-process; gojq refuses beyond
    256 MiB and so does the rewritten expression. Other products (numbers, object merges) are
    unchanged. The caller must put :data:`GUARDED_MULTIPLY_DEF` in front of the result.
    """
    if not any(n.kind == "binary" and n.value == "*" for n in tree.walk()):
        return text
    return _render(text, tree)


def _render(text: str, node: Node) -> str:
    if node.kind == "binary" and node.value == "*":
        left, right = node.children
        return f"{GUARDED_MULTIPLY}({_render(text, left)}; {_render(text, right)})"
    if not any(n.kind == "binary" and n.value == "*" for n in node.walk()):
        return text[node.start : node.end]
    out: list[str] = []
    position = node.start
    for child in sorted(node.children, key=lambda c: (c.start, c.end)):
        if child.start < position:  # pragma: no cover - spans never overlap
            continue
        out.append(text[position : child.start])
        out.append(_render(text, child))
        position = child.end
    out.append(text[position : node.end])
    return "".join(out)


# --------------------------------------------------------------------------------------------
# The input fields an expression's value comes from

#: a field path segment: a key, or ``None`` for every item of a list (``[]``).
Segment = str | None
#: node kinds whose every child is evaluated on the node's own input, as a value.
_VALUE_KINDS = frozenset({"paren", "alternative", "comma", "array", "negate", "optional"})
_ARITHMETIC = frozenset({"+", "-", "*", "/", "%"})


def value_paths(tree: Node) -> list[tuple[Segment, ...]]:
    """The input field paths whose values may become ``tree``'s output or an operand of its
    arithmetic: the chains ``.a.b["c"]`` in value positions (``//``, ``,``, arrays, arithmetic,
    the branches of ``if``, a ``... as $x |`` source and body), and, through a pipe whose left
    side is such a chain (``.spec.jobs[] | .replicas``), the right side's value chains under it
    (``.`` there: the left side itself; ``None`` segments: every item of a list).

    Conservative: conditions and comparisons (``if .a then``, ``.a == "x"``), function
    arguments and bodies (``.a | length``), ``reduce``/``foreach`` and anything after a pipe
    whose left side is not a plain chain are left out, so every path listed is surely read
    from the input as a value.
    """
    found: list[tuple[Segment, ...]] = []
    _value_reads(tree, (), found)
    return found


def _chain(node: Node) -> tuple[Segment, ...] | None:
    """``node`` as a plain path from its input (``.a.b["c"][]``), or ``None``."""
    if node.kind == "identity":
        return ()
    if node.kind == "field":
        base = _chain(node.children[0]) if node.children else ()
        return None if base is None else (*base, str(node.value))
    if node.kind == "index":
        target, key = node.children
        base = _chain(target)
        if base is None or key.kind != "string" or not isinstance(key.value, str):
            return None
        return (*base, key.value)
    if node.kind == "iterate":
        base = _chain(node.children[0])
        return None if base is None else (*base, None)
    if node.kind in ("paren", "optional"):
        return _chain(node.children[0])
    return None


def _value_reads(node: Node, prefix: tuple[Segment, ...], found: list[tuple[Segment, ...]]) -> None:
    chain = _chain(node)
    if chain is not None:
        if prefix or chain:
            found.append((*prefix, *chain))
        return
    kind, children = node.kind, node.children
    if kind == "pipe":
        left, right = children
        base = _chain(left)
        if base is None:
            _value_reads(left, prefix, found)
        else:  # what the right side reads of it (``.`` included), not what it tests
            _value_reads(right, (*prefix, *base), found)
    elif kind == "bind":
        _value_reads(children[0], prefix, found)
        _value_reads(children[-1], prefix, found)
    elif kind == "if":
        branches = [c for i, c in enumerate(children) if i % 2 == 1 or i == len(children) - 1]
        for child in branches:
            _value_reads(child, prefix, found)
    elif (kind == "binary" and node.value in _ARITHMETIC) or kind in _VALUE_KINDS:
        for child in children:
            _value_reads(child, prefix, found)
    elif kind == "try":
        _value_reads(children[0], prefix, found)
