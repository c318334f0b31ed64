"""The figures of a sharded release's report that need the PRIVATE records (issue 17): the query workload and the
private Rating baseline, computed exactly as the in-memory ``release`` job computes them
(:meth:`pipeline.models.mixed.MixedModel.report_data`) when the release is small enough, and marked not computed,
without reading a record, when it is not.

- The records are the run's PRIVATE staging (``<staging>/input/shard=<s>/part-*.parquet``,
  :mod:`pipeline.engines.staging`), united and put back in input order (``row_id`` ascending: the 1-based position
  in the input, sorted file names then row position, exactly ``raw_records.row_id`` of the in-memory job for one
  file), text columns categorical with the values present as sorted categories, as the ``release`` job holds
  ``raw_records``: at S = 1 both figures equal the in-memory job's.
- The query workload is answered from the UNITED release tables: every shard's private part read with the ids the
  published part will hold (:func:`pipeline.release.sharded_publish.published_part_sql`: row ids, group ids and
  SIDs offset per shard; the contract's types), in shard order, as :func:`pipeline.release.audit.read_release` reads
  the published parts back.
- The limits are the in-memory job's: the workload up to :data:`pipeline.core.query_workload.MAX_REPORT_RECORDS`
  eligible records, the Rating baseline up to the setting ``private_baseline_max_records``. Above both nothing is
  read (the parent process of a 10M-record run has no memory to spare); above one, only what the other needs.

Only aggregates come back (medians, percentiles, counts, AIL, RCE, …), never a value or a query. Framework-free
(no Dagster, no Great Expectations). Sources: Xiao & Tao, VLDB 2006, §6 (the workload); P1 §6 (the comparison with
Rating); issue 12, release series (c) (the baseline is never published).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.core.sharding import ShardOffsets
from pipeline.errors import MsaReleaseError

__all__ = [
    "PrivateFiguresFailed",
    "private_report_figures",
    "read_staged_records",
    "read_united_tables",
]


class PrivateFiguresFailed(MsaReleaseError):
    """A figure of the report could not be computed from the private records (exit 1; nothing is published). Names
    the figure and the error's class; the error's own message is withheld (pandas, numpy and DuckDB messages may
    quote a record's value, and this one reaches the step's failure in Dagster and the CLI)."""


def read_staged_records(staging_dir: Path, n_shards: int, columns: Sequence[str]) -> pd.DataFrame:
    """PRIVATE: every staged record of a run, in input order, as the ``release`` job holds ``raw_records``.

    Parameters
    ----------
    staging_dir
        The run's private staging directory (``input/shard=<s>/part-*.parquet``; :mod:`pipeline.engines.staging`).
    n_shards
        S: the shards 0..S-1 are read.
    columns
        The configured columns to read (quasi-identifiers, then sensitive attributes).

    Returns
    -------
    pandas.DataFrame
        ``row_id`` (int64, ascending; index 0..n-1), then ``columns`` as categoricals whose categories are exactly the
        values present, sorted.

    Raises
    ------
    FileNotFoundError
        No staged file for any shard (the staging was removed or never written).
    """
    from pipeline.engines.base import staged_shard_files
    from pipeline.engines.worker import read_staged_files

    files = [path for shard in range(int(n_shards)) for path in staged_shard_files(staging_dir, shard)]
    if not files:
        raise FileNotFoundError(f"{staging_dir / 'input'}: no staged records; stage the input first")
    return read_staged_files(files, columns)


def read_united_tables(
    output_dir: Path,
    summaries: Sequence[Mapping[str, Any]],
    offsets: Sequence[ShardOffsets],
    schemas: Mapping[str, Mapping[str, str]],
    sensitive_attributes: Sequence[str],
    attribute_clusters: pd.DataFrame,
) -> dict[str, pd.DataFrame]:
    """The united release's tables from the shards' private parts, as the published release will read back.

    Parameters
    ----------
    output_dir
        The run's private ``<staging>/output``; the summaries' part paths are relative to it.
    summaries
        One shard summary per shard, in shard order (``parts``: table -> ``{"path", …}``).
    offsets
        :func:`pipeline.core.sharding.shard_offsets` of the summaries' counts (shard order).
    schemas
        :func:`pipeline.release.publish.contract_schemas` of the mixed model.
    sensitive_attributes
        The release's sensitive attributes.
    attribute_clusters
        The global attribute clusters (``cluster_id``, ``attribute``).

    Returns
    -------
    dict
        ``sac_released``, ``attribute_table``, ``id_table`` (the parts in shard order with the united ids, dtypes of
        :func:`pipeline.release.audit.read_release`: text categorical, SIDs nullable ``Int32``) and
        ``attribute_clusters``.

    Raises
    ------
    ValueError
        A summary lists no part of a table, or a part path that leaves ``output_dir``.
    """
    import duckdb
    import pyarrow as pa

    from pipeline.release.audit import contract_dtypes
    from pipeline.release.sharded_publish import PART_TABLES, published_part_sql

    attributes = list(sensitive_attributes)
    root = output_dir.resolve()
    tables: dict[str, pd.DataFrame] = {}
    connection = duckdb.connect()
    try:
        for table in PART_TABLES:
            pieces = []
            for summary, offset in zip(summaries, offsets, strict=True):
                entry = (summary.get("parts") or {}).get(table)
                if not isinstance(entry, Mapping) or "path" not in entry:
                    raise ValueError(f"shard {summary.get('shard')}: the shard summary lists no part of {table}")
                part = (output_dir / str(entry["path"])).resolve()
                if not part.is_relative_to(root):
                    raise ValueError(f"shard {summary.get('shard')}, table {table}: the part path leaves {output_dir}")
                pieces.append(
                    connection.sql(published_part_sql(table, part, schemas[table], offset, attributes)).to_arrow_table()
                )
            tables[table] = pa.concat_tables(pieces).to_pandas(strings_to_categorical=True)
    finally:
        connection.close()
    tables = contract_dtypes(tables, attributes)
    tables["attribute_clusters"] = attribute_clusters
    return tables


def private_report_figures(
    *,
    n_records: int,
    staging_dir: Path,
    summaries: Sequence[Mapping[str, Any]],
    offsets: Sequence[ShardOffsets],
    schemas: Mapping[str, Mapping[str, str]],
    attribute_clusters: pd.DataFrame,
    strong_rules: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    ell: int | Mapping[str, int],
    min_confidence: float,
    hierarchies_dir: Path | None,
    baseline_max_records: int,
) -> dict[str, dict[str, Any]]:
    """``report.json``'s ``query_workload`` and ``private_rating_baseline`` of a sharded release (module docstring).

    Parameters
    ----------
    n_records
        The eligible records the release stands for (the plan's count: no record is read to know it).
    staging_dir
        The run's private staging directory (``input/`` the staged records, ``output/`` the shards' parts).
    summaries, offsets, schemas, attribute_clusters
        As :func:`read_united_tables` (``output_dir`` = ``staging_dir / "output"``).
    strong_rules
        The GLOBAL strong rules (``sharded_strong_rules``: mined on all records), the rules the baseline's
        adversary knows, as the ``release`` job passes its ``strong_rules``.
    quasi_identifiers, sensitive_attributes
        The release's columns.
    ell
        ℓ, or attribute -> ℓ_i when ``ell_per_attribute`` is set.
    min_confidence
        Of the strong rules.
    hierarchies_dir
        The release's hierarchy folder (generalized labels spread over the values they cover), or None.
    baseline_max_records
        The setting ``private_baseline_max_records`` (0: never).

    Returns
    -------
    dict
        ``query_workload``: :func:`pipeline.reporting.release_report.query_workload_data`, or
        ``{"not_computed": True, "max_records", "n_records"}`` above
        :data:`pipeline.core.query_workload.MAX_REPORT_RECORDS`; ``private_rating_baseline``:
        :func:`pipeline.reporting.release_report.private_rating_baseline`, or ``{"model": "rating", "published":
        False, "not_computed": True, "n_records", "max_records"}`` above ``baseline_max_records``. Aggregates only.

    Raises
    ------
    ValueError
        The staged records are not ``n_records`` (the staging changed since it was planned), or as
        :func:`read_united_tables`.
    FileNotFoundError
        As :func:`read_staged_records`.
    PrivateFiguresFailed
        The workload or the baseline failed on the records (the cause's message withheld).
    """
    from pipeline.core import query_workload
    from pipeline.reporting.release_report import private_rating_baseline, query_workload_data

    quasi_identifiers, sensitive_attributes = list(quasi_identifiers), list(sensitive_attributes)
    n_records = int(n_records)
    workload_max = int(query_workload.MAX_REPORT_RECORDS)
    baseline_max = int(baseline_max_records)
    figures: dict[str, dict[str, Any]] = {}
    if n_records > workload_max:
        figures["query_workload"] = {"not_computed": True, "max_records": workload_max, "n_records": n_records}
    if n_records > baseline_max:
        figures["private_rating_baseline"] = {
            "model": "rating",
            "published": False,
            "not_computed": True,
            "n_records": n_records,
            "max_records": baseline_max,
        }
    if len(figures) == 2:
        return figures  # nothing is read
    records = read_staged_records(staging_dir, len(summaries), [*quasi_identifiers, *sensitive_attributes])
    if len(records) != n_records:
        raise ValueError(
            f"{staging_dir / 'input'}: {len(records)} staged records, the plan counted {n_records}; the staging changed "
            "during the run: run the release again"
        )
    if "query_workload" not in figures:
        tables = read_united_tables(staging_dir / "output", summaries, offsets, schemas, sensitive_attributes, attribute_clusters)
        with _withheld("query_workload"):
            figures["query_workload"] = query_workload_data(
                records, quasi_identifiers, sensitive_attributes, model="mixed", tables=tables, hierarchies_dir=hierarchies_dir
            )
        del tables
    if "private_rating_baseline" not in figures:
        # issue 12, series (c): never published as a release, so it cannot be intersected with this one
        with _withheld("private_rating_baseline"):
            figures["private_rating_baseline"] = private_rating_baseline(
                records, quasi_identifiers, sensitive_attributes, ell=ell, min_confidence=min_confidence, rules=strong_rules
            )
    del records
    # the baseline's tables and measures are freed: their pages go back before the report is drawn and the release
    # written (at 1M records the process otherwise kept about 400 MiB of freed heap through the publish, issue 18)
    from pipeline.memory import release_free_memory

    release_free_memory()
    return figures


@contextmanager
def _withheld(figure: str) -> Iterator[None]:
    """Re-raise an error of a computation on the private records as :class:`PrivateFiguresFailed` without its message
    (the project's own errors, whose messages never quote a value, pass as they are)."""
    try:
        yield
    except MsaReleaseError:
        raise
    except Exception as error:
        raise PrivateFiguresFailed(
            f"report.json's {figure} could not be computed from the private records: {type(error).__name__} (its "
            "message is withheld: it may quote a record's value); nothing is published"
        ) from None
