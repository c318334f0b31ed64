"""Out-of-core audit of a sharded release: the audit's figures part by part, then reduced (issue 17).

A sharded release publishes ``<table>/part-<s:05d>.parquet`` for ``sac_released``, ``attribute_table`` and
``id_table``, one part per shard, and every SAC~ group and every SID lies inside one part
(:mod:`pipeline.release.sharded_publish`). So every figure of :func:`pipeline.release.audit.run_audit` that is made
of per-group or per-SID quantities is a sum or a maximum over parts, and :func:`part_figures` computes it on one part
triple (the three tables of shard s) at a time, in a pool of worker processes
(:func:`pipeline.engines.local.map_parts`); :func:`reduce_part_figures` adds them up:

- AIL: the per-cell losses are summed per part (AIL of the part × its cells), the deleted records (1 per cell, from
  the manifest) added once, divided by n·m once;
- RCE: a sum per record, plus 1 per deleted record;
- the released rule supports (Lemma 22; SAC~ expected counts per group, IDT occurrences) are sums per part, the
  released confidence their ratio after the reduce (never a mean of per-part ratios);
- suppressed cells, SIDs, groups, SIDs below ℓ, groups not ℓ-diverse: sums;
- the strong-rule adversary: the rules are the global ones mined on the raw table, and a record's probability depends
  only on its group or SIDs, so it is exact per part; max (as an exact fraction), sums for the counts, the histogram
  and the mean over exposed records (sum and count), per rule the count and the max; the row ids above the bound are
  the smallest ``max_listed_records`` of the per-part lists (the ids are offset per shard, so sorting restores the
  whole release's order).

Not decomposable: the identity risk (equivalence classes on the published quasi-identifiers cross parts). It is
computed by DuckDB over all part files at once (``GROUP BY`` the quasi-identifiers, then the histogram of class
sizes; DuckDB streams and spills, no pandas frame), then :func:`pipeline.core.identity_risk.identity_risk_from_class_sizes`.
The record counts against the manifest are checked on the reduced totals. Also whole-table, but small: the raw table
the adversary's rules are mined from and the domain sizes (read as today by :func:`pipeline.release.audit.run_audit`).

Framework-free (no Dagster, no Great Expectations). Sources: P1 Lemma 22; SPEC §9-§11; design/SCALE.md.
"""

from __future__ import annotations

import dataclasses
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from pipeline.core.adversary import adversary_view, recover_rule_confidences, rule_bounds, with_released_confidence
from pipeline.core.identity_risk import identity_risk_from_class_sizes
from pipeline.core.metrics import domain_sizes, reconstruction_error
from pipeline.release.audit import (
    AuditError,
    PublishedRelease,
    _is_release_input,
    _structure,
    assemble_report,
    check_release_frames,
    contract_dtypes,
    information_loss,
    disclosure_histogram,
    load_raw_as_released,
    metrics_of,
    read_audited_manifest,
    read_parquet_frame,
    table_files,
)
from pipeline.release.reports import AdversaryFigures, AuditedRawTable, AuditReport, AuditStructure, RuleExposure

__all__ = [
    "PART_TABLES",
    "PartTask",
    "audit_parts",
    "audit_sharded_release",
    "is_sharded",
    "part_figures",
    "part_files",
    "read_part",
    "reduce_part_figures",
    "sharded_identity_risk",
    "sharded_report_data",
]

#: The tables published one part per shard.
PART_TABLES = ("sac_released", "attribute_table", "id_table")


def is_sharded(directory: Path) -> bool:
    """Whether a release directory has the part layout (``sac_released/part-*.parquet``) rather than one file per
    table."""
    return not (directory / "attribute_table.parquet").is_file() and (directory / "attribute_table").is_dir()


def part_files(directory: Path, manifest: Mapping) -> list[dict[str, str]]:
    """The part triples of a published sharded release, in shard order: ``[{table: path}]`` for :data:`PART_TABLES`
    (:func:`pipeline.release.audit.table_files`, which checks them against the manifest's ``sharding.parts``).

    Raises
    ------
    AuditError
        A table has no part, or the tables have different part names (a shard's part missing from one table).
    """
    listed = {name: table_files(directory, name, manifest) for name in PART_TABLES}
    names = {name: [file.name for file in files] for name, files in listed.items()}
    if not names["attribute_table"] or any(n != names["attribute_table"] for n in names.values()):
        raise AuditError(
            f"{directory}: the part files of {', '.join(PART_TABLES)} do not match one for one "
            f"({', '.join(f'{t}: {len(n)}' for t, n in names.items())} parts); the release is damaged: publish it again"
        )
    return [{name: str(listed[name][s]) for name in PART_TABLES} for s in range(len(names["attribute_table"]))]


@dataclass(frozen=True)
class PartTask:
    """What a worker needs to measure one part triple (pickled to the worker; small: no record-level table).

    ``files``: table -> part path; ``manifest``: the release's (``ell``, ``ell_per_attribute``,
    ``quasi_identifiers``, ``sensitive_attributes``); ``rules``: the adversary's strong rules (index = rule number);
    ``domain``: attribute -> distinct raw values (RCE); ``adversary``: whether to run the strong-rule adversary
    (the report needs the metrics only); ``threads``: 2 lets the adversary run on a second thread while the metrics
    are computed (the task alone in its process, a second core idle)."""

    shard: int
    files: Mapping[str, str]
    manifest: Mapping[str, Any]
    attribute_clusters: pd.DataFrame
    rules: pd.DataFrame
    domain: Mapping[str, int]
    adversary: bool = True
    max_listed_records: int = 1000
    threads: int = 1


def read_part(task: PartTask) -> PublishedRelease:
    """One part triple read into pandas with the dtypes of :func:`pipeline.release.audit.read_release` (text as
    categoricals), as a :class:`PublishedRelease` whose manifest has no deleted records and no record counts (they
    belong to the whole release). The only place the out-of-core audit reads record-level data."""
    tables = {name: read_parquet_frame([str(task.files[name])]) for name in PART_TABLES}
    manifest = {k: v for k, v in task.manifest.items() if k not in ("n_deleted", "n_sac_released", "n_attribute_table")}
    check_release_frames(tables, manifest, Path(str(task.files["attribute_table"])).parent.parent)
    return PublishedRelease(
        path=Path(str(task.files["attribute_table"])).parent.parent,
        manifest=manifest,
        attribute_clusters=task.attribute_clusters,
        **contract_dtypes(tables, list(manifest["sensitive_attributes"])),
    )


def part_figures(task: PartTask) -> dict[str, Any]:
    """The decomposable figures of one part triple (module docstring), JSON-able: counts, sums, maxima, the
    adversary's histogram and at most ``max_listed_records`` release row ids above the bound; no value.

    Raises
    ------
    ValueError
        A part breaks the release contract (as :func:`pipeline.release.audit.release_metrics` raises).
    """
    part = read_part(task)
    if not (task.adversary and task.threads >= 2):
        figures = _part_figures(task, part)
        if task.adversary:
            figures["adversary"] = _adversary_partial(part, task.rules, task.max_listed_records)
        return figures
    from concurrent.futures import ThreadPoolExecutor

    # the adversary on a second thread, on shallow copies (frames of its own over the same arrays)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-adversary") as pool:
        adversary = pool.submit(_adversary_partial, _shallow(part), task.rules.copy(deep=False), task.max_listed_records)
        figures = _part_figures(task, part)
        figures["adversary"] = adversary.result()
    return figures


def _shallow(part: PublishedRelease) -> PublishedRelease:
    """``part`` with frames of its own over the same arrays (another thread reads it)."""
    return dataclasses.replace(
        part,
        sac_released=part.sac_released.copy(deep=False),
        attribute_table=part.attribute_table.copy(deep=False),
        id_table=part.id_table.copy(deep=False),
        attribute_clusters=part.attribute_clusters.copy(deep=False),
    )


def _part_figures(task: PartTask, part: PublishedRelease) -> dict[str, Any]:
    """:func:`part_figures` of a part read, without the adversary's partial."""
    attributes = part.sensitive_attributes
    n_part = len(part.sac_released) + len(part.attribute_table)
    ail = information_loss(part, n_deleted=0, where=f"part {task.shard} of {part.path}")
    rce = reconstruction_error(
        sac_released=part.sac_released,
        attribute_table=part.attribute_table,
        id_table=part.id_table,
        attribute_clusters=part.attribute_clusters,
        sensitive_attributes=attributes,
        domain_sizes=dict(task.domain),
        n_deleted=0,
    )
    recovered = recover_rule_confidences(
        task.rules,
        sac_released=part.sac_released,
        attribute_table=part.attribute_table,
        id_table=part.id_table,
        attribute_clusters=part.attribute_clusters,
    )
    structure = _structure(part, check_shares=task.adversary)  # the audit's; report.json's figures do not use it
    figures: dict[str, Any] = {
        "shard": task.shard,
        "n_sac_released": len(part.sac_released),
        "n_attribute_table": len(part.attribute_table),
        "information_loss_sum": float(ail) * n_part * len(attributes),
        "reconstruction_error": float(rce),
        "released_support_antecedent": [float(x) for x in recovered["released_support_antecedent"]],
        "released_support_both": [float(x) for x in recovered["released_support_both"]],
        "n_suppressed_cells": int(part.attribute_table[attributes].isna().sum().sum()),
        "n_sids": structure.n_sids,
        "n_sids_below_ell": structure.n_sids_below_ell,
        "n_sids_value_above_share": structure.n_sids_value_above_share,
        "n_groups": structure.n_groups,
        "n_groups_not_ell_diverse": structure.n_groups_not_ell_diverse,
    }
    return figures


def _adversary_partial(part: PublishedRelease, rules: pd.DataFrame, max_listed_records: int) -> dict[str, Any]:
    """The strong-rule adversary on one part (:func:`pipeline.core.adversary.adversary_view`), as partial figures."""
    view = adversary_view(
        rules,
        sac_released=part.sac_released,
        attribute_table=part.attribute_table,
        id_table=part.id_table,
        attribute_clusters=part.attribute_clusters,
        ell_per_attribute=part.ell_by_attribute if part.manifest.get("ell_per_attribute") else None,
    )
    ell, ells = part.ell, part.ell_by_attribute
    required = rule_bounds(rules, view["rule"].to_numpy(np.int64), ell, ells)
    numerator, denominator = view["numerator"].to_numpy(np.int64), view["denominator"].to_numpy(np.int64)
    probability = view["probability"].to_numpy(np.float64)
    above = numerator * required > denominator
    exposed = probability > 0
    best = int(np.argmax(probability)) if len(view) else None
    return {
        "n_released_records": len(view),
        "max": None if best is None else [int(numerator[best]), int(denominator[best]), float(probability[best])],
        "exposed_probability_sum": float(probability[exposed].sum()),
        "n_records_exposed": int(exposed.sum()),
        "n_records_above_bound": int(above.sum()),
        "n_records_certain": int(((numerator == denominator) & (numerator > 0)).sum()),
        "histogram": disclosure_histogram(probability),
        "release_row_ids_above_bound": [int(r) for r in view.loc[above, "row_id"].head(max_listed_records)],
        "per_rule": [
            [int((view["rule"] == index).sum()), float(probability[view["rule"].to_numpy() == index].max(initial=0.0))]
            for index in rules.index
        ],
    }


def reduce_part_figures(
    partials: Sequence[Mapping[str, Any]],
    manifest: Mapping[str, Any],
    rules: pd.DataFrame,
    *,
    min_confidence: float | None = None,
    max_listed_records: int = 1000,
    min_support: int | None = None,
) -> tuple[dict[str, Any], AuditStructure, AdversaryFigures | None]:
    """The release's figures from the parts' (:func:`part_figures`): the metrics dict of
    :func:`pipeline.release.audit.release_metrics`, the structure checks (record counts against the manifest's
    ``n_sac_released`` / ``n_attribute_table``) and, when the parts ran the adversary, its figures.

    Raises
    ------
    ValueError
        No part, or a part's rule supports do not match ``rules``.
    """
    if not partials:
        raise ValueError("a sharded release has at least one part")
    attributes = list(manifest["sensitive_attributes"])
    n_deleted = int(manifest.get("n_deleted", 0))
    n_sac = sum(int(p["n_sac_released"]) for p in partials)
    n_attribute_table = sum(int(p["n_attribute_table"]) for p in partials)
    n_records = n_sac + n_attribute_table + n_deleted
    cells = n_records * len(attributes)
    loss = sum(float(p["information_loss_sum"]) for p in partials) + n_deleted * len(attributes)
    support_antecedent = np.zeros(len(rules))
    support_both = np.zeros(len(rules))
    for p in partials:
        if len(p["released_support_antecedent"]) != len(rules):
            raise ValueError(f"part {p['shard']}: {len(p['released_support_antecedent'])} rule supports, {len(rules)} rules")
        support_antecedent += np.asarray(p["released_support_antecedent"], dtype=float)
        support_both += np.asarray(p["released_support_both"], dtype=float)
    metrics = metrics_of(
        with_released_confidence(rules, support_antecedent, support_both),
        ail=loss / cells if cells else 0.0,
        rce=sum(float(p["reconstruction_error"]) for p in partials) + n_deleted,
        n_records=n_records,
        n_suppressed_cells=sum(int(p["n_suppressed_cells"]) for p in partials),
        n_deleted=n_deleted,
    )
    n_sids_below = sum(int(p["n_sids_below_ell"]) for p in partials)
    n_sids_share = sum(int(p.get("n_sids_value_above_share", 0)) for p in partials)
    n_groups_bad = sum(int(p["n_groups_not_ell_diverse"]) for p in partials)
    counts_match = n_sac == int(manifest.get("n_sac_released", n_sac)) and n_attribute_table == int(
        manifest.get("n_attribute_table", n_attribute_table)
    )
    structure = AuditStructure(
        n_sids=sum(int(p["n_sids"]) for p in partials),
        n_sids_below_ell=n_sids_below,
        n_sids_value_above_share=n_sids_share,
        n_groups=sum(int(p["n_groups"]) for p in partials),
        n_groups_not_ell_diverse=n_groups_bad,
        record_counts_match_manifest=bool(counts_match),
        passed=bool(n_sids_below == 0 and n_sids_share == 0 and n_groups_bad == 0 and counts_match),
    )
    if any("adversary" not in p for p in partials):
        return metrics, structure, None
    adversaries = [p["adversary"] for p in partials]
    maxima = [a["max"] for a in adversaries if a["max"] is not None]
    # the whole-frame audit takes the first record of largest probability; the largest exact fraction is the same
    top = max(maxima, key=lambda m: (m[2], Fraction(int(m[0]), int(m[1])))) if maxima else None
    n_exposed = sum(int(a["n_records_exposed"]) for a in adversaries)
    histogram: dict[str, int] = {}
    for a in adversaries:
        for key, count in a["histogram"].items():
            histogram[key] = histogram.get(key, 0) + int(count)
    threshold = float(manifest["min_confidence"]) if min_confidence is None else float(min_confidence)
    per_rule = []
    for position, (_, rule) in enumerate(rules.iterrows()):
        per_rule.append(
            RuleExposure(
                antecedent=(str(rule["antecedent_attribute"]), str(rule["antecedent_value"])),
                consequent=(str(rule["consequent_attribute"]), str(rule["consequent_value"])),
                confidence=float(rule["support_both"] / rule["support_antecedent"]),
                n_records_most_exposed_by_rule=sum(int(a["per_rule"][position][0]) for a in adversaries),
                max_probability=max((float(a["per_rule"][position][1]) for a in adversaries), default=0.0),
            )
        )
    adversary = AdversaryFigures(
        min_confidence=threshold,
        min_support=int(manifest.get("min_support") or 1) if min_support is None else int(min_support),
        n_rules=len(rules),
        bound=1.0 / int(manifest["ell"]),
        n_released_records=sum(int(a["n_released_records"]) for a in adversaries),
        max_probability=str(Fraction(int(top[0]), int(top[1]))) if top is not None else "0",
        max_probability_float=float(top[2]) if top is not None else 0.0,
        mean_probability_over_exposed=sum(float(a["exposed_probability_sum"]) for a in adversaries) / n_exposed
        if n_exposed
        else 0.0,
        n_records_exposed=n_exposed,
        n_records_above_bound=sum(int(a["n_records_above_bound"]) for a in adversaries),
        n_records_certain=sum(int(a["n_records_certain"]) for a in adversaries),
        histogram=histogram,
        release_row_ids_above_bound=sorted(r for a in adversaries for r in a["release_row_ids_above_bound"])[:max_listed_records],
        per_rule=per_rule,
    )
    return metrics, structure, adversary


def sharded_identity_risk(tables: Mapping[str, Sequence[str | Path]], quasi_identifiers: Sequence[str]) -> dict[str, object]:
    """Identity risk on the published quasi-identifiers (:func:`pipeline.core.identity_risk.identity_risk`'s figures)
    of part files, pooled: DuckDB counts the records per published quasi-identifier tuple over every part of
    ``sac_released`` and ``attribute_table`` (values compared as text, a missing value as the text ``nan``, as
    ``identity_risk`` compares them), then the histogram of class sizes; no pandas frame of records.

    Parameters
    ----------
    tables
        Table name -> its part files (the tables holding released records: ``sac_released``, ``attribute_table``).
    quasi_identifiers
        The quasi-identifier columns (in every part).

    Raises
    ------
    ValueError
        No quasi-identifier.
    """
    columns = list(quasi_identifiers)
    if not columns:
        raise ValueError("identity risk needs at least one quasi-identifier column")
    selected = ", ".join(f"coalesce(CAST({_quoted(c)} AS VARCHAR), 'nan') AS {_quoted(c)}" for c in columns)
    pooled = " UNION ALL ".join(
        f"SELECT {selected} FROM read_parquet([{', '.join(_literal(str(f)) for f in files)}])"
        for files in tables.values()
        if files
    )
    grouped = ", ".join(_quoted(c) for c in columns)
    with tempfile.TemporaryDirectory(prefix="msa-identity-risk-") as spill:
        connection = duckdb.connect(config={"temp_directory": spill})
        try:
            histogram = connection.sql(
                f"SELECT size, count(*) AS n FROM (SELECT count(*) AS size FROM ({pooled}) GROUP BY {grouped}) "
                "GROUP BY size ORDER BY size"
            ).fetchall()
        finally:
            connection.close()
    return identity_risk_from_class_sizes([int(s) for s, _ in histogram], [int(n) for _, n in histogram], columns)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def measure_parts(tasks: Sequence[PartTask], *, workers: int) -> list[dict[str, Any]]:
    """:func:`part_figures` of every task on ``workers`` processes (:func:`pipeline.engines.local.map_parts`)."""
    from pipeline.engines.local import map_parts

    return map_parts(part_figures, list(tasks), workers=workers)


def sharded_report_data(
    files: Sequence[Mapping[str, str]],
    manifest: Mapping[str, Any],
    rules: pd.DataFrame,
    *,
    attribute_clusters: pd.DataFrame,
    domain: Mapping[str, int],
    workers: int = 1,
) -> dict[str, Any]:
    """``report.json``'s figures of a sharded release from its part files (published, or the private staging's
    ``output/<table>/part-<s>.parquet``: the figures do not depend on the id offsets), one part triple per worker:
    what :func:`pipeline.reporting.release_report.mixed_report_data` gives for the whole tables, plus
    ``identity_risk`` (:func:`sharded_identity_risk`). Aggregates only: no value of a record.

    Parameters
    ----------
    files
        One ``{table: path}`` per shard, in shard order (:data:`PART_TABLES`).
    manifest
        The release's manifest (``model``, ``ell``, ``ell_per_attribute``, attributes, ``n_deleted``, counts).
    rules
        The release's strong rules (counts ``support_antecedent``, ``support_both``).
    attribute_clusters
        The published ``attribute_clusters`` table.
    domain
        Sensitive attribute -> distinct values in the input (RCE).
    workers
        Processes measuring the parts.
    """
    from pipeline.reporting.release_report import REPORT_DATA_FORMAT

    tasks = [
        PartTask(
            shard=s,
            files=dict(triple),
            manifest=_part_manifest(manifest),
            attribute_clusters=attribute_clusters,
            rules=rules,
            domain=dict(domain),
            adversary=False,
        )
        for s, triple in enumerate(files)
    ]
    metrics, _, _ = reduce_part_figures(measure_parts(tasks, workers=workers), manifest, rules)
    rule_list = metrics.pop("rules")
    risk = sharded_identity_risk(
        {name: [triple[name] for triple in files] for name in ("sac_released", "attribute_table")},
        list(manifest["quasi_identifiers"]),
    )
    from pipeline.core.composition import one_known_value_from_counts

    n_sac, n_table = int(manifest.get("n_sac_released") or 0), int(manifest.get("n_attribute_table") or 0)
    return {
        "report_format": REPORT_DATA_FORMAT,
        "model": manifest["model"],
        "metrics": metrics,
        "rules": rule_list,
        "identity_risk": risk,
        "one_known_value": one_known_value_from_counts(n_sac, attribute_clusters, n_sac + n_table),
    }


def _part_manifest(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The manifest keys a part needs (no record counts, no deletions)."""
    keys = ("model", "ell", "ell_per_attribute", "quasi_identifiers", "sensitive_attributes", "min_confidence")
    return {k: manifest[k] for k in keys if k in manifest}


def audit_sharded_release(
    release_dir: str | Path,
    raw_path: str | Path,
    *,
    min_confidence: float | None = None,
    min_support: int | None = None,
    max_listed_records: int = 1000,
    workers: int = 2,
    mining_backend: str = "auto",
    duckdb_mining_threshold: int = 100_000,
) -> AuditReport:
    """:func:`pipeline.release.audit.run_audit`'s report for a sharded release, part by part (module docstring): the
    same JSON keys and figures, with no whole-table frame of the release.

    Parameters
    ----------
    release_dir
        A sharded release directory (or a ``releases`` directory whose LATEST names one).
    raw_path
        The raw table the adversary mines its strong rules from (read with the manifest's ``input_reading``).
    workers
        Processes measuring the parts (one part triple each at a time).
    min_confidence, min_support, max_listed_records, mining_backend, duckdb_mining_threshold
        As :func:`pipeline.release.audit.run_audit`.

    Raises
    ------
    AuditError
        Unreadable release, manifest or raw table; part files that differ from the manifest's list.
    pipeline.engines.local.ShardFailed
        A part could not be measured (names the shard).
    """
    from pipeline.core.rules import mine_strong_rules, resolve_mining_backend

    directory, manifest = read_audited_manifest(release_dir)
    part_files(directory, manifest)  # a damaged release is refused before the raw table is read
    loaded = load_raw_as_released(directory, manifest, raw_path)
    records = loaded.records
    attributes = list(manifest["sensitive_attributes"])
    threshold = float(manifest["min_confidence"]) if min_confidence is None else float(min_confidence)
    backend = resolve_mining_backend(
        mining_backend,
        len(records),
        duckdb_threshold=duckdb_mining_threshold,
        n_items=sum(int(records[a].nunique()) for a in attributes),
    )
    support = int(manifest.get("min_support") or 1) if min_support is None else int(min_support)
    rules = mine_strong_rules(records, attributes, min_confidence=threshold, backend=backend, min_support=support)
    domain = domain_sizes(records, attributes)
    n_raw, input_sha256 = len(records), loaded.input_sha256
    del records, loaded
    raw = AuditedRawTable(
        path=str(raw_path),
        sha256=input_sha256,
        is_release_input=_is_release_input(directory, manifest, input_sha256) if input_sha256 is not None else None,
        n_records=n_raw,
    )
    return audit_parts(
        directory,
        rules,
        domain=domain,
        raw=raw,
        min_confidence=threshold,
        min_support=support,
        max_listed_records=max_listed_records,
        workers=workers,
    )


def audit_parts(
    release_dir: str | Path,
    rules: pd.DataFrame,
    *,
    domain: Mapping[str, int],
    raw: AuditedRawTable,
    min_confidence: float | None = None,
    max_listed_records: int = 1000,
    workers: int = 2,
    min_support: int | None = None,
) -> AuditReport:
    """The audit of a sharded release part by part against strong rules already mined (the ``sharded_release`` job
    passes its global rules and the domain sizes of its tuple counts; :func:`audit_sharded_release` mines them from
    the raw table): the report of :func:`pipeline.release.audit.run_audit`.

    Parameters
    ----------
    release_dir
        A sharded release directory.
    rules
        The adversary's strong rules (``antecedent_*``, ``consequent_*``, counts ``support_antecedent`` and
        ``support_both``; index = rule number).
    domain
        Sensitive attribute -> distinct values in the input (RCE).
    raw
        How the report names the table the rules come from.
    min_confidence, min_support
        The rules' thresholds (default: the release's).
    max_listed_records, workers
        As :func:`audit_sharded_release`. A release of one part with ``workers`` >= 2 is measured in this process with
        the strong-rule adversary on a second thread (:class:`PartTask` ``threads``; the same figures).

    Raises
    ------
    AuditError
        Unreadable manifest, part files that differ from its list.
    pipeline.engines.local.ShardFailed
        A part could not be measured (names the shard).
    """
    directory, manifest = read_audited_manifest(release_dir)
    files = part_files(directory, manifest)
    threshold = float(manifest["min_confidence"]) if min_confidence is None else float(min_confidence)
    clusters_files = table_files(directory, "attribute_clusters", manifest)
    clusters = (
        pd.read_parquet(clusters_files[0])
        if clusters_files
        else pd.DataFrame({"cluster_id": pd.Series(dtype=object), "attribute": pd.Series(dtype=object)})
    )
    tasks = [
        PartTask(
            shard=s,
            files=triple,
            manifest=_part_manifest(manifest),
            attribute_clusters=clusters,
            rules=rules,
            domain=domain,
            max_listed_records=max_listed_records,
            threads=2 if len(files) == 1 and workers >= 2 else 1,  # one part: measured in this process
        )
        for s, triple in enumerate(files)
    ]
    metrics, structure, adversary = reduce_part_figures(
        measure_parts(tasks, workers=workers),
        manifest,
        rules,
        min_confidence=threshold,
        max_listed_records=max_listed_records,
        min_support=min_support,
    )
    assert adversary is not None
    risk = sharded_identity_risk(
        {name: [triple[name] for triple in files] for name in ("sac_released", "attribute_table")},
        list(manifest["quasi_identifiers"]),
    )
    return assemble_report(directory, manifest, adversary=adversary, structure=structure, raw=raw, metrics=metrics, risk=risk)
