"""Generating ARX-format generalization hierarchies from the values of a column, the way ARX's hierarchy wizard does.

ARX (Prasser et al., "Flexible data anonymization using ARX", Software: Practice and Experience 50(7), 2020) offers
three builders in its hierarchy wizard: *intervals* for numeric attributes (each level groups the intervals of the
level below), *order-based* groups for ordered categories, and *masking* for codes (characters replaced by ``*`` from
the right). This module builds one of the three per quasi-identifier, as rows ``[base value, level 1, ..., "*"]``
that :meth:`pipeline.core.hierarchies.Hierarchy.from_rows` accepts (the format of ``data/adult/hierarchies``):

- ``interval``: every value parses as a finite number. Level 1 cuts the line into intervals of a "nice" width
  (1, 2 or 5 × 10^j, the smallest giving at most :data:`MAX_LEVEL1_INTERVALS` intervals over the values' range),
  aligned on a multiple of that width; each further level doubles the width from the same origin, so the
  intervals nest; labels are ``[low-high[`` (``[20-25[``, ``[20-30[``, ...); the last level is ``*``.
- ``mask``: codes of one length (ZIP codes, ICD chapters): level ``i`` replaces the last ``i`` characters with
  ``*`` (``02138``, ``0213*``, ``021**``, ...); the last level is ``*``.
- ``group``: any other text: the distinct values in alphabetical order (case-folded), cut into groups of
  ``group_size`` consecutive values, then groups of groups, until one group is left; a group is labelled by its
  first and last value (``Bachelors..HS-grad``); the last level is ``*``.

A missing quasi-identifier is read as the value ``?`` (:data:`pipeline.io.loading.MISSING_QUASI_IDENTIFIER`); it gets
its own row, ``?`` at every level below the root, whatever the builder.

Pure (no Dagster, no file access): ``pipeline/cli/hierarchies.py`` reads the input with the tool's reader and writes
the files.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from pipeline.errors import UnusableInputError

__all__ = [
    "BUILDERS",
    "GeneratedHierarchy",
    "HierarchyGenerationError",
    "MAX_LEVEL1_INTERVALS",
    "build_hierarchy",
    "build_hierarchies",
    "choose_builder",
]

#: The builders, as named on the command line (``--builder column=interval``).
BUILDERS = ("interval", "mask", "group")
#: At most this many intervals on level 1 of an ``interval`` hierarchy (the width is the smallest nice one).
MAX_LEVEL1_INTERVALS = 20
#: The label of a missing quasi-identifier (the reader keeps it as a value of its own).
MISSING = "?"
#: The root of every generated hierarchy.
ROOT = "*"
#: Values the hierarchy reader cannot give back: it splits on ``;`` (quoted cells are fine) and strips every cell.
_UNSTRIPPED = re.compile(r"^\s|\s$")


class HierarchyGenerationError(UnusableInputError, ValueError):
    """Hierarchies cannot be generated for the given columns; the message lists every problem (column and what to
    do), never a value of the data."""


@dataclass(frozen=True)
class GeneratedHierarchy:
    """One generated hierarchy.

    Attributes
    ----------
    attribute
        The quasi-identifier.
    builder
        ``interval``, ``mask`` or ``group``.
    rows
        One row per distinct value of the column (``?`` included when values are missing):
        ``[value, level 1, ..., "*"]``, all of the same length, sorted by value.
    """

    attribute: str
    builder: str
    rows: tuple[tuple[str, ...], ...]

    @property
    def height(self) -> int:
        """Levels above the base values."""
        return len(self.rows[0]) - 1


def _number(text: str) -> Decimal | None:
    """``text`` as an exact finite decimal, or None when it is not a number (``nan``, ``inf`` are not)."""
    try:
        value = Decimal(text.strip())
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def choose_builder(values: Sequence[str]) -> str:
    """The builder ARX's wizard would suggest for the distinct, non-missing ``values`` of a column.

    ``mask`` for codes: every value a digit string of one length of at least 3 characters, and some value starting
    with ``0`` (so not a count or an amount: ``02138``); ``interval`` when every value is a finite number;
    ``group`` otherwise (and for a column without values).
    """
    values = [v for v in values if v != MISSING]
    if not values:
        return "group"
    lengths = {len(v) for v in values}
    if len(lengths) == 1 and min(lengths) >= 3 and all(v.isdigit() for v in values) and any(v.startswith("0") for v in values):
        return "mask"
    if all(_number(v) is not None for v in values):
        return "interval"
    return "group"


def _nice_width(span: Decimal) -> Decimal:
    """The smallest width 1, 2 or 5 × 10^j giving at most :data:`MAX_LEVEL1_INTERVALS` intervals over ``span``."""
    if span <= 0:
        return Decimal(1)
    exponent = math.floor(math.log10(float(span) / MAX_LEVEL1_INTERVALS)) - 1
    while True:
        for mantissa in (1, 2, 5):
            width = Decimal(mantissa).scaleb(exponent)
            if span / width < MAX_LEVEL1_INTERVALS:
                return width
        exponent += 1


def _plain(number: Decimal) -> str:
    """``20``, not ``2E+1`` or ``20.0``."""
    return format(number.normalize(), "f")


def _interval_levels(values: Sequence[str]) -> dict[str, list[str]]:
    """Labels of every level above the base (the root excluded) for each value: nested intervals (see module)."""
    numbers = {v: _number(v) for v in values}
    low, high = min(n for n in numbers.values() if n is not None), max(n for n in numbers.values() if n is not None)
    width = _nice_width(high - low)
    origin = (low / width).to_integral_value(rounding="ROUND_FLOOR") * width
    levels: dict[str, list[str]] = {v: [] for v in values}
    while True:
        starts = {
            v: origin + ((n - origin) / width).to_integral_value(rounding="ROUND_FLOOR") * width
            for v, n in numbers.items()
            if n is not None
        }
        for value, start in starts.items():
            levels[value].append(f"[{_plain(start)}-{_plain(start + width)}[")
        if len(set(starts.values())) <= 1:
            break
        width *= 2
    return levels


def _mask_levels(values: Sequence[str]) -> dict[str, list[str]]:
    """``0213*``, ``021**``, ... for codes of one length; the fully masked level is the root."""
    length = len(values[0])
    return {v: [v[: length - i] + "*" * i for i in range(1, length)] for v in values}


def _group_levels(values: Sequence[str], group_size: int) -> dict[str, list[str]]:
    """Alphabetical groups of ``group_size`` values, then of ``group_size`` groups, ... (see module)."""
    ordered = sorted(values, key=lambda v: (v.casefold(), v))
    members: list[list[str]] = [[v] for v in ordered]
    levels: dict[str, list[str]] = {v: [] for v in values}
    while len(members) > group_size:
        grouped = [sum(members[i : i + group_size], []) for i in range(0, len(members), group_size)]
        used: set[str] = set()
        for group in grouped:
            label = f"{group[0]}..{group[-1]}" if len(group) > 1 else group[0]
            while label in used:  # a value holding '..' could read like another group's label: keep nodes apart
                label += "'"
            used.add(label)
            for value in group:
                levels[value].append(label)
        members = grouped
    return levels


def build_hierarchy(
    attribute: str, values: Sequence[str], *, builder: str | None = None, group_size: int = 3
) -> GeneratedHierarchy:
    """The hierarchy of one quasi-identifier from its distinct values.

    Parameters
    ----------
    attribute
        The column's name.
    values
        Its distinct values as the reader gives them (text, stripped; a missing value is ``?``).
    builder
        ``interval``, ``mask`` or ``group``; None: :func:`choose_builder`.
    group_size
        ``group``: values (then groups) per group, at least 2.

    Returns
    -------
    GeneratedHierarchy
        Rows that :meth:`pipeline.core.hierarchies.Hierarchy.from_rows` accepts, one per value.

    Raises
    ------
    HierarchyGenerationError
        Every problem of the column at once: no value; a value the hierarchy file cannot hold (empty, or with
        spaces around it: the reader strips cells); ``interval`` on a value that is not a number; ``mask`` on codes
        of different lengths. Values are never quoted.
    """
    distinct = sorted(set(values))
    present = [v for v in distinct if v != MISSING]
    chosen = builder or choose_builder(present)
    problems = []
    if not distinct:
        problems.append(f"{attribute!r}: the column has no value")
    unusable = [v for v in distinct if v == "" or _UNSTRIPPED.search(v)]
    if unusable:
        problems.append(
            f"{attribute!r}: {len(unusable)} value(s) are empty or have spaces around them, which a hierarchy file cannot "
            "hold (its cells are stripped); read the input with strip_whitespace (the default) and the empty string as a "
            "missing-value token"
        )
    if chosen not in BUILDERS:
        problems.append(f"{attribute!r}: unknown builder {chosen!r}; use one of {list(BUILDERS)}")
    elif chosen == "interval":
        not_numbers = [v for v in present if _number(v) is None]
        if not_numbers:
            problems.append(
                f"{attribute!r}: {len(not_numbers)} distinct value(s) are not numbers, so the column cannot be cut into "
                "intervals; use the builder 'group' for it (or fix the values)"
            )
    elif chosen == "mask" and len({len(v) for v in present}) > 1:
        problems.append(
            f"{attribute!r}: the values have {len({len(v) for v in present})} different lengths, so characters cannot be "
            "masked from the right level by level; use the builder 'group' (or 'interval' for numbers)"
        )
    if group_size < 2:
        problems.append(f"group size {group_size} is below 2")
    if problems:
        raise HierarchyGenerationError("; ".join(problems), column=attribute)
    if not present:
        levels: dict[str, list[str]] = {}
    elif chosen == "interval":
        levels = _interval_levels(present)
    elif chosen == "mask":
        levels = _mask_levels(present)
    else:
        levels = _group_levels(present, group_size)
    height = max((len(labels) for labels in levels.values()), default=0) + 1
    rows = []
    for value in distinct:
        middle = levels.get(value, [])
        # a value whose chain is shorter (fewer levels) repeats its last label up to the common height
        middle = middle + [middle[-1] if middle else value] * (height - 1 - len(middle))
        rows.append((value, *middle, ROOT))
    return GeneratedHierarchy(attribute=attribute, builder=chosen, rows=tuple(rows))


def build_hierarchies(
    columns: Mapping[str, Sequence[str]], *, builders: Mapping[str, str] | None = None, group_size: int = 3
) -> dict[str, GeneratedHierarchy]:
    """:func:`build_hierarchy` for every column, reporting every problem of every column in one error.

    Parameters
    ----------
    columns
        Quasi-identifier -> its distinct values (text as read; a missing value is ``?``).
    builders
        Quasi-identifier -> builder, for the columns whose builder is not :func:`choose_builder`'s.
    group_size
        See :func:`build_hierarchy`.

    Raises
    ------
    HierarchyGenerationError
        Builders named for columns that are not given, and every column's problems, in one message.
    """
    builders = dict(builders or {})
    problems = []
    unknown = sorted(set(builders) - set(columns))
    if unknown:
        problems.append(f"builders are given for {unknown}, which are not among the quasi-identifiers {list(columns)}")
    built = {}
    for attribute, values in columns.items():
        try:
            built[attribute] = build_hierarchy(attribute, values, builder=builders.get(attribute), group_size=group_size)
        except HierarchyGenerationError as error:
            problems.append(str(error))
    if problems:
        raise HierarchyGenerationError(f"no hierarchy written ({len(problems)} problem(s)): " + "; ".join(problems))
    return built
