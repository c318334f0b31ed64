"""Synthetic tables of any size drawn from a real table's rows (``msa-release synthesize``).

The scale benchmark (issue 5) needs tables of 1, 3 and 10 million records whose strong rules
are Adult's, so that the timings measure the same release at a larger size. A synthetic record
is a whole row of the source table (its quasi-identifiers and sensitive attributes after the
missing-value policy), drawn at random; every joint frequency of the source is kept up to
sampling noise and no new combination of values appears.

Two sampling designs (``sampling``):

* ``"balanced"`` (default): every source row appears ``⌊N/n⌋`` times, and ``N mod n``
  distinct source rows (drawn without replacement) once more; then the rows are shuffled. This
  is sampling with replacement with the multiplicities balanced: each row's count is
  ``q = ⌊N/n⌋`` or ``q + 1``, so every support moves by less than a factor ``1 + 1/q``
  and a rule confidence by much less (the extra rows are a random subset). On Adult (default
  columns, min_confidence 0.8) the 7 strong rules came out unchanged for 5 seeds out of 5 at
  every N tried from 2n = 61,436 to 10M. Between n and 2n (q = 1) rare values can gain
  rules: 40,000 rows, seed 0, has 9.
* ``"replacement"``: ``N`` independent uniform draws with replacement (a bootstrap sample).
  Rare values and the rule closest to the threshold (education = Doctorate ⇒ occupation =
  Prof-specialty, 0.8065, support 398) then flip easily: the rules were Adult's for 0, 2 and 3
  seeds out of 5 at 61,436, 100,000 and 200,000 rows (5 of 5 from 1M on).

:func:`synthesize` reports whether the sample's strong rules equal the source's, computed
exactly from the multiplicities (no second pass over the written file).

Out of core: the row positions are drawn ``chunk_rows`` at a time (:func:`iter_row_index_chunks`) and
written with pyarrow as one dictionary-encoded row group per chunk, so memory is the source table plus one
chunk whatever the number of rows (30M and 100M records for the scale benchmark of issue 17; the full
index alone would be 4 bytes per record). The same source, ``rows``, ``seed``, ``sampling`` and
``chunk_rows`` give the same file bytes (with the same pyarrow version).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.columns import as_text
from pipeline.core.rules import exact_fraction, mine_strong_rules

__all__ = [
    "SAMPLING_DESIGNS",
    "SynthesisResult",
    "iter_row_index_chunks",
    "sample_row_indices",
    "synthesize",
    "weighted_rule_set",
]

#: Sampling designs of :func:`sample_row_indices`.
SAMPLING_DESIGNS = ("balanced", "replacement")

#: Key of the Parquet key-value metadata that records how a file was made.
PARQUET_METADATA_KEY = b"msa_release.synthetic"


@dataclass(frozen=True)
class SynthesisResult:
    """What :func:`synthesize` wrote.

    Attributes
    ----------
    path
        The Parquet file.
    rows
        Records written.
    columns
        Column names, in file order.
    source_rows
        Records of the source table (after the missing-value policy).
    source_rules, sample_rules
        Number of strong rules of the source and of the sample.
    rules_equal_source
        Whether the two rule sets are equal (antecedent and consequent attribute and value).
    """

    path: Path
    rows: int
    columns: list[str]
    source_rows: int
    source_rules: int
    sample_rules: int
    rules_equal_source: bool


def iter_row_index_chunks(
    n_source: int, rows: int, *, seed: int, sampling: str = "balanced", chunk_rows: int = 1_000_000
) -> Iterator[np.ndarray]:
    """Source row positions of a synthetic table, in output order, ``chunk_rows`` at a time (out of core).

    Memory is O(``n_source`` + ``chunk_rows``) whatever ``rows`` is: the full index (4 bytes per record, 400 MB
    at 100M records) is never held.

    * ``"balanced"``: the multiplicities are fixed first (every source row ``q = ⌊rows/n_source⌋`` times, plus
      ``rows mod n_source`` distinct rows drawn without replacement once more); then each chunk draws how many
      copies of every row it takes from the copies not yet written (multivariate hypergeometric,
      ``numpy.random.Generator.multivariate_hypergeometric``, method "marginals") and shuffles them. Drawing
      without replacement chunk by chunk and shuffling inside the chunk is a uniformly random order of the whole
      multiset, the same distribution as shuffling the full index at once.
    * ``"replacement"``: ``chunk_rows`` independent uniform draws per chunk.

    Parameters
    ----------
    n_source
        Rows of the source table (≥ 1).
    rows
        Rows to draw (≥ 1).
    seed
        Seed of ``numpy.random.default_rng`` (same ``seed`` and ``chunk_rows``, same chunks).
    sampling
        ``"balanced"`` or ``"replacement"`` (module docstring).
    chunk_rows
        Rows per chunk (≥ 1); the last chunk holds the rest.

    Yields
    ------
    numpy.ndarray
        int32 (int64 from 2^31 source rows), length ``chunk_rows`` (the last: the rest), values in
        ``[0, n_source)``; ``ceil(rows / chunk_rows)`` chunks.

    Raises
    ------
    ValueError
        ``n_source``, ``rows`` or ``chunk_rows`` below 1, or an unknown ``sampling`` (raised before the first
        chunk).
    """
    if n_source < 1 or rows < 1:
        raise ValueError(f"need at least one source row and one row to draw, got n_source={n_source}, rows={rows}")
    if sampling not in SAMPLING_DESIGNS:
        raise ValueError(f"unknown sampling design {sampling!r}; use one of {list(SAMPLING_DESIGNS)}")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    return _row_index_chunks(n_source, rows, seed=seed, sampling=sampling, chunk_rows=chunk_rows)


def _row_index_chunks(n_source: int, rows: int, *, seed: int, sampling: str, chunk_rows: int) -> Iterator[np.ndarray]:
    dtype = np.int32 if n_source < 2**31 else np.int64
    rng = np.random.default_rng(seed)
    if sampling == "replacement":
        for start in range(0, rows, chunk_rows):
            yield rng.integers(0, n_source, size=min(chunk_rows, rows - start), dtype=dtype)
        return
    copies, remainder = divmod(rows, n_source)
    left = np.full(n_source, copies, dtype=np.int64)  # copies of every source row not yet written
    left[rng.choice(n_source, size=remainder, replace=False)] += 1
    positions = np.arange(n_source, dtype=dtype)
    for start in range(0, rows, chunk_rows):
        size = min(chunk_rows, rows - start)
        taken = left if size == int(left.sum()) else rng.multivariate_hypergeometric(left, size, method="marginals")
        chunk = np.repeat(positions, taken)
        rng.shuffle(chunk)
        left = left - taken
        yield chunk


def sample_row_indices(
    n_source: int, rows: int, *, seed: int, sampling: str = "balanced", chunk_rows: int = 1_000_000
) -> np.ndarray:
    """Source row positions of a synthetic table, in output order: the chunks of :func:`iter_row_index_chunks`
    concatenated (what :func:`synthesize` writes with the same arguments). Holds all ``rows`` positions: for
    tests and small tables; :func:`synthesize` streams the chunks.

    Parameters
    ----------
    n_source, rows, seed, sampling, chunk_rows
        As :func:`iter_row_index_chunks`.

    Returns
    -------
    numpy.ndarray
        int32 (int64 from 2^31 source rows), length ``rows``, values in ``[0, n_source)``.

    Raises
    ------
    ValueError
        ``n_source``, ``rows`` or ``chunk_rows`` below 1, or an unknown ``sampling``.
    """
    return np.concatenate(list(iter_row_index_chunks(n_source, rows, seed=seed, sampling=sampling, chunk_rows=chunk_rows)))


def weighted_rule_set(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    weights: np.ndarray,
    *,
    min_confidence: float,
) -> set[tuple[str, str, str, str]]:
    """Strong rules of the table in which record ``r`` appears ``weights[r]`` times.

    Same definition as :func:`pipeline.core.rules.mine_strong_rules` (one item on each side,
    two different sensitive attributes, min_support 1 record, ``confidence >= min_confidence``
    in exact rational arithmetic), computed from integer counts without materialising the
    repeated rows.

    Parameters
    ----------
    records
        n rows with the sensitive attribute columns (no missing value).
    sensitive_attributes
        At least 2 columns of ``records``.
    weights
        n non-negative integers (how often each row occurs).
    min_confidence
        In (0, 1].

    Returns
    -------
    set
        ``(antecedent_attribute, antecedent_value, consequent_attribute, consequent_value)``.
    """
    weights = np.asarray(weights, dtype=np.int64)
    if len(weights) != len(records) or (weights < 0).any():
        raise ValueError("weights must hold one non-negative integer per record")
    threshold = exact_fraction(min_confidence)
    numerator, denominator = threshold.numerator, threshold.denominator
    codes, labels = {}, {}
    for attribute in sensitive_attributes:
        codes[attribute], labels[attribute] = pd.factorize(records[attribute], sort=True)
    rules = set()
    for antecedent in sensitive_attributes:
        a_codes, a_labels = codes[antecedent], labels[antecedent]
        support = np.bincount(a_codes, weights=weights, minlength=len(a_labels)).round().astype(np.int64)
        for consequent in sensitive_attributes:
            if consequent == antecedent:
                continue
            c_codes, c_labels = codes[consequent], labels[consequent]
            both = (
                np.bincount(
                    a_codes.astype(np.int64) * len(c_labels) + c_codes, weights=weights, minlength=len(a_labels) * len(c_labels)
                )
                .round()
                .astype(np.int64)
            )
            for key in np.flatnonzero(both):
                a, c = divmod(int(key), len(c_labels))
                if int(both[key]) * denominator >= numerator * int(support[a]):
                    rules.add((antecedent, str(a_labels[a]), consequent, str(c_labels[c])))
    return rules


def _rule_set(rules: pd.DataFrame) -> set[tuple[str, str, str, str]]:
    columns = ["antecedent_attribute", "antecedent_value", "consequent_attribute", "consequent_value"]
    return {tuple(str(v) for v in row) for row in rules[columns].itertuples(index=False)}


def synthesize(
    source: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    rows: int,
    seed: int,
    output: str | Path,
    sampling: str = "balanced",
    min_confidence: float = 0.8,
    chunk_rows: int = 1_000_000,
    provenance: dict | None = None,
) -> SynthesisResult:
    """Write a synthetic table of ``rows`` whole rows of ``source`` as Parquet.

    Parameters
    ----------
    source
        The source records (text columns; quasi-identifiers and sensitive attributes after
        the missing-value policy, no ``row_id``): every column is written, in this order.
    sensitive_attributes
        Columns whose strong rules are compared (source vs sample).
    rows
        Records to write (≥ 1).
    seed
        Random seed (same seed, same file).
    output
        Parquet file to write; its folder is created. Written under a temporary name and
        renamed, so a reader never sees a partial file.
    sampling
        ``"balanced"`` (default) or ``"replacement"`` (module docstring).
    min_confidence
        Threshold of the rule comparison.
    chunk_rows
        Rows per chunk of drawn positions and per Parquet row group (memory: the source plus one chunk).
    provenance
        Extra JSON-able facts stored in the file's key-value metadata (e.g. the source hash).

    Returns
    -------
    SynthesisResult

    Raises
    ------
    ValueError
        Empty source, ``rows`` or ``chunk_rows`` below 1, unknown ``sampling``, a sensitive
        attribute not in ``source``.
    """
    if len(source) == 0:
        raise ValueError("the source table has no records")
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be >= 1, got {chunk_rows}")
    missing = [a for a in sensitive_attributes if a not in source.columns]
    if missing:
        raise ValueError(f"sensitive attribute(s) {missing} not in the source columns {list(source.columns)}")
    source = source.reset_index(drop=True)
    chunks = iter_row_index_chunks(len(source), rows, seed=seed, sampling=sampling, chunk_rows=chunk_rows)
    multiplicities = np.zeros(len(source), dtype=np.int64)

    table = pa.Table.from_pandas(as_text(source).astype("category"), preserve_index=False)
    facts = {
        "generator": "msa-release synthesize",
        "rows": rows,
        "seed": seed,
        "sampling": sampling,
        "source_rows": len(source),
        **(provenance or {}),
    }
    schema = table.schema.remove_metadata().with_metadata({PARQUET_METADATA_KEY: json.dumps(facts, sort_keys=True).encode()})
    target = Path(output)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    try:
        with pq.ParquetWriter(partial, schema, compression="zstd") as writer:
            for indices in chunks:  # one chunk of row positions and its rows in memory at a time
                multiplicities += np.bincount(indices, minlength=len(source))
                chunk = table.take(pa.array(indices))
                writer.write_table(chunk.replace_schema_metadata(schema.metadata), row_group_size=chunk_rows)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    source_rules = _rule_set(mine_strong_rules(source, sensitive_attributes, min_confidence=min_confidence, backend="counting"))
    sample_rules = weighted_rule_set(source, sensitive_attributes, multiplicities, min_confidence=min_confidence)
    return SynthesisResult(
        path=target,
        rows=rows,
        columns=list(source.columns),
        source_rows=len(source),
        source_rules=len(source_rules),
        sample_rules=len(sample_rules),
        rules_equal_source=sample_rules == source_rules,
    )
