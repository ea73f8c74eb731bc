"""One option value parsed and checked, with one message per rule wherever it is checked: the options objects
(`maintenance.options`) use these, and so do the operations and surfaces that take the same values.

Like `maintenance.options`, this module imports only the engine's errors, so the Airflow layer can use it without
loading pyarrow.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from airflow_provider_deltalite.engine.errors import InvalidArgument

HOUR_MS = 3_600_000


# -- checks shared with the operations (one message per rule, wherever it is checked) ---------------------------------


def positive_bytes(name: str, value: Any, table_uri: str | None = None) -> int | None:
    """A positive whole number of bytes, or None (unset)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 0):
        raise InvalidArgument(f"{name} must be a positive number of bytes, got {value!r}", table_uri)
    return value


def share(name: str, value: Any, table_uri: str | None = None) -> float | None:
    """A number between 0 and 1, or None (unset)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise InvalidArgument(f"{name} must be between 0 and 1, got {value!r}", table_uri)
    return float(value)


def retention_ms(retention_hours: Any, table_uri: str | None = None) -> int | None:
    """``retention_hours`` in milliseconds, or None when not given.

    Raises:
        InvalidArgument: not a finite, non-negative number of hours.
    """
    if retention_hours is None:
        return None
    if isinstance(retention_hours, bool) or not isinstance(retention_hours, int | float):
        raise InvalidArgument(f"retention_hours must be a number of hours, got {retention_hours!r}", table_uri)
    if not math.isfinite(retention_hours):
        raise InvalidArgument(f"retention_hours must be a finite number of hours, got {retention_hours!r}", table_uri)
    if retention_hours < 0:
        raise InvalidArgument(f"retention_hours must not be negative, got {retention_hours:g}", table_uri)
    return round(retention_hours * HOUR_MS)


def strict_flag(name: str, value: Any) -> bool:
    """A bool, and nothing else (the Python API and JSON; text goes through `flag`)."""
    if not isinstance(value, bool):
        raise InvalidArgument(f"{name} must be true or false, got {value!r}")
    return value


def one_of(name: str, value: Any, choices: Sequence[str], *, fold_case: bool = False) -> str:
    """``value`` if it is one of ``choices`` (compared lower-cased and stripped with ``fold_case``)."""
    text = value.strip().lower() if fold_case and isinstance(value, str) else value
    if text not in choices:
        raise InvalidArgument(f"{name} must be {' or '.join(repr(c) for c in choices)}, got {value!r}")
    return str(text)


# -- converters for rendered templates and other text (None, "" and "None" mean unset) --------------------------------


def optional_text(value: Any) -> str | None:
    """A string value; None, "" and a rendered "None" mean unset."""
    if value is None:
        return None
    text = str(value).strip()
    return None if text in ("", "None") else text


def whole_number(name: str, value: Any) -> int | None:
    """An integer (an int, or a string or float holding one)."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a whole number, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    text = optional_text(value)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be a whole number, got {text!r}") from None


def real_number(name: str, value: Any) -> float | None:
    """A number (an int or float, or a string holding one)."""
    if isinstance(value, bool):
        raise InvalidArgument(f"{name} must be a number, got {value!r}")
    if isinstance(value, int | float):
        return float(value)
    text = optional_text(value)
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise InvalidArgument(f"{name} must be a number, got {text!r}") from None


def flag(name: str, value: Any) -> bool:
    """A bool, or a rendered "true"/"false" (any case)."""
    if isinstance(value, bool):
        return value
    text = optional_text(value)
    if text is not None and text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise InvalidArgument(f"{name} must be true or false, got {value!r}")


def split_columns(text: str) -> list[str] | None:
    """``a,b,c`` as names, a backquoted name keeping a comma or dot whole; None when a name is empty."""
    names, current, quoted = [], "", False
    for char in text:
        if char == "`":
            quoted = not quoted
        if char == "," and not quoted:
            names.append(current.strip())
            current = ""
        else:
            current += char
    names.append(current.strip())
    return None if any(not n for n in names) else names


def column_names(name: str, value: Any) -> list[str]:
    """Column names from a list, a JSON list, a rendered Python list or a comma-separated string."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                # a Python list rendered by Jinja: ['a', 'b']
                value = [part.strip().strip("'\"") for part in text.strip("[]").split(",")]
        else:
            value = split_columns(text) or []
    if not isinstance(value, list | tuple) or not value or not all(isinstance(c, str) and c.strip() for c in value):
        raise InvalidArgument(f"{name} must be a non-empty list of column names, got {value!r}")
    return [c.strip() for c in value]


def history_location(value: Any) -> None:
    """``history_uri`` is unset or a non-empty string (whether a Delta table with the history schema is there is
    checked against storage by the surfaces, before anything runs)."""
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise InvalidArgument(f"history_uri must be the URI of the operations history table, got {value!r}")
