"""The predicate parser: text such as ``a > 1 AND (b = 'x' OR c IS NULL)`` to an expression tree."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal

from airflow_provider_deltalite.engine.errors import InvalidExpression
from airflow_provider_deltalite.engine.expressions.nodes import (
    KEYWORDS,
    And,
    Comparison,
    Expr,
    IsNull,
    Not,
    Or,
    format_column,
)

_FLIPPED = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}

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
            if kind == "ident" and word.upper() in KEYWORDS:
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
