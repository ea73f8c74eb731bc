"""Statistics values as Spark prints them in the `stats` JSON: string bounds cut in Java UTF-16 code units, float32
bounds as Java's Float.toString, dates and timestamps (to milliseconds) as text, and JSON with exact decimals.

`engine/stats_collect.py` turns each column's running min and max into these values.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from typing import Any

_ASCII_MAX = "\x7f"
_UTF8_MAX = "\U0010ffff"
_UTF8_MAX_UNITS = (0xDBFF, 0xDFFF)  # U+10FFFF as Java stores it: a surrogate pair

_EPOCH_DATE = dt.date(1970, 1, 1)
_EPOCH = dt.datetime(1970, 1, 1)


def _utf16_units(text: str) -> memoryview:
    return memoryview(text.encode("utf-16-le")).cast("H")


def _from_units(units: memoryview) -> str:
    return units.tobytes().decode("utf-16-le")


def truncate_min(text: str, prefix: int) -> str:
    """The string min bound: the first ``prefix`` code points."""
    # Spark SQL substring(min, 0, n) counts code points, as Python does
    return text[:prefix]


def truncate_max(text: str, prefix: int) -> str | None:
    """`StatisticsCollection.truncateMaxStringAgg`, counting Java UTF-16 code units; None when no safe max exists."""
    units = _utf16_units(text)
    length = len(units)
    if length <= prefix:
        return text
    if prefix <= 0:
        return None
    # `truncateMinStringAgg`: never end the start prefix inside a surrogate pair
    current = prefix
    if 0xD800 <= units[prefix - 1] <= 0xDBFF and 0xDC00 <= units[prefix] <= 0xDFFF:
        current += 1
    limit = 2 * prefix
    while current <= limit:
        if current >= length:
            return text
        if current + 1 < length and (units[current], units[current + 1]) == _UTF8_MAX_UNITS:
            current += 2  # U+10FFFF cannot be exceeded, so it has to stay in the prefix
        elif units[current] < 0x7F:
            return _from_units(units[:current]) + _ASCII_MAX
        else:
            return _from_units(units[:current]) + _UTF8_MAX
    return None


def _float32_text_value(value: float) -> float:
    """The double whose shortest text is the shortest text of the float32 `value`, as Java's Float.toString prints."""
    for digits in range(1, 10):
        candidate = float(f"{value:.{digits}g}")
        if struct.unpack("<f", struct.pack("<f", candidate))[0] == value:
            return candidate
    return value


def date_text(days: int) -> str | None:
    """A date given as days since the epoch as `yyyy-mm-dd`; None outside years 1-9999."""
    try:
        day = _EPOCH_DATE + dt.timedelta(days=days)
    except OverflowError:
        return None  # outside years 1-9999 Spark's text differs; no bound is always safe
    return f"{day.year:04d}-{day.month:02d}-{day.day:02d}"


def timestamp_text(micros: int, zone: bool) -> str | None:
    """Microseconds since the epoch as Spark prints them, to milliseconds ("Z" appended when ``zone``); None outside
    years 1-9999."""
    millis = micros // 1000  # Spark's ".SSS" pattern cuts the sub-millisecond digits, towards the past
    try:
        moment = _EPOCH + dt.timedelta(milliseconds=millis)
    except OverflowError:
        return None
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{millis % 1000:03d}"
    )
    return text + "Z" if zone else text


def float_value(value: float, single: bool) -> float | str:
    """A float or double bound as Spark writes it: infinities as quoted text, float32 (``single``) as Java prints it."""
    if value in (float("inf"), float("-inf")):
        return "Infinity" if value > 0 else "-Infinity"  # Jackson quotes non-finite numbers
    return _float32_text_value(value) if single else value


def dump_json_exact(value: Any) -> str:
    """Compact JSON in which `Decimal` values are written as exact numbers (``json.dumps`` would round them)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(key)}:{dump_json_exact(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump_json_exact(item) for item in value) + "]"
    if isinstance(value, Decimal):
        return format(value, "f")  # exact and in plain notation
    return json.dumps(value)
