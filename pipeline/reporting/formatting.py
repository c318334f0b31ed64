"""How report figures are written for people: rounded numbers, percentages, never a long float or scientific notation.

Every figure of ``report.html`` and of the CLI summaries (``msa-release run``, ``msa-release audit``) goes through
:func:`format_figure` (a number), :func:`format_share` (a share 0..1 as a percentage) or :func:`format_count_share`
("508 (2.1 %)"), so that a reader sees ``0.3333`` rather than ``0.3333333333333333`` and ``< 0.0001`` rather than
``1.4779e-05``. The exact values stay in ``report.json``, ``manifest.json`` and the audit's JSON. No Dagster here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

__all__ = ["format_count_share", "format_figure", "format_share"]


def _strip(text: str) -> str:
    """``"1.50"`` -> ``"1.5"``, ``"2.00"`` -> ``"2"`` (a fixed-point text without trailing zeros)."""
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_figure(value: object) -> str:
    """A figure as text for a reader.

    Parameters
    ----------
    value
        None (``"n/a"``), a bool (``"yes"``/``"no"``), an int (thousands separated: ``"12,420"``), a float, a
        mapping or list of these (``"age: 0.3345, education: 0.3392"``), or anything else (``str``).

    Returns
    -------
    str
        Floats are rounded by size and never in scientific notation: integral values as ints; from 1,000 on, no
        decimals (``"29,188"``); from 10, one (``"16.7"``); from 1, two (``"1.48"``); below 1, four (``"0.3333"``),
        and a non-zero value that rounds to 0 is ``"< 0.0001"`` (``"> -0.0001"`` below 0). Trailing zeros are
        dropped (``"0.05"``). NaN is ``"n/a"``, infinity ``"∞"``.
    """
    if value is None:
        return "n/a"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        size = abs(value)
        if value == int(value) and size < 1e15:
            return f"{int(value):,}"
        if size >= 1000:
            return f"{value:,.0f}"
        if size >= 10:
            return _strip(f"{value:,.1f}")
        if size >= 1:
            return _strip(f"{value:,.2f}")
        text = _strip(f"{value:.4f}")
        if text in ("0", "-0"):
            return "< 0.0001" if value > 0 else "> -0.0001"
        return text
    if isinstance(value, Mapping):
        return ", ".join(f"{key}: {format_figure(item)}" for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(format_figure(item) for item in value) + "]"
    return str(value)


def format_share(share: float | None) -> str:
    """A share 0..1 as a percentage with one decimal: ``0.021`` -> ``"2.1 %"``; exactly 0 and 1 as ``"0 %"`` and
    ``"100 %"``; a non-zero share below 0.05 % as ``"< 0.1 %"`` and one short of 1 that would round to 100 as
    ``"> 99.9 %"``, so that a percentage never hides that something is (or is not) there. None or NaN: ``"n/a"``."""
    if share is None or (isinstance(share, float) and math.isnan(share)):
        return "n/a"
    percent = float(share) * 100
    if percent == 0:
        return "0 %"
    if percent == 100:
        return "100 %"
    if 0 < percent < 0.05:
        return "< 0.1 %"
    if 99.95 <= percent < 100:
        return "> 99.9 %"
    return _strip(f"{percent:.1f}") + " %"


def format_count_share(count: int | None, total: int | None) -> str:
    """``"508 (2.1 %)"``: a count and its share of ``total`` (the count alone when the total is 0 or unknown)."""
    if count is None:
        return "n/a"
    if not total:
        return format_figure(int(count))
    return f"{format_figure(int(count))} ({format_share(count / total)})"
