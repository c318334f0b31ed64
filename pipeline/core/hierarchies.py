"""Generalization hierarchies of quasi-identifiers (ARX CSV format), validated on load.

A hierarchy of height ``H`` maps every base value (level 0) to one node per level
``1..H``; level ``H`` is a single root (usually ``*``). Nodes are integer codes per level;
``codes[b, h]`` is the node of base value ``b`` at level ``h``. Used by the (k, ℓ)-anonymity
model of P2 (SPEC §14): the lowest common ancestor (LCA) of a cluster's values, the height
climbed ``H(v, v̂)`` and the range ``R(v, v̂)`` (number of base values under ``v̂``) of the
generalisation cost (SPEC §14.2).
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np

from pipeline.errors import UnusableInputError
from pipeline.vocabulary import setting_example

__all__ = [
    "Hierarchy",
    "HierarchyError",
    "find_hierarchy_file",
    "load_available_hierarchies",
    "load_hierarchies",
    "missing_hierarchies_error",
    "read_hierarchy",
]


class HierarchyError(UnusableInputError, ValueError):
    """A hierarchy file is unusable or does not cover the data; the message names the file, the attribute and
    the row of the file or the record of the data, and says what to do. It never shows a value or a label: the
    labels of a hierarchy are values of a quasi-identifier (issue 14)."""


@dataclass(frozen=True, eq=False)
class Hierarchy:
    """One validated generalization hierarchy.

    Attributes
    ----------
    attribute
        Column it generalizes.
    labels
        ``labels[h]`` = tuple of node labels at level ``h`` (index = node code). ``labels[0]``
        are the base values in file order.
    codes
        int32 array, shape ``(n_base, H + 1)``: node code of each base value at each level;
        ``codes[:, 0] == arange(n_base)`` and ``codes[:, H] == 0``.
    ranges
        ``ranges[h]``: float64 array, one entry per node of level ``h``: the range ``R`` of the
        node, the number of base values it stands for (SPEC §14.2, [choice] §15 #29). Level 0
        nodes have range 1.
    source
        File (or description) it was read from, for error messages.
    """

    attribute: str
    labels: tuple[tuple[str, ...], ...]
    codes: np.ndarray
    ranges: tuple[np.ndarray, ...]
    source: str

    @property
    def height(self) -> int:
        """``H``: number of generalisation levels above the base values."""
        return self.codes.shape[1] - 1

    @property
    def base_values(self) -> tuple[str, ...]:
        return self.labels[0]

    @cached_property
    def range_matrix(self) -> np.ndarray:
        """float64, shape ``(H + 1, max nodes per level)``: ``range_matrix[h, node]`` = range of the
        node (0 past the end of a level), for vectorised lookups."""
        matrix = np.zeros((self.height + 1, max(len(r) for r in self.ranges)))
        for h, values in enumerate(self.ranges):
            matrix[h, : len(values)] = values
        return matrix

    @classmethod
    def from_rows(
        cls,
        rows: Sequence[Sequence[str]],
        *,
        attribute: str,
        source: str = "<rows>",
        level_ranges: Sequence[float] | None = None,
    ) -> Hierarchy:
        """Build and validate a hierarchy from rows ``[base, level1, ..., root]``.

        Parameters
        ----------
        rows
            One row per base value, all of the same length ``H + 1 >= 2``.
        attribute
            Column name (for messages).
        source
            File name (for messages).
        level_ranges
            Optional range per level (length ``H + 1``, ``level_ranges[0] == 1``) for hierarchies
            whose files list only the values in use but whose nodes stand for a fixed number of
            base values (SPEC §16.5: a month stands for 30 days whatever the data holds).
            Default: count the base values under each node.

        Raises
        ------
        HierarchyError
            Empty file, rows of different lengths, fewer than 2 columns, a duplicate base value,
            an empty label, levels that do not nest (a node with two parents), or a last level
            with more than one value (no single root).
        """
        if not rows:
            raise HierarchyError(f"hierarchy {source} for {attribute!r} is empty; give one row per value: value;level1;...;*")
        width = len(rows[0])
        for number, row in enumerate(rows, start=1):
            if len(row) != width:
                raise HierarchyError(
                    f"hierarchy {source} for {attribute!r}: row {number} has {len(row)} columns, "
                    f"row 1 has {width}; every row needs the same number of levels"
                )
            if any(cell == "" for cell in row):
                raise HierarchyError(f"hierarchy {source} for {attribute!r}: row {number} has an empty label")
        if width < 2:
            raise HierarchyError(f"hierarchy {source} for {attribute!r} has a single column; add at least a root column ('*')")
        seen: dict[str, int] = {}
        for number, row in enumerate(rows, start=1):
            if row[0] in seen:
                raise HierarchyError(
                    f"hierarchy {source} for {attribute!r}: the base value (first column) of row {number} appears on rows "
                    f"{seen[row[0]]} and {number}; list each base value once"
                )
            seen[row[0]] = number
        n_base = len(rows)
        codes = np.zeros((n_base, width), dtype=np.int32)
        labels: list[tuple[str, ...]] = []
        for level in range(width):
            index: dict[str, int] = {}
            for b, row in enumerate(rows):
                codes[b, level] = index.setdefault(row[level], len(index))
            labels.append(tuple(index))
        for level in range(1, width - 1):  # each node must have exactly one parent
            parent: dict[int, int] = {}
            first_row: dict[int, int] = {}
            for b in range(n_base):
                node, up = int(codes[b, level]), int(codes[b, level + 1])
                first_row.setdefault(node, b + 1)
                if parent.setdefault(node, up) != up:
                    raise HierarchyError(
                        f"hierarchy {source} for {attribute!r}: levels do not nest: the label in column {level + 1} of "
                        f"rows {first_row[node]} and {b + 1} is the same but column {level + 2} differs (two parents); "
                        "give every label one parent"
                    )
        if len(labels[-1]) != 1:
            raise HierarchyError(
                f"hierarchy {source} for {attribute!r}: the last column has {len(labels[-1])} different labels; "
                "it must be a single root such as '*' on every row"
            )
        _check_labels_name_one_set(rows, labels, attribute=attribute, source=source)
        if level_ranges is None:
            ranges = tuple(np.bincount(codes[:, h], minlength=len(labels[h])).astype(np.float64) for h in range(width))
        else:
            if len(level_ranges) != width or level_ranges[0] != 1:
                raise HierarchyError(
                    f"hierarchy {source} for {attribute!r}: level_ranges needs {width} entries starting with 1, got {list(level_ranges)}"
                )
            ranges = tuple(np.full(len(labels[h]), float(level_ranges[h])) for h in range(width))
        return cls(attribute=attribute, labels=tuple(labels), codes=codes, ranges=ranges, source=source)

    def encode(
        self, values: Iterable[str], *, column_source: str = "the data", record_numbers: Sequence[int] | None = None
    ) -> np.ndarray:
        """Base codes (int32, one per value) of ``values`` (texts, one per record).

        ``record_numbers`` (same length as ``values``; default 1, 2, ...) name the records in a message: the
        input's 1-based record numbers (``row_id``), so that the steward can find the value in the file.

        Raises
        ------
        HierarchyError
            A value absent from the hierarchy: names the column, the data, the hierarchy file, how many distinct
            values are missing and the record number of the first, never the value itself (issue 14).
        """
        index = {value: code for code, value in enumerate(self.labels[0])}
        values = list(values)
        absent = [k for k, v in enumerate(values) if v not in index]
        if absent:
            n_distinct = len({values[k] for k in absent})
            first = absent[0] + 1 if record_numbers is None else int(record_numbers[absent[0]])
            raise HierarchyError(
                f"column {self.attribute!r} of {column_source} has {n_distinct} distinct value(s) that hierarchy "
                f"{self.source} does not list, the first in record {first} (data rows counted from 1; values are not "
                "shown, they are data); add a row 'value;level1;...;*' to the hierarchy for each value of the column"
            )
        return np.fromiter((index[v] for v in values), dtype=np.int32, count=len(values))

    def label(self, level: int, code: int) -> str:
        """Label of node ``code`` at ``level``."""
        return self.labels[level][code]


def _check_labels_name_one_set(
    rows: Sequence[Sequence[str]], labels: Sequence[tuple[str, ...]], *, attribute: str, source: str
) -> None:
    """Refuse a generalized label that reads as something it does not stand for: a label (column 2 onwards) that is
    also a base value but stands for other base values too (a record generalized to it would be published with a value
    it does not have: rows ``A;B;*`` and ``B;A;*`` publish A's records as B), or one label that stands for different
    sets of base values in two columns. A label equal to its own base value alone (``A;A;*``) is allowed.

    Raises
    ------
    HierarchyError
        Naming the rows and columns (never the label: it may be a value of the data).
    """
    base_row = {row[0]: b for b, row in enumerate(rows)}
    levels_of: dict[str, list[int]] = {}
    for level in range(1, len(labels)):
        for label in labels[level]:
            levels_of.setdefault(label, []).append(level)
    suspects = {label: levels for label, levels in levels_of.items() if len(levels) > 1 or label in base_row}
    if not suspects:
        return
    covered: dict[tuple[str, int], list[int]] = {}
    for level in sorted({level for levels in suspects.values() for level in levels}):
        for b, row in enumerate(rows):
            if row[level] in suspects:
                covered.setdefault((row[level], level), []).append(b)
    for label, levels in suspects.items():
        first = covered[(label, levels[0])]
        if label in base_row and first != [base_row[label]]:
            other = next(b for b in first if b != base_row[label])
            raise HierarchyError(
                f"hierarchy {source} for {attribute!r}: the label in column {levels[0] + 1} of row {other + 1} is also the "
                f"base value of row {base_row[label] + 1}, but does not stand for that value alone: a record generalized "
                "to it would be published with a value it does not have; name generalized labels so that no value of "
                "the data reads as one (a range, a group name, a mask such as 021**)"
            )
        for level in levels[1:]:
            if covered[(label, level)] != first:
                row_number = covered[(label, level)][0] + 1
                raise HierarchyError(
                    f"hierarchy {source} for {attribute!r}: the label in column {level + 1} of row {row_number} is also the "
                    f"label in column {levels[0] + 1} of row {first[0] + 1}, standing for other base values there; give "
                    "labels of different levels different names"
                )


def read_hierarchy(path: str | Path, *, attribute: str | None = None, delimiter: str = ";") -> Hierarchy:
    """Read and validate one ARX hierarchy file (no header, ``;``-separated, one row per value).

    Raises
    ------
    HierarchyError
        Unreadable file or invalid content (see :meth:`Hierarchy.from_rows`).
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # a byte-order mark is not part of the first value
            rows = [[cell.strip() for cell in row] for row in csv.reader(handle, delimiter=delimiter) if row and any(row)]
    except (OSError, UnicodeDecodeError) as error:
        raise HierarchyError(f"cannot read hierarchy file {path}: {error}") from error
    return Hierarchy.from_rows(rows, attribute=attribute or path.stem, source=str(path))


def find_hierarchy_file(directory: str | Path, attribute: str) -> Path | None:
    """``<directory>/<anything>_hierarchy_<attribute>.csv`` (ARX naming) or ``<attribute>.csv``; None when neither.

    Raises
    ------
    HierarchyError
        Two or more such files (which one was meant cannot be told: both are named).
    """
    directory = Path(directory)
    exact = directory / f"{attribute}.csv"
    matches = [*([exact] if exact.is_file() else []), *sorted(directory.glob(f"*_hierarchy_{attribute}.csv"))]
    if len(matches) > 1:
        raise HierarchyError(
            f"{len(matches)} hierarchy files for {attribute!r} in {directory}: {', '.join(m.name for m in matches)}; "
            "keep one (named <attribute>.csv or <anything>_hierarchy_<attribute>.csv)"
        )
    return matches[0] if matches else None


def hierarchy_digests(directory: str | Path | None, quasi_identifiers: Sequence[str]) -> dict[str, str | None]:
    """Quasi-identifier -> SHA-256 (hex) of the content of its hierarchy file in ``directory``
    (:func:`find_hierarchy_file`), None for a quasi-identifier without one (or every one without ``directory``): what
    a release's generalization depends on, for the home's series registry (:mod:`pipeline.core.series`).

    Raises
    ------
    HierarchyError
        Two hierarchy files for one quasi-identifier.
    OSError
        A hierarchy file cannot be read.
    """
    import hashlib

    folder = Path(directory) if directory is not None else None
    digests: dict[str, str | None] = {}
    for name in quasi_identifiers:
        found = find_hierarchy_file(folder, name) if folder is not None and folder.is_dir() else None
        digests[name] = hashlib.sha256(found.read_bytes()).hexdigest() if found is not None else None
    return digests


def load_hierarchies(
    directory: str | Path,
    attributes: Sequence[str],
    *,
    data_values: Mapping[str, Iterable[str]] | None = None,
    data_source: str = "the data",
    data_record_numbers: Mapping[str, Sequence[int]] | None = None,
) -> dict[str, Hierarchy]:
    """Read the hierarchy of every attribute from ``directory`` and check it covers the data.

    Parameters
    ----------
    directory
        Folder of ARX hierarchy files (``*_hierarchy_<attribute>.csv`` or ``<attribute>.csv``).
    attributes
        Quasi-identifiers to generalize.
    data_values
        Optional attribute -> values occurring in the data; every one must be a base value.
    data_source
        Name of the data (for messages).
    data_record_numbers
        Optional attribute -> 1-based record number of each of its ``data_values`` (the input's ``row_id``),
        named in a message about a value the hierarchy does not list (default: the position, from 1).

    Returns
    -------
    dict
        attribute -> :class:`Hierarchy`.

    Raises
    ------
    HierarchyError
        Missing directory or file (names the expected file name), invalid file, or a data value
        the hierarchy does not list.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise HierarchyError(
            f"hierarchy directory {directory} does not exist; {setting_example('hierarchies_dir', 'DIR')} names an "
            "existing folder (msa-release hierarchies makes one)"
        )
    hierarchies = {}
    problems: list[HierarchyError] = []  # every quasi-identifier's problem, reported together
    for attribute in attributes:
        path = find_hierarchy_file(directory, attribute)
        if path is None:
            problems.append(
                HierarchyError(
                    f"no hierarchy for quasi-identifier {attribute!r} in {directory}: expected a file "
                    f"'{attribute}.csv' or '*_hierarchy_{attribute}.csv' (ARX format: value;level1;...;*)",
                    column=attribute,
                )
            )
            continue
        try:
            hierarchy = read_hierarchy(path, attribute=attribute)
            if data_values is not None and attribute in data_values:
                numbers = data_record_numbers.get(attribute) if data_record_numbers is not None else None
                hierarchy.encode(data_values[attribute], column_source=data_source, record_numbers=numbers)
        except HierarchyError as error:
            problems.append(error)
            continue
        hierarchies[attribute] = hierarchy
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise HierarchyError(
            f"{len(problems)} quasi-identifiers have no usable hierarchy: "
            + "; ".join(f"({k}) {p}" for k, p in enumerate(problems, 1)),
            column=problems[0].column,
        )
    return hierarchies


def missing_hierarchies_error(quasi_identifiers: Sequence[str], input_name: str) -> HierarchyError:
    """The refusal of a (k, ℓ) run on a table other than Adult's adult.data without hierarchies (exit status 2).

    Adult's shipped hierarchies are used for Adult's file only: applied to another table, a column that happens to be
    named like one of Adult's (``age``, ``education``, ``sex``) would be generalized along Adult's values. The message
    says how to make hierarchies for the table (``msa-release hierarchies``) and which setting names them, in the
    caller's vocabulary (:mod:`pipeline.vocabulary`)."""
    columns = ",".join(quasi_identifiers)
    return HierarchyError(
        f"the (k, ℓ) model generalizes every quasi-identifier along a hierarchy, and none is configured for input "
        f"{input_name} (Adult's shipped hierarchies serve only Adult's adult.data, never another table whose column "
        f"names happen to match): make them with `msa-release hierarchies --input {input_name} --quasi-identifiers "
        f"{columns} --output DIR`, check them, then give {setting_example('hierarchies_dir', 'DIR')}",
        file=input_name,
    )


def require_hierarchy_folder(directory: str | Path) -> Path:
    """``directory`` as a :class:`~pathlib.Path` when it is a folder.

    Raises
    ------
    HierarchyError
        It is not a folder (a mistyped ``hierarchies_dir`` / ``--hierarchies`` used to be ignored, every
        quasi-identifier then published as ``*``: red team, session 38).
    """
    folder = Path(directory)
    if not folder.is_dir():
        raise HierarchyError(
            f"the hierarchy folder {folder} (hierarchies_dir / --hierarchies) "
            f"{'is not a folder' if folder.exists() else 'does not exist'}: fix the path, or leave the setting "
            "empty to publish a group's or stratum's differing quasi-identifiers as '*'"
        )
    return folder


def load_available_hierarchies(directory: str | Path, attributes: Sequence[str]) -> dict[str, Hierarchy]:
    """The hierarchies of ``attributes`` that ``directory`` holds.

    Used by the QI-aware grouping of the mixed model, where a quasi-identifier without a
    hierarchy is generalized to ``*`` instead of being an error (the (k, ℓ) model needs every
    one: :func:`load_hierarchies`).

    Raises
    ------
    HierarchyError
        ``directory`` is not a folder (:func:`require_hierarchy_folder`), or a hierarchy file exists but is
        unreadable or invalid.
    """
    directory = require_hierarchy_folder(directory)
    found = {}
    for attribute in attributes:
        path = find_hierarchy_file(directory, attribute)
        if path is not None:
            found[attribute] = read_hierarchy(path, attribute=attribute)
    return found
