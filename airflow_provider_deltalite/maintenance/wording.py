"""How sizes, counts and shares read in the sentences people see: the planner's reasons, the CLI, the health page.

One place, so that "1.5 GiB" and "3 files" read the same wherever a table is described.
"""

from __future__ import annotations

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB", "PiB")


def size_unit(size: float) -> tuple[str, int]:
    """The binary unit a size reads best in (at least 1 of it, below 1024 of it) and its size in bytes."""
    power = 0
    while power < len(_UNITS) - 1 and abs(size) >= 1024 ** (power + 1):
        power += 1
    return _UNITS[power], 1024**power


def human_size(size: float) -> str:
    """``size`` bytes in binary units, one decimal at most.

    Example:
        >>> human_size(512), human_size(65536), human_size(1610612736), human_size(221184)
        ('512 B', '64 KiB', '1.5 GiB', '216 KiB')
    """
    unit, scale = size_unit(size)
    if scale == 1:
        return f"{size:,.0f} B"
    text = f"{size / scale:.1f}".removesuffix(".0")
    return f"{text} {unit}"


def count(number: int, noun: str) -> str:
    """A count and its noun (a regular plural).

    Example:
        >>> count(1, "file"), count(1024, "file")
        ('1 file', '1,024 files')
    """
    return f"{number:,} {noun}" if number == 1 else f"{number:,} {noun}s"


def percent(share: float) -> str:
    """A share (0..1) as a percentage with one decimal: ``42.9%``."""
    return f"{share * 100:.1f}%"
