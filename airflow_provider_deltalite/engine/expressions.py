"""A small predicate language (comparisons, IS NULL, AND/OR/NOT) with binding, row filtering and file skipping."""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa
import pyarrow.compute as pc

from airflow_provider_deltalite.engine.errors import DeltaLiteError, InvalidExpression

__all__ = [
    "And",
    "Comparison",
    "Expr",
    "IsNull",
    "Not",
    "Or",
    "bind",
    "column_path",
    "convert_literal",
    "expression_columns",
    "format_column",
    "may_match_partitions",
    "may_match_stats",
    "parse_expression",
    "parse_timestamp_text",
    "to_arrow_filter",
    "to_sql",
]

COMPARISON_OPS = ("=", "!=", "<", "<=", ">", ">=")
_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_NEGATED = {"=": "!=", "!=": "=", "<": ">=", "<=": ">", ">": "<=", ">=": "<"}
_KEYWORDS = frozenset({"AND", "OR", "NOT", "IS", "NULL", "TRUE", "FALSE"})
_BARE_IDENTIFIER = re.compile(r"[^\W\d]\w*\Z")
_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "+00:00", "Z", "GMT", "Etc/GMT"})


# ---------------------------------------------------------------------------------------------------------------------
# AST


@dataclass(frozen=True)
class Comparison:
    """`column op value`; `column` is a dotted path (segments holding `.` or a backquote are backquoted)."""

    column: str
    op: str
    value: object

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class IsNull:
    """`column IS NULL`, or `column IS NOT NULL` when `negated`."""

    column: str
    negated: bool = False

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class And:
    """Both children hold."""

    left: Expr
    right: Expr

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Or:
    """At least one child holds."""

    left: Expr
    right: Expr

    def __str__(self) -> str:
        return to_sql(self)


@dataclass(frozen=True)
class Not:
    """The child does not hold (SQL three-valued logic: NOT of null is null)."""

    child: Expr

    def __str__(self) -> str:
        return to_sql(self)


Expr = Comparison | IsNull | And | Or | Not


# ---------------------------------------------------------------------------------------------------------------------
# Column paths


def column_path(column: str) -> tuple[str, ...]:
    """Split a column reference as stored in the AST into its path segments.

    Args:
        column: `a`, `a.b`, or with backquoted segments such as `` `a.b`.c `` (a doubled backquote escapes one).

    Returns:
        The segments, e.g. `("a", "b")`.

    Raises:
        InvalidExpression: the reference is empty or has an unterminated backquote.
    """
    segments: list[str] = []
    i, n = 0, len(column)
    while True:
        if i < n and column[i] == "`":
            j, buf = i + 1, []
            while True:
                if j >= n:
                    raise InvalidExpression(f"unterminated backquote in column reference {column!r}")
                if column[j] == "`":
                    if j + 1 < n and column[j + 1] == "`":
                        buf.append("`")
                        j += 2
                        continue
                    break
                buf.append(column[j])
                j += 1
            segments.append("".join(buf))
            i = j + 1
            if i < n and column[i] != ".":
                raise InvalidExpression(f"unexpected text after backquoted name in column reference {column!r}")
        else:
            j = column.find(".", i)
            j = n if j < 0 else j
            if j == i:
                raise InvalidExpression(f"empty name in column reference {column!r}")
            segments.append(column[i:j])
            i = j
        if i >= n:
            return tuple(segments)
        i += 1  # skip the dot
        if i >= n:
            raise InvalidExpression(f"empty name in column reference {column!r}")


def format_column(path: tuple[str, ...] | list[str]) -> str:
    """Join path segments into the AST's column string, backquoting segments that hold `.` or a backquote.

    Args:
        path: the segments, outermost first.

    Returns:
        A string that `column_path` splits back into `path`.
    """
    out = []
    for seg in path:
        if seg == "" or "." in seg or "`" in seg:
            out.append("`" + seg.replace("`", "``") + "`")
        else:
            out.append(seg)
    return ".".join(out)


def expression_columns(expr: Expr) -> set[str]:
    """Top-level column names an expression references (the first segment of nested paths).

    Args:
        expr: a parsed or bound expression.

    Returns:
        The set of top-level names.
    """
    return {column_path(leaf.column)[0] for leaf in _leaves(expr)}


def _leaves(expr: Expr) -> Iterator[Comparison | IsNull]:
    stack: list[Expr] = [expr]
    while stack:
        node = stack.pop()
        if isinstance(node, (Comparison, IsNull)):
            yield node
        elif isinstance(node, (And, Or)):
            stack.extend((node.right, node.left))
        elif isinstance(node, Not):
            stack.append(node.child)
        else:
            raise InvalidExpression(f"not an expression node: {type(node).__name__}")


# ---------------------------------------------------------------------------------------------------------------------
# Rendering


def _sql_identifier(seg: str) -> str:
    if _BARE_IDENTIFIER.match(seg) and seg.upper() not in _KEYWORDS:
        return seg
    return "`" + seg.replace("`", "``") + "`"


def _sql_literal(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        # non-finite floats have no numeric literal; bind accepts them back as strings
        return repr(value) if math.isfinite(value) else "'" + str(value) + "'"
    if isinstance(value, (int, Decimal)):
        return str(value)
    if isinstance(value, dt.datetime):
        text = value.isoformat(sep=" ")
    elif isinstance(value, dt.date):
        text = value.isoformat()
    elif isinstance(value, (bytes, bytearray)):
        text = bytes(value).decode("utf-8", errors="replace")
    else:
        text = str(value)
    return "'" + text.replace("'", "''") + "'"


def to_sql(expr: Expr) -> str:
    """Render an expression as text that `parse_expression` reads back to an equal expression.

    Args:
        expr: a parsed or bound expression.

    Returns:
        The predicate text, with parentheses only where precedence needs them.
    """
    return _to_sql(expr, 0)


def _to_sql(expr: Expr, parent_level: float) -> str:
    # levels: 1 = OR, 2 = AND, 3 = NOT / leaf; a right operand of the same level gets parentheses so that the
    # left-associative parser rebuilds the same tree
    if isinstance(expr, Comparison):
        col = ".".join(_sql_identifier(s) for s in column_path(expr.column))
        return f"{col} {expr.op} {_sql_literal(expr.value)}"
    if isinstance(expr, IsNull):
        col = ".".join(_sql_identifier(s) for s in column_path(expr.column))
        return f"{col} IS {'NOT ' if expr.negated else ''}NULL"
    if isinstance(expr, Not):
        return "NOT " + _to_sql(expr.child, 3)
    if isinstance(expr, And):
        text, level = f"{_to_sql(expr.left, 2)} AND {_to_sql(expr.right, 2.5)}", 2
    elif isinstance(expr, Or):
        text, level = f"{_to_sql(expr.left, 1)} OR {_to_sql(expr.right, 1.5)}", 1
    else:
        raise InvalidExpression(f"not an expression node: {type(expr).__name__}")
    return f"({text})" if parent_level > level else text


# ---------------------------------------------------------------------------------------------------------------------
# Parsing

_TOKEN_RE = re.compile(
    r"""
    (?P<ws>\s+)
  | (?P<quoted>`(?:[^`]|``)*`)
  | (?P<string>'(?:[^']|'')*')
  | (?P<number>[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<op><=|>=|<>|!=|==|=|<|>)
  | (?P<lparen>\()
  | (?P<rparen>\))
  | (?P<dot>\.)
  | (?P<ident>[^\W\d]\w*)
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class _Token:
    kind: str  # quoted, string, number, op, lparen, rparen, dot, ident, keyword, end
    text: str
    pos: int


def _tokenize(text: str) -> list[_Token]:
    tokens: list[_Token] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            if text[pos] == "'":
                raise InvalidExpression(f'unterminated string literal at position {pos} in filter "{text}"')
            if text[pos] == "`":
                raise InvalidExpression(f'unterminated backquoted name at position {pos} in filter "{text}"')
            raise InvalidExpression(f'unexpected character {text[pos]!r} at position {pos} in filter "{text}"')
        kind = m.lastgroup or ""
        if kind != "ws":
            word = m.group()
            if kind == "ident" and word.upper() in _KEYWORDS:
                tokens.append(_Token("keyword", word.upper(), pos))
            else:
                tokens.append(_Token(kind, word, pos))
        pos = m.end()
    tokens.append(_Token("end", "", len(text)))
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = _tokenize(text)
        self.i = 0

    def fail(self, problem: str, token: _Token | None = None) -> InvalidExpression:
        token = token or self.peek()
        if token.kind != "end":
            problem = f"{problem} at position {token.pos}"
        elif not problem.endswith("end of input"):
            problem = f"{problem} at end of input"
        return InvalidExpression(f'{problem} in filter "{self.text}"')

    def peek(self) -> _Token:
        return self.tokens[self.i]

    def next(self) -> _Token:
        tok = self.tokens[self.i]
        if tok.kind != "end":
            self.i += 1
        return tok

    def keyword(self, word: str) -> bool:
        tok = self.peek()
        if tok.kind == "keyword" and tok.text == word:
            self.i += 1
            return True
        return False

    def parse(self) -> Expr:
        if self.peek().kind == "end":
            raise InvalidExpression("empty filter")
        expr = self.or_expr()
        tok = self.peek()
        if tok.kind != "end":
            raise self.fail(f"unexpected {_describe(tok)}", tok)
        return expr

    def or_expr(self) -> Expr:
        expr = self.and_expr()
        while self.keyword("OR"):
            expr = Or(expr, self.and_expr())
        return expr

    def and_expr(self) -> Expr:
        expr = self.not_expr()
        while self.keyword("AND"):
            expr = And(expr, self.not_expr())
        return expr

    def not_expr(self) -> Expr:
        if self.keyword("NOT"):
            return Not(self.not_expr())
        return self.primary()

    def primary(self) -> Expr:
        tok = self.peek()
        if tok.kind == "lparen":
            self.next()
            expr = self.or_expr()
            if self.peek().kind != "rparen":
                raise self.fail("expected ')'")
            self.next()
            return expr
        if tok.kind in ("ident", "quoted"):
            return self.column_predicate()
        if tok.kind in ("number", "string") or (tok.kind == "keyword" and tok.text in ("TRUE", "FALSE", "NULL")):
            return self.literal_first_predicate()
        raise self.fail(f"expected a column name, a literal or '(' but found {_describe(tok)}", tok)

    def column(self) -> str:
        segments = [self.segment()]
        while self.peek().kind == "dot":
            self.next()
            tok = self.peek()
            if tok.kind not in ("ident", "quoted", "keyword"):
                raise self.fail(f"expected a field name after '.' but found {_describe(tok)}", tok)
            segments.append(self.segment(allow_keyword=True))
        return format_column(segments)

    def segment(self, allow_keyword: bool = False) -> str:
        tok = self.next()
        if tok.kind == "quoted":
            name = tok.text[1:-1].replace("``", "`")
            if not name:
                raise self.fail("empty backquoted name", tok)
            return name
        if tok.kind == "ident" or (allow_keyword and tok.kind == "keyword"):
            # keywords are upper-cased by the tokenizer; take the original spelling from the text
            return self.text[tok.pos : tok.pos + len(tok.text)]
        raise self.fail(f"expected a column name but found {_describe(tok)}", tok)

    def column_predicate(self) -> Expr:
        column = self.column()
        tok = self.peek()
        if tok.kind == "keyword" and tok.text == "IS":
            self.next()
            negated = self.keyword("NOT")
            if not self.keyword("NULL"):
                raise self.fail("expected NULL after IS" + (" NOT" if negated else ""))
            return IsNull(column, negated)
        if tok.kind != "op":
            raise self.fail(f"expected a comparison operator or IS after column '{column}' but found {_describe(tok)}")
        op = _normalize_op(self.next().text)
        value = self.literal()
        return Comparison(column, op, value)

    def literal_first_predicate(self) -> Expr:
        value = self.literal()
        tok = self.peek()
        if tok.kind != "op":
            raise self.fail(f"expected a comparison operator after a literal but found {_describe(tok)}")
        op = _normalize_op(self.next().text)
        tok = self.peek()
        if tok.kind not in ("ident", "quoted"):
            raise self.fail(f"expected a column name after '{op}' but found {_describe(tok)}", tok)
        return Comparison(self.column(), _FLIPPED[op], value)

    def literal(self) -> object:
        tok = self.next()
        if tok.kind == "number":
            return _parse_number(tok.text)
        if tok.kind == "string":
            return tok.text[1:-1].replace("''", "'")
        if tok.kind == "keyword" and tok.text in ("TRUE", "FALSE"):
            return tok.text == "TRUE"
        if tok.kind == "keyword" and tok.text == "NULL":
            raise self.fail("null can only be tested with IS NULL or IS NOT NULL", tok)
        raise self.fail(f"expected a literal but found {_describe(tok)}", tok)


def _normalize_op(op: str) -> str:
    return {"<>": "!=", "==": "="}.get(op, op)


def _parse_number(text: str) -> int | Decimal:
    if re.fullmatch(r"[+-]?\d+", text):
        return int(text)
    # Decimal keeps the literal exact; bind turns it into a float or a decimal as the column needs
    return Decimal(text)


def _describe(tok: _Token) -> str:
    if tok.kind == "end":
        return "end of input"
    return f"'{tok.text}'"


def parse_expression(text: str) -> Expr:
    """Parse a predicate such as ``a > 1 AND (b = 'x' OR c IS NULL)``.

    Grammar: comparisons `col OP literal` or `literal OP col` with OP one of `= != <> < <= > >=`, `col IS [NOT] NULL`,
    `NOT`, `AND` (binds tighter than `OR`), `OR` and parentheses. Keywords are case-insensitive. Columns are bare
    identifiers, dotted paths into structs (`a.b`), or backquoted (`` `Company Very Short` ``). Literals are integers,
    decimals and floats (`-1.5e3`), single-quoted strings (`''` escapes a quote) and `true`/`false`.

    Args:
        text: the predicate.

    Returns:
        The expression tree. Numbers with a fraction or exponent are kept as `Decimal`; `<>` becomes `!=`.

    Raises:
        InvalidExpression: the text does not parse; the message names the position.
    """
    if not isinstance(text, str):
        raise InvalidExpression(f"filter must be a string, not {type(text).__name__}")
    return _Parser(text).parse()


# ---------------------------------------------------------------------------------------------------------------------
# Binding


def _type_name(t: pa.DataType) -> str:
    """Name a type the way Delta users know it."""
    names = {
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.uint8(): "unsigned byte",
        pa.uint16(): "unsigned short",
        pa.uint32(): "unsigned integer",
        pa.uint64(): "unsigned long",
        pa.float16(): "half float",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.date64(): "date",
    }
    if t in names:
        return names[t]
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return "binary"
    if pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_decimal(t):
        return f"decimal({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "timestamp" if t.tz else "timestamp_ntz"
    if pa.types.is_struct(t):
        return "struct"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return "array"
    if pa.types.is_map(t):
        return "map"
    return str(t)


class _LiteralMismatch(Exception):
    """Internal: a literal cannot be converted to a column type (callers turn it into InvalidExpression).

    Attributes:
        reason: why, when there is more to say than "the types differ".
    """

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason
        super().__init__(reason or "type mismatch")


def _mismatch_message(column: str | None, arrow_type: pa.DataType, value: object, reason: str | None) -> str:
    subject = "a column" if column is None else f"column '{column}'"
    text = f"cannot compare {subject} of type {_type_name(arrow_type)} with {_sql_literal(value)}"
    return f"{text} ({reason})" if reason else text


_INT_RANGES = {
    pa.int8(): (-(2**7), 2**7 - 1),
    pa.int16(): (-(2**15), 2**15 - 1),
    pa.int32(): (-(2**31), 2**31 - 1),
    pa.int64(): (-(2**63), 2**63 - 1),
    pa.uint8(): (0, 2**8 - 1),
    pa.uint16(): (0, 2**16 - 1),
    pa.uint32(): (0, 2**32 - 1),
    pa.uint64(): (0, 2**64 - 1),
}

_TIMESTAMP_RE = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[T ](?P<h>\d{2}):(?P<m>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?)?"
    r"\s*(?P<tz>Z|z|UTC|[+-]\d{2}(?::?\d{2})?)?\Z"
)


def parse_timestamp_text(text: str) -> dt.datetime:
    """Parse `yyyy-mm-dd[( |T)hh:mm[:ss[.fffffffff]]][Z|±hh[:mm]]`; digits past microseconds are truncated.

    Args:
        text: the timestamp text.

    Returns:
        A naive datetime when the text has no zone, else an aware one in UTC.

    Raises:
        ValueError: the text is not such a timestamp.
    """
    m = _TIMESTAMP_RE.match(text.strip())
    if m is None:
        raise ValueError(f"not a timestamp: {text!r}")
    date = dt.date.fromisoformat(m["date"])
    micros = int((m["f"] or "0")[:6].ljust(6, "0"))
    value = dt.datetime(date.year, date.month, date.day, int(m["h"] or 0), int(m["m"] or 0), int(m["s"] or 0), micros)
    zone = m["tz"]
    if zone is None:
        return value
    if zone in ("Z", "z", "UTC"):
        return value.replace(tzinfo=dt.UTC)
    sign = -1 if zone[0] == "-" else 1
    digits = zone[1:].replace(":", "")
    offset = dt.timedelta(hours=int(digits[:2]), minutes=int(digits[2:4] or 0))
    return value.replace(tzinfo=dt.timezone(sign * offset)).astimezone(dt.UTC)


def _zone(tz: str) -> dt.tzinfo:
    if tz in _UTC_NAMES:
        return dt.UTC
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", tz)
    if m:
        delta = dt.timedelta(hours=int(m[2]), minutes=int(m[3]))
        return dt.timezone(-delta if m[1] == "-" else delta)
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return dt.UTC


def convert_literal(value: object, arrow_type: pa.DataType) -> object:
    """Convert a literal to the Python value of an Arrow type (see `bind` for the accepted forms).

    Args:
        value: the literal as parsed (int, Decimal, float, str, bool) or already converted.
        arrow_type: the column type.

    Returns:
        The converted value.

    Raises:
        InvalidExpression: the literal does not fit the type (the message names the type and literal only).
    """
    try:
        return _convert(value, arrow_type)
    except _LiteralMismatch as exc:
        raise InvalidExpression(_mismatch_message(None, arrow_type, value, exc.reason)) from None


def _convert(value: object, t: pa.DataType) -> object:
    bad = _LiteralMismatch()
    if value is None:
        raise _LiteralMismatch("null can only be tested with IS NULL or IS NOT NULL")
    if pa.types.is_integer(t):
        if isinstance(value, bool):
            raise bad
        if isinstance(value, float):
            if not value.is_integer():
                raise bad
            value = int(value)
        elif isinstance(value, Decimal):
            if not value.is_finite() or value != value.to_integral_value():
                raise bad
            value = int(value)
        elif isinstance(value, str):
            try:
                value = int(value.strip())
            except ValueError:
                raise bad from None
        elif not isinstance(value, int):
            raise bad
        lo, hi = _INT_RANGES[t]
        if not lo <= value <= hi:
            raise _LiteralMismatch("out of range")
        return value
    if pa.types.is_floating(t):
        if isinstance(value, bool):
            raise bad
        if isinstance(value, (int, float, Decimal)):
            try:
                return float(value)
            except OverflowError:
                raise bad from None
        if isinstance(value, str):
            try:
                return float(value.strip())
            except ValueError:
                raise bad from None
        raise bad
    if pa.types.is_decimal(t):
        if isinstance(value, bool):
            raise bad
        try:
            if isinstance(value, float):
                dec = Decimal(repr(value))
            elif isinstance(value, (int, Decimal)):
                dec = Decimal(value)
            elif isinstance(value, str):
                dec = Decimal(value.strip())
            else:
                raise bad
            if not dec.is_finite():
                raise bad
            with localcontext() as ctx:
                ctx.prec = 200  # the default 28 digits is less than decimal(38) needs
                quantum = Decimal(1).scaleb(-t.scale)
                exact = dec.quantize(quantum)
        except InvalidOperation:
            raise bad from None
        if exact != dec:
            raise _LiteralMismatch(f"more than {t.scale} decimal places")
        if len(exact.as_tuple().digits) > t.precision and exact != 0:
            raise _LiteralMismatch("out of range")
        return exact
    if pa.types.is_boolean(t):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise bad
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        if isinstance(value, str):
            return value
        raise bad
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        if isinstance(value, (bytes, bytearray)):
            return bytes(value)
        if isinstance(value, str):
            return value.encode("utf-8")
        raise bad
    if pa.types.is_fixed_size_binary(t):
        raw = value.encode("utf-8") if isinstance(value, str) else value
        if isinstance(raw, (bytes, bytearray)) and len(raw) == t.byte_width:
            return bytes(raw)
        raise bad
    if pa.types.is_date(t):
        if isinstance(value, dt.datetime):
            raise bad
        if isinstance(value, dt.date):
            return value
        if isinstance(value, str):
            try:
                return dt.date.fromisoformat(value.strip())
            except ValueError:
                raise bad from None
        raise bad
    if pa.types.is_timestamp(t):
        if isinstance(value, dt.datetime):
            parsed = value
        elif isinstance(value, dt.date):
            parsed = dt.datetime(value.year, value.month, value.day)
        elif isinstance(value, str):
            try:
                parsed = parse_timestamp_text(value)
            except ValueError:
                raise bad from None
        else:
            raise bad
        if t.tz:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=dt.UTC)
            # pyarrow only compares timestamps of the same zone, so use the column's zone (same instant)
            return parsed.astimezone(_zone(t.tz))
        if parsed.tzinfo is not None:
            raise _LiteralMismatch("the literal has a time zone, the column has none")
        return parsed
    if pa.types.is_null(t):
        raise _LiteralMismatch("the column holds only nulls; test it with IS NULL")
    raise bad


def _find_field(fields: list[pa.Field], name: str) -> pa.Field | str | None:
    """Return the field named `name` (exact, else the unique case-insensitive match), None, or "ambiguous"."""
    exact = [f for f in fields if f.name == name]
    if len(exact) == 1:
        return exact[0]
    if len(exact) > 1:
        return "ambiguous"
    folded = [f for f in fields if f.name.casefold() == name.casefold()]
    if len(folded) == 1:
        return folded[0]
    return "ambiguous" if folded else None


def _resolve(path: tuple[str, ...], schema: pa.Schema, expr_text: str) -> tuple[tuple[str, ...], pa.DataType]:
    fields = list(schema)
    first = _find_field(fields, path[0])
    if first is None and len(path) > 1:
        # a bare dotted name may be a top-level column whose name holds dots
        whole = _find_field(fields, ".".join(path))
        if isinstance(whole, pa.Field):
            return (whole.name,), whole.type
    if first == "ambiguous":
        raise InvalidExpression(f"ambiguous column '{path[0]}' (differs only in case) in filter \"{expr_text}\"")
    if first is None:
        raise InvalidExpression(f"unknown column '{format_column(path)}' in filter \"{expr_text}\"")
    assert isinstance(first, pa.Field)
    resolved, current = [first.name], first
    for seg in path[1:]:
        if not pa.types.is_struct(current.type):
            raise InvalidExpression(
                f"column '{format_column(resolved)}' of type {_type_name(current.type)} has no field '{seg}'"
                f' in filter "{expr_text}"'
            )
        child = _find_field(list(current.type), seg)
        if child == "ambiguous":
            raise InvalidExpression(
                f"ambiguous field '{seg}' of column '{format_column(resolved)}' in filter \"{expr_text}\""
            )
        if child is None:
            raise InvalidExpression(f"unknown column '{format_column(path)}' in filter \"{expr_text}\"")
        assert isinstance(child, pa.Field)
        resolved.append(child.name)
        current = child
    return tuple(resolved), current.type


def bind(expr: Expr, schema: pa.Schema) -> Expr:
    """Check an expression against a schema and convert its literals to the column types.

    Column names match case-sensitively first, then by a unique case-insensitive match (the result uses the schema's
    spelling). Literal conversions: integers (range-checked), floats, `Decimal` (must fit precision and scale), strings,
    booleans (also `'true'`/`'false'`), dates from `'yyyy-mm-dd'`, timestamps from `'yyyy-mm-dd[ hh:mm:ss[.ffffff]]'`
    or ISO 8601 (aware in the column's zone, UTC for Delta tables; a naive literal is read as UTC), naive datetimes
    for timestamp_ntz, and bytes from strings for binary. Numeric strings are accepted for numeric columns.

    Args:
        expr: a parsed expression.
        schema: the table's logical Arrow schema (partition columns included).

    Returns:
        An equal-shaped expression with resolved column names and typed values.

    Raises:
        InvalidExpression: an unknown or ambiguous column, a literal that does not fit its column, or a comparison on a
            struct, array or map column.
    """
    if not isinstance(schema, pa.Schema):
        raise InvalidExpression(f"bind needs a pyarrow Schema, not {type(schema).__name__}")
    text = to_sql(expr)
    return _bind(expr, schema, text)


def _bind(expr: Expr, schema: pa.Schema, text: str) -> Expr:
    if isinstance(expr, And):
        return And(_bind(expr.left, schema, text), _bind(expr.right, schema, text))
    if isinstance(expr, Or):
        return Or(_bind(expr.left, schema, text), _bind(expr.right, schema, text))
    if isinstance(expr, Not):
        return Not(_bind(expr.child, schema, text))
    if isinstance(expr, IsNull):
        path, _ = _resolve(column_path(expr.column), schema, text)
        return IsNull(format_column(path), expr.negated)
    if isinstance(expr, Comparison):
        if expr.op not in COMPARISON_OPS:
            raise InvalidExpression(f"unknown operator '{expr.op}' in filter \"{text}\"")
        path, arrow_type = _resolve(column_path(expr.column), schema, text)
        try:
            value = _convert(expr.value, arrow_type)
        except _LiteralMismatch as exc:
            message = _mismatch_message(format_column(path), arrow_type, expr.value, exc.reason)
            raise InvalidExpression(f'{message} in filter "{text}"') from None
        return Comparison(format_column(path), expr.op, value)
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


# ---------------------------------------------------------------------------------------------------------------------
# Row filtering


def _scalar(value: object) -> pa.Scalar:
    try:
        return pa.scalar(value)
    except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
        raise InvalidExpression(f"literal {_sql_literal(value)} has no Arrow equivalent ({exc})") from None


def to_arrow_filter(expr: Expr) -> pc.Expression:
    """Turn a bound expression into a pyarrow compute expression for row filtering.

    Rows where the predicate is null (a comparison with a null value) are dropped by pyarrow filters, which gives SQL
    semantics; `NOT`, `AND` and `OR` use Kleene logic.

    Args:
        expr: an expression returned by `bind`.

    Returns:
        The expression, usable with `Table.filter` or `pyarrow.dataset` scans.

    Raises:
        InvalidExpression: a literal has no Arrow equivalent or an operator is unknown.
    """
    if isinstance(expr, And):
        return to_arrow_filter(expr.left) & to_arrow_filter(expr.right)
    if isinstance(expr, Or):
        return to_arrow_filter(expr.left) | to_arrow_filter(expr.right)
    if isinstance(expr, Not):
        return ~to_arrow_filter(expr.child)
    if isinstance(expr, IsNull):
        field = pc.field(*column_path(expr.column))
        return field.is_valid() if expr.negated else field.is_null()
    if isinstance(expr, Comparison):
        field = pc.field(*column_path(expr.column))
        value = _scalar(expr.value)
        if expr.op == "=":
            return field == value
        if expr.op == "!=":
            return field != value
        if expr.op == "<":
            return field < value
        if expr.op == "<=":
            return field <= value
        if expr.op == ">":
            return field > value
        if expr.op == ">=":
            return field >= value
        raise InvalidExpression(f"unknown operator '{expr.op}' in filter \"{to_sql(expr)}\"")
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


# ---------------------------------------------------------------------------------------------------------------------
# Partition pruning

_COMPARE = {
    "=": pc.equal,
    "!=": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _compare(values: pa.Array, op: str, literal: object) -> pa.BooleanArray | None:
    """Compare an array with a literal converted to the array's type; None when that is not possible."""
    try:
        if pa.types.is_dictionary(values.type):
            values = values.cast(values.type.value_type)
        converted = _convert(literal, values.type)
        return _COMPARE[op](values, _scalar(converted))
    except (_LiteralMismatch, InvalidExpression, KeyError, pa.ArrowException, TypeError, ValueError, OverflowError):
        return None


def _as_array(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 0:
            return pa.array([], type=values.type)
        return values.combine_chunks()
    return values


def _lookup_column(names: list[str], name: str) -> int | None:
    if name in names:
        return names.index(name) if names.count(name) == 1 else None
    folded = [i for i, n in enumerate(names) if n.casefold() == name.casefold()]
    return folded[0] if len(folded) == 1 else None


def may_match_partitions(expr: Expr, partitions: pa.Table) -> pa.BooleanArray:
    """Decide per file whether its partition values can satisfy an expression.

    Comparisons on columns missing from `partitions` (data columns, nested paths) are unknown and may be true or false,
    so `NOT` of them stays possible. A null partition value makes a comparison null (never true), as in SQL.

    Args:
        expr: a bound expression.
        partitions: one row per file, one typed column per partition column.

    Returns:
        A boolean array without nulls, True where the file may hold matching rows.

    Raises:
        InvalidExpression: `expr` is not an expression.
    """
    if isinstance(partitions, pa.RecordBatch):
        partitions = pa.Table.from_batches([partitions])
    if not isinstance(partitions, pa.Table):
        raise InvalidExpression(f"partitions must be a pyarrow Table, not {type(partitions).__name__}")
    n = partitions.num_rows
    may_true, _ = _partition_eval(expr, partitions, n)
    return may_true


def _partition_eval(expr: Expr, table: pa.Table, n: int) -> tuple[pa.BooleanArray, pa.BooleanArray]:
    """Return (may be true, may be false) per file; both are over-approximations, so NOT just swaps them."""
    if isinstance(expr, Not):
        may_true, may_false = _partition_eval(expr.child, table, n)
        return may_false, may_true
    if isinstance(expr, And):
        lt, lf = _partition_eval(expr.left, table, n)
        rt, rf = _partition_eval(expr.right, table, n)
        return pc.and_(lt, rt), pc.or_(lf, rf)
    if isinstance(expr, Or):
        lt, lf = _partition_eval(expr.left, table, n)
        rt, rf = _partition_eval(expr.right, table, n)
        return pc.or_(lt, rt), pc.and_(lf, rf)
    if not isinstance(expr, (Comparison, IsNull)):
        raise InvalidExpression(f"not an expression node: {type(expr).__name__}")
    unknown = _constant(True, n)
    path = column_path(expr.column)
    idx = _lookup_column(table.column_names, path[0]) if len(path) == 1 else None
    if idx is None:
        return unknown, unknown
    values = _as_array(table.column(idx))
    if isinstance(expr, IsNull):
        is_null = pc.is_null(values)
        if expr.negated:
            is_null = pc.invert(is_null)
        return is_null, pc.invert(is_null)
    if expr.op not in _COMPARE:
        return unknown, unknown
    result = _compare(values, expr.op, expr.value)
    if result is None:
        return unknown, unknown
    # a null comparison (null partition value) is neither true nor false
    return pc.fill_null(result, False), pc.fill_null(pc.invert(result), False)


def _constant(value: bool, n: int) -> pa.BooleanArray:
    return pa.repeat(pa.scalar(value, pa.bool_()), n) if n else pa.array([], pa.bool_())


# ---------------------------------------------------------------------------------------------------------------------
# Data skipping with file statistics


def _negation_normal_form(expr: Expr, negate: bool = False) -> Expr:
    """Push NOT down to the leaves, leaving `Not` only directly above a comparison.

    Under Kleene logic `NOT (x < v)` is true exactly when `x >= v` is, except for NaN, where both comparisons are
    false and the negation is true; keeping the `Not` lets the float check see it.
    """
    if isinstance(expr, Not):
        return _negation_normal_form(expr.child, not negate)
    if isinstance(expr, And):
        left, right = _negation_normal_form(expr.left, negate), _negation_normal_form(expr.right, negate)
        return Or(left, right) if negate else And(left, right)
    if isinstance(expr, Or):
        left, right = _negation_normal_form(expr.left, negate), _negation_normal_form(expr.right, negate)
        return And(left, right) if negate else Or(left, right)
    if isinstance(expr, IsNull):
        return IsNull(expr.column, expr.negated != negate)
    if isinstance(expr, Comparison):
        if expr.op not in _NEGATED:
            raise InvalidExpression(f"unknown operator '{expr.op}' in filter \"{to_sql(expr)}\"")
        return Not(expr) if negate else expr
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


def _struct_child(values: pa.Array | None, name: str) -> pa.Array | None:
    """Field `name` of a struct array with the parent's nulls applied; None if absent."""
    if values is None or not pa.types.is_struct(values.type):
        return None
    idx = values.type.get_field_index(name)
    if idx < 0:
        return None
    return pc.struct_field(values, [idx])


def _stats_path(stats: pa.StructArray, section: str, path: tuple[str, ...]) -> pa.Array | None:
    values = _struct_child(stats, section)
    for seg in path:
        values = _struct_child(values, seg)
    return values


def _widen_timestamp_max(max_values: pa.Array) -> pa.Array | None:
    """Stats hold timestamps truncated to milliseconds, so the true max can be up to 999 microseconds larger."""
    unit = max_values.type.unit
    pad = {"us": 999, "ns": 999_999}.get(unit)
    if pad is None:
        return max_values  # second/millisecond columns lose nothing to the truncation
    try:
        return pc.add_checked(max_values, pa.scalar(pad, pa.duration(unit)))
    except pa.ArrowException:
        return None


def may_match_stats(expr: Expr, stats: pa.StructArray | pa.Table | None, num_files: int) -> pa.BooleanArray:
    """Decide per file whether its min/max/null-count statistics allow a row that satisfies an expression.

    The expression is first put in negation normal form (De Morgan, flipped operators), then each leaf is checked:
    `=` needs min <= v <= max, `<`/`<=` look at min, `>`/`>=` at max, `!=` fails only when min = max = v, `IS NULL`
    needs nullCount > 0 and `IS NOT NULL` needs nullCount < numRecords. A comparison also fails when every value is
    null. Missing statistics (null row, null value, column not collected) always give True, so a file is skipped
    only when it cannot match. Timestamp maxima are widened by 999 microseconds for the millisecond truncation.
    On float columns `!=` and negated comparisons never skip: NaN satisfies them and min/max do not record NaN.
    Wide bounds (`tightBounds` false) need no special case: they still bound the rows, and null counts are physical.

    Args:
        expr: a bound expression (logical column names).
        stats: the result of `parse_stats` (or a table with the same columns); None means no statistics.
        num_files: the number of files; must equal the length of `stats`.

    Returns:
        A boolean array without nulls, True where the file may hold matching rows.

    Raises:
        DeltaLiteError: `stats` does not hold `num_files` rows.
        InvalidExpression: `expr` is not an expression.
    """
    if stats is None:
        return _constant(True, num_files)
    if isinstance(stats, pa.RecordBatch):
        stats = pa.Table.from_batches([stats])
    if isinstance(stats, pa.Table):
        stats = _as_array(stats.to_struct_array())
    elif isinstance(stats, pa.ChunkedArray):
        stats = _as_array(stats)
    if not isinstance(stats, pa.StructArray):
        raise DeltaLiteError(f"file statistics must be a struct array, not {type(stats).__name__}")
    if len(stats) != num_files:
        raise DeltaLiteError(f"file statistics hold {len(stats)} rows but there are {num_files} files")
    return _stats_eval(_negation_normal_form(expr), stats, num_files)


def _stats_eval(expr: Expr, stats: pa.StructArray, n: int) -> pa.BooleanArray:
    if isinstance(expr, And):
        return pc.and_(_stats_eval(expr.left, stats, n), _stats_eval(expr.right, stats, n))
    if isinstance(expr, Or):
        return pc.or_(_stats_eval(expr.left, stats, n), _stats_eval(expr.right, stats, n))
    if isinstance(expr, IsNull):
        return _stats_is_null(expr, stats, n)
    if isinstance(expr, Comparison):
        return _stats_compare(expr, stats, n)
    if isinstance(expr, Not) and isinstance(expr.child, Comparison):
        child = expr.child
        return _stats_compare(Comparison(child.column, _NEGATED[child.op], child.value), stats, n, negated=True)
    raise InvalidExpression(f"not an expression node: {type(expr).__name__}")


def _int_counts(values: pa.Array | None) -> pa.Array | None:
    if values is None or not pa.types.is_integer(values.type):
        return None
    return values


def _stats_is_null(expr: IsNull, stats: pa.StructArray, n: int) -> pa.BooleanArray:
    null_count = _int_counts(_stats_path(stats, "nullCount", column_path(expr.column)))
    if null_count is None:
        return _constant(True, n)
    if not expr.negated:
        return pc.fill_null(pc.greater(null_count, 0), True)
    num_records = _int_counts(_struct_child(stats, "numRecords"))
    if num_records is None:
        return _constant(True, n)
    return pc.fill_null(pc.less(null_count, num_records), True)


def _stats_compare(expr: Comparison, stats: pa.StructArray, n: int, negated: bool = False) -> pa.BooleanArray:
    path = column_path(expr.column)
    mins = _stats_path(stats, "minValues", path)
    maxs = _stats_path(stats, "maxValues", path)
    floating = any(v is not None and pa.types.is_floating(v.type) for v in (mins, maxs))
    if floating and (negated or expr.op == "!="):
        # NaN makes `!=` and every negated comparison true, and min/max say nothing about NaN
        return _all_true_unless_all_null(stats, path, n)
    if maxs is not None and pa.types.is_timestamp(maxs.type):
        maxs = _widen_timestamp_max(maxs)
    op = expr.op

    def bound(values: pa.Array | None, cmp: str) -> pa.BooleanArray:
        # unknown bound or a literal that cannot be compared: the file may match
        if values is None:
            return _constant(True, n)
        result = _compare(values, cmp, expr.value)
        return _constant(True, n) if result is None else pc.fill_null(result, True)

    if op == "=":
        result = pc.and_(bound(mins, "<="), bound(maxs, ">="))
    elif op in ("<", "<="):
        result = bound(mins, op)
    elif op in (">", ">="):
        result = bound(maxs, op)
    elif op == "!=":
        if mins is None or maxs is None:
            result = _constant(True, n)
        else:
            eq_min, eq_max = _compare(mins, "=", expr.value), _compare(maxs, "=", expr.value)
            if eq_min is None or eq_max is None:
                result = _constant(True, n)
            else:
                all_equal = pc.and_(pc.fill_null(eq_min, False), pc.fill_null(eq_max, False))
                result = pc.invert(all_equal)
    else:
        raise InvalidExpression(f"unknown operator '{op}' in filter \"{to_sql(expr)}\"")

    return pc.and_(result, _all_true_unless_all_null(stats, path, n))


def _all_true_unless_all_null(stats: pa.StructArray, path: tuple[str, ...], n: int) -> pa.BooleanArray:
    """False for files whose values of `path` are all null: no comparison (negated or not) is true on null."""
    null_count = _int_counts(_stats_path(stats, "nullCount", path))
    num_records = _int_counts(_struct_child(stats, "numRecords"))
    if null_count is None or num_records is None:
        return _constant(True, n)
    return pc.invert(pc.fill_null(pc.equal(null_count, num_records), False))
