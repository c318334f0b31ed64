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

__all__ = [
    "Hierarchy",
    "HierarchyError",
    "find_hierarchy_file",
    "load_available_hierarchies",
    "load_hierarchies",
    "read_hierarchy",
]


class HierarchyError(UnusableInputError, ValueError):
    """A hierarchy file is unusable or does not cover the data; the message names the file,
    the attribute and the offending value, and says what to do."""


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
                    f"hierarchy {source} for {attribute!r}: row {number} ({';'.join(row)!r}) has {len(row)} columns, "
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
                    f"hierarchy {source} for {attribute!r}: base value {row[0]!r} appears on rows {seen[row[0]]} and {number}"
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
            for b in range(n_base):
                node, up = int(codes[b, level]), int(codes[b, level + 1])
                if parent.setdefault(node, up) != up:
                    raise HierarchyError(
                        f"hierarchy {source} for {attribute!r}: levels do not nest: {labels[level][node]!r} (level {level}) "
                        f"has two parents, {labels[level + 1][parent[node]]!r} and {labels[level + 1][up]!r}"
                    )
        if len(labels[-1]) != 1:
            raise HierarchyError(
                f"hierarchy {source} for {attribute!r}: the last column has {len(labels[-1])} values "
                f"({', '.join(labels[-1][:5])}...); it must be a single root such as '*'"
            )
        if level_ranges is None:
            ranges = tuple(np.bincount(codes[:, h], minlength=len(labels[h])).astype(np.float64) for h in range(width))
        else:
            if len(level_ranges) != width or level_ranges[0] != 1:
                raise HierarchyError(
                    f"hierarchy {source} for {attribute!r}: level_ranges needs {width} entries starting with 1, got {list(level_ranges)}"
                )
            ranges = tuple(np.full(len(labels[h]), float(level_ranges[h])) for h in range(width))
        return cls(attribute=attribute, labels=tuple(labels), codes=codes, ranges=ranges, source=source)

    def encode(self, values: Iterable[str], *, column_source: str = "the data") -> np.ndarray:
        """Base codes (int32) of ``values``.

        Raises
        ------
        HierarchyError
            A value absent from the hierarchy (names up to 5 such values, the column and the file).
        """
        index = {value: code for code, value in enumerate(self.labels[0])}
        values = list(values)
        missing = sorted({v for v in values if v not in index})
        if missing:
            raise HierarchyError(
                f"column {self.attribute!r} of {column_source} has value(s) {missing[:5]}"
                f"{' and more' if len(missing) > 5 else ''} that hierarchy {self.source} does not list; "
                f"add a row 'value;...;*' for each"
            )
        return np.fromiter((index[v] for v in values), dtype=np.int32, count=len(values))

    def label(self, level: int, code: int) -> str:
        """Label of node ``code`` at ``level``."""
        return self.labels[level][code]


def read_hierarchy(path: str | Path, *, attribute: str | None = None, delimiter: str = ";") -> Hierarchy:
    """Read and validate one ARX hierarchy file (no header, ``;``-separated, one row per value).

    Raises
    ------
    HierarchyError
        Unreadable file or invalid content (see :meth:`Hierarchy.from_rows`).
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = [[cell.strip() for cell in row] for row in csv.reader(handle, delimiter=delimiter) if row and any(row)]
    except (OSError, UnicodeDecodeError) as error:
        raise HierarchyError(f"cannot read hierarchy file {path}: {error}") from error
    return Hierarchy.from_rows(rows, attribute=attribute or path.stem, source=str(path))


def find_hierarchy_file(directory: str | Path, attribute: str) -> Path | None:
    """``<directory>/<anything>_hierarchy_<attribute>.csv`` (ARX naming) or ``<attribute>.csv``."""
    directory = Path(directory)
    exact = directory / f"{attribute}.csv"
    if exact.is_file():
        return exact
    matches = sorted(directory.glob(f"*_hierarchy_{attribute}.csv"))
    return matches[0] if matches else None


def load_hierarchies(
    directory: str | Path,
    attributes: Sequence[str],
    *,
    data_values: Mapping[str, Iterable[str]] | None = None,
    data_source: str = "the data",
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
        raise HierarchyError(f"hierarchy directory {directory} does not exist; pass --hierarchies DIR")
    hierarchies = {}
    for attribute in attributes:
        path = find_hierarchy_file(directory, attribute)
        if path is None:
            raise HierarchyError(
                f"no hierarchy for quasi-identifier {attribute!r} in {directory}: expected a file "
                f"'{attribute}.csv' or '*_hierarchy_{attribute}.csv' (ARX format: value;level1;...;*)"
            )
        hierarchy = read_hierarchy(path, attribute=attribute)
        if data_values is not None and attribute in data_values:
            hierarchy.encode(data_values[attribute], column_source=data_source)
        hierarchies[attribute] = hierarchy
    return hierarchies


def load_available_hierarchies(directory: str | Path, attributes: Sequence[str]) -> dict[str, Hierarchy]:
    """The hierarchies of ``attributes`` that ``directory`` holds (none if it does not exist).

    Used by the QI-aware grouping of the mixed model, where a quasi-identifier without a
    hierarchy is generalized to ``*`` instead of being an error (the (k, ℓ) model needs every
    one: :func:`load_hierarchies`).

    Raises
    ------
    HierarchyError
        A hierarchy file exists but is unreadable or invalid.
    """
    directory = Path(directory)
    if not directory.is_dir():
        return {}
    found = {}
    for attribute in attributes:
        path = find_hierarchy_file(directory, attribute)
        if path is not None:
            found[attribute] = read_hierarchy(path, attribute=attribute)
    return found
