"""The encoded table of the (k, ℓ) model, its limits and its error (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text, sorted_text_codes
from pipeline.core.hierarchies import Hierarchy
from pipeline.errors import UnusableInputError

#: Up to this many distinct sensitive tuples, :func:`diverse` is exact (branch and bound).
DIVERSE_EXACT_LIMIT = 24
#: Largest table :func:`exact_clusters` accepts (``3ⁿ`` subset DP).
EXACT_MAX_RECORDS = 16
#: Largest table the unblocked ``greedy`` method accepts (``n²`` edge matrix of float64).
GREEDY_MAX_RECORDS = 6000
#: Most distinct quasi-identifier tuples of the compiled greedy (``d × d`` edge weights between tuples, float64).
GREEDY_MAX_TUPLES = 3000


class InfeasibleError(UnusableInputError, ValueError):
    """No (k, ℓ)-anonymous table exists for this input (fewer than ``k`` records, or
    ``Diverse(whole table) < ℓ``), or the parameters are invalid."""


@dataclass(frozen=True, eq=False)
class EncodedTable:
    """Records encoded for the algorithms.

    Attributes
    ----------
    row_ids
        int64, shape ``(n,)``: the input row ids, in the order that defines "member id" (SPEC
        §14.3 ties): ascending row id.
    quasi_identifiers, sensitive_attributes
        Column names.
    hierarchies
        One :class:`Hierarchy` per quasi-identifier.
    quasi_identifier_codes
        int32, shape ``(n, q)``: base codes in each hierarchy.
    sensitive_codes
        int32, shape ``(n, m)``: per-attribute value codes (equal code = equal value).
    weights
        float64, shape ``(q,)``: the weights ``c_i`` of the cost (SPEC §14.2; default 1).
    """

    row_ids: np.ndarray
    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    hierarchies: tuple[Hierarchy, ...]
    quasi_identifier_codes: np.ndarray
    sensitive_codes: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.row_ids)

    def subset(self, positions: np.ndarray) -> EncodedTable:
        """The records at ``positions`` (in the given order)."""
        return EncodedTable(
            row_ids=self.row_ids[positions],
            quasi_identifiers=self.quasi_identifiers,
            sensitive_attributes=self.sensitive_attributes,
            hierarchies=self.hierarchies,
            quasi_identifier_codes=self.quasi_identifier_codes[positions],
            sensitive_codes=self.sensitive_codes[positions],
            weights=self.weights,
        )

    @cached_property
    def ancestors(self) -> np.ndarray:
        """int64, shape ``(n, q, L)``: every record's ancestor code at every level of each quasi-identifier's
        hierarchy, padded past the hierarchy's height with its root code (``L`` = largest height + 1); the input of
        the compiled kernels (:mod:`pipeline.core.kl_anonymity.kernels`)."""
        depth = max(h.height for h in self.hierarchies) + 1
        out = np.empty((len(self), len(self.hierarchies), depth), dtype=np.int64)
        for i, hierarchy in enumerate(self.hierarchies):
            chain = hierarchy.codes[self.quasi_identifier_codes[:, i]]
            out[:, i, : chain.shape[1]] = chain
            out[:, i, chain.shape[1] :] = chain[:, -1:]
        return out

    @cached_property
    def range_tensor(self) -> np.ndarray:
        """float64, shape ``(q, L, max nodes)``: ``range_tensor[i, h, node]`` = range ``R`` of the node of
        quasi-identifier ``i`` (0 past the end of a level or the hierarchy's height)."""
        depth = max(h.height for h in self.hierarchies) + 1
        width = max(h.range_matrix.shape[1] for h in self.hierarchies)
        out = np.zeros((len(self.hierarchies), depth, width))
        for i, hierarchy in enumerate(self.hierarchies):
            matrix = hierarchy.range_matrix
            out[i, : matrix.shape[0], : matrix.shape[1]] = matrix
        return out

    @cached_property
    def heights(self) -> np.ndarray:
        """int64, shape ``(q,)``: the height ``H_i`` of every quasi-identifier's hierarchy."""
        return np.array([h.height for h in self.hierarchies], dtype=np.int64)

    @cached_property
    def sensitive_tuples(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tuple_ids, tuples)``: int64 ``(n,)`` rank of every record's sensitive tuple among the distinct tuples
        in lexicographic order, and int64 ``(d, m)`` those tuples (``np.unique(sensitive_codes, axis=0)``)."""
        codes = self.sensitive_codes.reshape(len(self), -1).astype(np.int64)
        tuples, inverse = np.unique(codes, axis=0, return_inverse=True)
        return inverse.reshape(-1).astype(np.int64), tuples.astype(np.int64)


def encode_table(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    weights: Mapping[str, float] | None = None,
    source: str = "the input",
) -> EncodedTable:
    """Encode ``records`` for the (k, ℓ) algorithms.

    Parameters
    ----------
    records
        One row per record: ``row_id`` (int) plus the quasi-identifier and sensitive-attribute
        columns (text). Not modified.
    quasi_identifiers, sensitive_attributes
        Column names; at least one of each.
    hierarchies
        Quasi-identifier -> hierarchy (see :mod:`pipeline.core.hierarchies`).
    weights
        Optional quasi-identifier -> weight ``c_i >= 0`` (default 1 for every attribute).
    source
        Name of the data, for messages.

    Raises
    ------
    KeyError
        A column is missing from ``records``.
    pipeline.core.hierarchies.HierarchyError
        A quasi-identifier has no hierarchy or holds a value its hierarchy does not list.
    ValueError
        A negative or non-finite weight, a weight for an unknown attribute, or weights so large that the cost ``S``
        of the whole table would overflow float64.
    """
    from pipeline.core.hierarchies import HierarchyError

    missing = [c for c in ["row_id", *quasi_identifiers, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise KeyError(f"columns {missing} are not in {source}")
    if not quasi_identifiers or not sensitive_attributes:
        raise ValueError("the (k, ℓ) model needs at least one quasi-identifier and one sensitive attribute")
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(quasi_identifiers))
    if unknown:
        raise ValueError(f"weights given for {unknown}, which are not quasi-identifiers")
    if any(not (0 <= float(w) < np.inf) for w in weights.values()):
        raise ValueError(f"weights must be finite numbers >= 0, got {weights}")
    ordered = records.sort_values("row_id", kind="stable")
    chosen = []
    for attribute in quasi_identifiers:
        if attribute not in hierarchies:
            raise HierarchyError(f"no hierarchy given for quasi-identifier {attribute!r}")
        chosen.append(hierarchies[attribute])
    qi_codes = np.column_stack(
        [
            h.encode(as_text(ordered[a]), column_source=source, record_numbers=ordered["row_id"].to_numpy())
            for a, h in zip(quasi_identifiers, chosen)
        ]
    ).astype(np.int32)
    sa_codes = np.column_stack([sorted_text_codes(ordered[a])[0] for a in sensitive_attributes]).astype(np.int32)
    weight_array = np.array([float(weights.get(a, 1.0)) for a in quasi_identifiers])
    largest_cost = float(len(ordered)) * float(np.sum(weight_array * np.array([h.range_matrix.max() for h in chosen])))
    if not np.isfinite(largest_cost):
        raise ValueError(
            f"weights {weights} are too large: the cost S of {len(ordered)} records would overflow; use weights of the "
            "order of 1 (only their ratios matter)"
        )
    return EncodedTable(
        row_ids=ordered["row_id"].to_numpy(np.int64),
        quasi_identifiers=tuple(quasi_identifiers),
        sensitive_attributes=tuple(sensitive_attributes),
        hierarchies=tuple(chosen),
        quasi_identifier_codes=qi_codes.reshape(len(ordered), len(quasi_identifiers)),
        sensitive_codes=sa_codes.reshape(len(ordered), len(sensitive_attributes)),
        weights=weight_array,
    )
