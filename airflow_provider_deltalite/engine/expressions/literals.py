"""Literal coercion: converting a parsed literal to the Python value of an Arrow column type."""

from __future__ import annotations

import datetime as dt
import re
from decimal import Decimal, InvalidOperation, localcontext
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from airflow_provider_deltalite.engine.arrow_util import is_string_type
from airflow_provider_deltalite.engine.errors import InvalidExpression
from airflow_provider_deltalite.engine.expressions.nodes import sql_literal

_UTC_NAMES = frozenset({"UTC", "Etc/UTC", "+00:00", "Z", "GMT", "Etc/GMT"})


def type_name(t: pa.DataType) -> str:
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
    if is_string_type(t):
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


class LiteralMismatch(Exception):
    """Package-internal: a literal cannot be converted to a column type (callers turn it into InvalidExpression).

    Attributes:
        reason: why, when there is more to say than "the types differ".
    """

    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason
        super().__init__(reason or "type mismatch")


def mismatch_message(column: str | None, arrow_type: pa.DataType, value: object, reason: str | None) -> str:
    """The text of the InvalidExpression raised for a literal that does not fit a column type."""
    subject = "a column" if column is None else f"column '{column}'"
    text = f"cannot compare {subject} of type {type_name(arrow_type)} with {sql_literal(value)}"
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
        return coerce_literal(value, arrow_type)
    except LiteralMismatch as exc:
        raise InvalidExpression(mismatch_message(None, arrow_type, value, exc.reason)) from None


def coerce_literal(value: object, t: pa.DataType) -> object:
    """`convert_literal` for callers in this package: raises LiteralMismatch, which they word themselves."""
    bad = LiteralMismatch()
    if value is None:
        raise LiteralMismatch("null can only be tested with IS NULL or IS NOT NULL")
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
            raise LiteralMismatch("out of range")
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
            raise LiteralMismatch(f"more than {t.scale} decimal places")
        if len(exact.as_tuple().digits) > t.precision and exact != 0:
            raise LiteralMismatch("out of range")
        return exact
    if pa.types.is_boolean(t):
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("true", "false"):
            return value.strip().lower() == "true"
        raise bad
    if is_string_type(t):
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
            raise LiteralMismatch("the literal has a time zone, the column has none")
        return parsed
    if pa.types.is_null(t):
        raise LiteralMismatch("the column holds only nulls; test it with IS NULL")
    raise bad
