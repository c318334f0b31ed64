"""Audit a table of equivalence classes from its files: a (k, ℓ) release of ours, or a generalized table another tool
(ARX, anjana, sdcMicro) wrote.

Both publish every record whole (generalized quasi-identifier labels, ``*`` for a suppressed value, sensitive values
unchanged), so both are audited by :func:`pipeline.core.class_audit.class_audit`: k, distinct and entropy ℓ per
sensitive attribute, ``Diverse ≥ ℓ`` over whole tuples (exact), the one-known-value share and the learned-model
posterior against the population baseline; with a raw table, the strong-rule adversary on whole records
(:func:`pipeline.core.class_audit.whole_record_rule_adversary`) and, for a (k, ℓ) release read with its hierarchies,
the join and one-known-value attacks of :mod:`pipeline.core.attacks` on every raw record.

The verdict is the (k, ℓ)-anonymity of P2 (SPEC §14.1): PASS when the smallest class holds at least k records and
every class has ``Diverse ≥ ℓ`` (and, for a release, the record count matches its manifest); the other figures are
measurements, as in the release's manifest (``attacks``: none of them is a gate). The report holds counts,
probabilities and rule values only, never a record.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.class_audit import class_audit, equivalence_class_codes, whole_record_rule_adversary
from pipeline.settings import default_min_support
from pipeline.errors import UnusableInputError

__all__ = [
    "ClassAuditError",
    "audit_generalized_table",
    "audit_kl_release",
    "hierarchy_levels",
    "read_generalized_table",
    "release_model",
]

#: The label a tool writes for a suppressed quasi-identifier value (ARX, anjana, sdcMicro's ``*``).
SUPPRESSED_LABEL = "*"
#: Sensitive cells of another tool's table that are no value: a suppressed cell and the run's default missing-value
#: tokens (``missing_value_tokens``: empty, ``NULL``, ``?``). :func:`audit_generalized_table` audits each as the most
#: frequent value of its attribute in its class (the worst case: it adds no diversity).
NOT_A_SENSITIVE_VALUE = frozenset({SUPPRESSED_LABEL, "", "NULL", "?"})


class ClassAuditError(UnusableInputError, ValueError):
    """The table, the release or the raw table cannot be audited; the message says why and what to do."""


def _sha256(path: Path) -> str:
    from pipeline.io.loading import file_sha256

    return file_sha256(path)


def release_model(release_dir: str | Path) -> str | None:
    """The ``model`` of the release ``release_dir`` names (a release directory, or a releases directory or home with
    LATEST), or None when it names none or its manifest is unreadable (the mixed/Rating audit then says why)."""
    from pipeline.release.audit import AuditError, _resolve_release_dir

    try:
        directory = _resolve_release_dir(Path(release_dir).expanduser().resolve())
        return str(json.loads((directory / "manifest.json").read_text()).get("model"))
    except (AuditError, OSError, json.JSONDecodeError, AttributeError):
        return None


def check_column_roles(quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> None:
    """Refuse a column listed twice in one role or in both (red team, session 39: ``--sensitive-attributes
    education,education`` was merged into one attribute without a word and passed; a column in both roles gave a FAIL
    verdict instead of a usage error).

    Raises
    ------
    ClassAuditError
        Naming the columns.
    """
    for option, names in (("--quasi-identifiers", quasi_identifiers), ("--sensitive-attributes", sensitive_attributes)):
        repeated = sorted({n for n in names if list(names).count(n) > 1})
        if repeated:
            raise ClassAuditError(f"{option} lists {repeated} more than once; list each column once")
    both = sorted(set(quasi_identifiers) & set(sensitive_attributes))
    if both:
        raise ClassAuditError(
            f"column(s) {both} are listed as quasi-identifier and as sensitive attribute; give each column one role"
        )


def read_generalized_table(path: str | Path, columns: Sequence[str]) -> pd.DataFrame:
    """Read another tool's generalized table: CSV (delimiter ``,``, ``;`` or tab, found from the header line; a
    header row is required) or Parquet, every column as text.

    Parameters
    ----------
    path
        ``.csv`` / ``.txt`` / ``.tsv`` or ``.parquet`` file.
    columns
        The columns the audit needs (quasi-identifiers and sensitive attributes).

    Returns
    -------
    pandas.DataFrame
        ``columns`` as object columns of ``str`` (an empty cell is the empty text).

    Raises
    ------
    ClassAuditError
        Unreadable file, unknown extension, or a missing column (named).
    """
    file = Path(path)
    try:
        if file.suffix.lower() == ".parquet":
            table = pd.read_parquet(file)
        elif file.suffix.lower() in (".csv", ".txt", ".tsv"):
            with file.open(newline="", encoding="utf-8") as handle:
                header = handle.readline()
            delimiter = max((",", ";", "\t"), key=header.count)
            table = pd.read_csv(file, dtype=str, keep_default_na=False, sep=delimiter, skipinitialspace=True)
        else:
            raise ClassAuditError(f"{file}: unknown table format {file.suffix!r}; pass a .csv or .parquet file")
    except (OSError, ValueError, csv.Error) as error:
        if isinstance(error, ClassAuditError):
            raise
        if isinstance(error, UnicodeDecodeError):
            raise ClassAuditError(f"{file}: the file is not UTF-8 encoded; convert it to UTF-8 (e.g. iconv)") from None
        # pandas names the line of a row with too many fields ("Expected 4 fields in line 3, saw 5"), never its content
        line = re.search(r"fields in line (\d+), saw (\d+)", str(error))
        where = f", line {line.group(1)} has {line.group(2)} fields, more than the header" if line else ""
        raise ClassAuditError(f"{file}: cannot read the table ({type(error).__name__}{where}); check the file") from None
    table.columns = [str(c).strip() for c in table.columns]
    if file.suffix.lower() == ".parquet":
        _refuse_nested_columns(file, columns)
    missing = [c for c in columns if c not in table.columns]
    if missing:
        raise ClassAuditError(
            f"{file} has no column(s) {missing}; name the table's columns with --quasi-identifiers and "
            "--sensitive-attributes (its header lists the columns it has)"
        )
    if not len(table):
        raise ClassAuditError(f"{file}: the table has no records (a header row only); pass the published table")
    if file.suffix.lower() != ".parquet":
        _refuse_short_rows(file, delimiter)
    return pd.DataFrame({c: table[c].astype(str).str.strip() for c in columns})


def _refuse_nested_columns(file: Path, columns: Sequence[str]) -> None:
    """Refuse a Parquet table whose audited columns hold lists, structs, maps or binary values: one cell must be one
    value (red team, session 39: a list quasi-identifier was audited as the text of each list), as the release's
    reader refuses them (:data:`pipeline.io.loading.NESTED_TYPE_IDS`).

    Raises
    ------
    ClassAuditError
        Naming the columns and their types.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pq.read_schema(file)
    nested = [
        f"{name!r} ({schema.field(name).type})"
        for name in columns
        if name in schema.names
        and (
            pa.types.is_nested(schema.field(name).type)
            or pa.types.is_binary(schema.field(name).type)
            or pa.types.is_large_binary(schema.field(name).type)
        )
    ]
    if nested:
        raise ClassAuditError(
            f"{file}: column(s) {', '.join(nested)} hold nested or binary values, not one value per cell; flatten them "
            "into text or number columns before auditing"
        )


def _refuse_short_rows(file: Path, delimiter: str) -> None:
    """Refuse a CSV with a row of fewer fields than its header (pandas fills them with empty text, which would read
    as empty values), naming how many and the first line; never a value."""
    with file.open(newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle, delimiter=delimiter, skipinitialspace=True)
        width = len(next(reader, []))
        short, first = 0, 0
        for row in reader:
            if row and len(row) < width:
                short += 1
                first = first or reader.line_num
    if short:
        raise ClassAuditError(
            f"{file}: {short} row(s) have fewer fields than the header, the first on line {first}; every row needs "
            "every column (write an empty field for an empty value)"
        )


def worst_case_sensitive_values(
    table: pd.DataFrame, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Another tool's table with every sensitive cell that is no value (:data:`NOT_A_SENSITIVE_VALUE`: suppressed,
    empty, a missing-value token) replaced by the most frequent value of its attribute in its equivalence class (the
    first in text order among ties; a class with no value of the attribute gets one label for all its cells), so
    that no such cell counts as a further distinct value: the distinct and entropy ℓ and Diverse are then those of
    the values the table does publish (the worst case for the record whose value was hidden).

    Returns
    -------
    (pandas.DataFrame, dict)
        The table (a copy; quasi-identifiers unchanged) and the number of cells replaced per sensitive attribute.
    """
    classes = equivalence_class_codes(table, quasi_identifiers)
    table = table.copy()
    replaced: dict[str, int] = {}
    for attribute in sensitive_attributes:
        values = table[attribute].astype(str)
        hidden = values.isin(NOT_A_SENSITIVE_VALUE).to_numpy()
        replaced[attribute] = int(hidden.sum())
        if not hidden.any():
            continue
        shown = pd.DataFrame({"class": classes[~hidden], "value": values.to_numpy()[~hidden]})
        counts = shown.groupby(["class", "value"]).size().reset_index(name="n")
        counts = counts.sort_values(["class", "n", "value"], ascending=[True, False, True], kind="stable")
        most_frequent = counts.drop_duplicates("class").set_index("class")["value"]
        fill = pd.Series(classes[hidden]).map(most_frequent).fillna(SUPPRESSED_LABEL).to_numpy()
        column = values.to_numpy(dtype=object).copy()
        column[hidden] = fill
        table[attribute] = column
    return table, replaced


def hierarchy_levels(table: pd.DataFrame, hierarchies_dir: str | Path, quasi_identifiers: Sequence[str]) -> dict[str, Any]:
    """Check that every published label of a quasi-identifier is a node of its hierarchy (or ``*``) and measure the
    generalization: per quasi-identifier, the mean level of the published labels (0 = base value, height = ``*``;
    a label found on several levels counts at the lowest), the hierarchy's height and the suppressed cells.

    Parameters
    ----------
    table
        The generalized table (quasi-identifier columns as text).
    hierarchies_dir
        ARX hierarchy files (:func:`pipeline.core.hierarchies.load_available_hierarchies`).

    Returns
    -------
    dict
        quasi-identifier -> ``{"height", "mean_level", "n_suppressed_cells"}`` (None for a quasi-identifier
        without a hierarchy file).

    Raises
    ------
    ClassAuditError
        An invalid hierarchy, or a column holding labels its hierarchy does not have (the count is named, never a
        label).
    """
    from pipeline.core.hierarchies import HierarchyError, load_available_hierarchies

    try:
        hierarchies = load_available_hierarchies(hierarchies_dir, list(quasi_identifiers))
    except HierarchyError as error:
        raise ClassAuditError(str(error)) from None
    out: dict[str, Any] = {}
    for attribute in quasi_identifiers:
        hierarchy = hierarchies.get(attribute)
        labels = table[attribute].astype(str)
        suppressed = labels == SUPPRESSED_LABEL
        if hierarchy is None:
            out[attribute] = None
            continue
        level_of: dict[str, int] = {}
        for level in range(hierarchy.height, -1, -1):
            level_of.update(dict.fromkeys(hierarchy.labels[level], level))
        levels = labels.map(level_of)
        levels[suppressed] = hierarchy.height
        unknown = int(levels.isna().sum())
        if unknown:
            raise ClassAuditError(
                f"column {attribute!r}: {unknown} cells hold labels that are not nodes of its hierarchy "
                f"{hierarchy.source} (nor '*'); pass --hierarchies with the hierarchies the table was generalized with"
            )
        out[attribute] = {
            "height": int(hierarchy.height),
            "mean_level": round(float(levels.astype(float).mean()), 6) if len(levels) else 0.0,
            "n_suppressed_cells": int(suppressed.sum()),
        }
    return out


def _raw_records(
    raw_path: str | Path, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str], reading: Mapping[str, Any] | None
) -> tuple[pd.DataFrame, str]:
    """The raw table (as the release read its input when ``reading`` is its manifest's ``input_reading``; else a CSV
    with a header or a Parquet file, every column as text) and its SHA-256."""
    if reading is not None:
        from pipeline.release.audit import read_as_released
        from pipeline.release.manifest import validate_input_reading

        try:
            typed = validate_input_reading(dict(reading))
        except ValueError as error:
            message = str(error)
            raise ClassAuditError(message if str(raw_path) in message else f"raw table {raw_path}: {message}") from None
        loaded = read_as_released(raw_path, typed, quasi_identifiers, sensitive_attributes, error=ClassAuditError)
        return loaded.records, loaded.input_sha256
    table = read_generalized_table(raw_path, [*quasi_identifiers, *sensitive_attributes])
    return table.assign(row_id=np.arange(1, len(table) + 1, dtype=np.int64)), _sha256(Path(raw_path))


def _rule_adversary(
    table: pd.DataFrame,
    classes: np.ndarray,
    raw: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    min_confidence: float,
    min_support: int | None = None,
) -> dict[str, Any]:
    from pipeline.core.rules import mine_strong_rules, resolve_mining_backend

    support = default_min_support(ell) if min_support is None else int(min_support)

    backend = resolve_mining_backend(
        "auto", len(raw), duckdb_threshold=100_000, n_items=sum(int(raw[a].nunique()) for a in sensitive_attributes)
    )
    rules = mine_strong_rules(
        raw.astype({a: str for a in sensitive_attributes}),
        list(sensitive_attributes),
        min_confidence=min_confidence,
        backend=backend,
        min_support=support,
    )
    figures = whole_record_rule_adversary(table, classes, rules, ell=ell)
    return {"min_confidence": float(min_confidence), "min_support": support, **figures}


def _verdict(classes: Mapping[str, Any], *, k: int, ell: int, extra: Sequence[str] = ()) -> tuple[str, list[str]]:
    reasons = list(extra)
    if classes["k"] < k:
        reasons.append(f"the smallest equivalence class holds {classes['k']} records, fewer than k = {k}")
    below = classes["diverse"]["n_classes_below_ell"]
    if below:
        reasons.append(
            f"{below} equivalence classes ({classes['diverse']['n_records_in_classes_below_ell']} records) hold fewer "
            f"than ell = {ell} pairwise totally different sensitive tuples (Diverse < ell)"
        )
    return ("FAIL" if reasons else "PASS"), reasons


def _warnings(classes: Mapping[str, Any], *, ell: int) -> list[str]:
    warnings = []
    for attribute, figures in classes["per_attribute"].items():
        if figures["distinct_ell"] < ell:
            warnings.append(f"{attribute}: {figures['n_classes_below_ell']} classes with fewer than {ell} distinct values")
    share = classes["one_known_value"]["share_records_pinning_another_value"]
    if share > 0:
        whole = classes["one_known_value"].get("share_records_whole_tuple_pinned")
        warnings.append(
            f"{share:.1%} of the records have another sensitive value pinned once one is known"
            + (f", {whole:.1%} their whole sensitive tuple" if whole else "")
        )
    learned = classes["learned_model"]
    if learned["n_cells_above_bound"]:
        warnings.append(
            f"the learned-model posterior exceeds max(1/{ell}, population baseline) + {learned['slack']} on "
            f"{learned['n_cells_above_bound']} cells ({learned['n_records_above_bound']} records)"
        )
    return warnings


def audit_generalized_table(
    table_path: str | Path,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    k: int,
    ell: int,
    hierarchies_dir: str | Path | None = None,
    raw_path: str | Path | None = None,
    min_confidence: float = 0.8,
    slack: float = 0.05,
    min_support: int | None = None,
) -> dict[str, Any]:
    """Audit another tool's generalized or suppressed table (``msa-release audit --table``).

    Parameters
    ----------
    table_path
        The table (:func:`read_generalized_table`); one row per published record (records the tool removed are
        absent).
    quasi_identifiers, sensitive_attributes
        Column names (at least one sensitive attribute; the rule adversary needs two).
    k, ell
        The (k, ℓ) requirement of the verdict (``k ≥ 1``, ``ell ≥ 1``).
    hierarchies_dir
        Optional ARX hierarchies: labels are checked and the generalization measured (:func:`hierarchy_levels`).
    raw_path
        Optional raw table (CSV with a header, or Parquet, holding the same column names): the strong rules are
        mined on it (``min_confidence``, support ``≥ min_support``, default ``max(ℓ, 5)`` records) for the strong-rule
        adversary.

    Returns
    -------
    dict
        ``verdict`` ("PASS"/"FAIL"), ``reasons``, ``warnings``, ``identity_risk`` (records unique on their
        published quasi-identifiers and class sizes, :func:`pipeline.core.identity_risk.identity_risk`), ``table`` (path, sha256, quasi-identifiers,
        sensitive attributes, k and ℓ required), ``raw`` (path, sha256, n_records; None without ``--raw``),
        ``classes`` (:func:`pipeline.core.class_audit.class_audit`), ``hierarchies`` (None without them) and
        ``strong_rule_adversary`` (None without ``--raw``).

    Raises
    ------
    ClassAuditError
        Unreadable files, missing columns, labels outside the hierarchies, ``k`` or ``ell`` below 1.
    """
    if k < 1 or ell < 1:
        raise ClassAuditError(f"k and ell must be >= 1 (got k={k}, ell={ell})")
    check_column_roles(quasi_identifiers, sensitive_attributes)
    path = Path(table_path)
    table = read_generalized_table(path, [*quasi_identifiers, *sensitive_attributes])
    # a suppressed or missing sensitive cell is no value: audited as its class's most frequent value (the worst case)
    table, hidden_cells = worst_case_sensitive_values(table, quasi_identifiers, sensitive_attributes)
    classes = class_audit(table, quasi_identifiers, sensitive_attributes, ell=ell, slack=slack)
    levels = hierarchy_levels(table, hierarchies_dir, quasi_identifiers) if hierarchies_dir is not None else None
    raw_section, adversary, workload = None, None, None
    if raw_path is not None:
        if len(sensitive_attributes) < 2:
            raise ClassAuditError("--raw needs at least two sensitive attributes (a strong rule links two of them)")
        raw, raw_sha256 = _raw_records(raw_path, quasi_identifiers, sensitive_attributes, None)
        raw_section = {"path": str(raw_path), "sha256": raw_sha256, "n_records": int(len(raw))}
        adversary = _rule_adversary(
            table,
            equivalence_class_codes(table, quasi_identifiers),
            raw,
            sensitive_attributes,
            ell=ell,
            min_confidence=min_confidence,
            min_support=min_support,
        )
        workload = _query_workload(table, raw, quasi_identifiers, sensitive_attributes, hierarchies_dir)
    verdict, reasons = _verdict(classes, k=k, ell=ell)
    from pipeline.core.identity_risk import identity_risk

    return {
        "verdict": verdict,
        "reasons": reasons,
        "warnings": _warnings(classes, ell=ell)
        + [
            f"{attribute}: {n} cell(s) suppressed or missing (*, empty, NULL, ?), audited as their class's most "
            "frequent value of it (the worst case: no added diversity)"
            for attribute, n in hidden_cells.items()
            if n
        ],
        "identity_risk": identity_risk([table], list(quasi_identifiers)) if quasi_identifiers else None,
        "table": {
            "path": str(path),
            "sha256": _sha256(path),
            "quasi_identifiers": list(quasi_identifiers),
            "sensitive_attributes": list(sensitive_attributes),
            "k": int(k),
            "ell": int(ell),
        },
        "raw": raw_section,
        "classes": classes,
        "hierarchies": levels,
        "strong_rule_adversary": adversary,
        "query_workload": workload,
    }


def _query_workload(
    table: pd.DataFrame,
    raw: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies_dir: str | Path | None,
) -> dict[str, Any] | None:
    """The COUNT-query workload's relative errors of a generalized table against the raw table
    (:func:`pipeline.core.query_workload.release_workload_utility`; labels spread over the hierarchies' base values,
    ``*`` over every value of an attribute without one); None without hierarchies (a generalized label could not be
    spread), when the raw table holds more than :data:`~pipeline.core.query_workload.MAX_REPORT_RECORDS` records or
    when no quasi-identifier is named."""
    from pipeline.core.hierarchies import HierarchyError, load_available_hierarchies
    from pipeline.core.query_workload import MAX_REPORT_RECORDS, release_workload_utility

    if hierarchies_dir is None or len(raw) > MAX_REPORT_RECORDS or not quasi_identifiers:
        return None
    columns = [*quasi_identifiers, *sensitive_attributes]
    try:
        hierarchies = load_available_hierarchies(hierarchies_dir, columns)
        return release_workload_utility(
            raw, quasi_identifiers, sensitive_attributes, model="table", tables={"table": table}, hierarchies=hierarchies
        )
    except (HierarchyError, ValueError) as error:
        raise ClassAuditError(f"query workload: {error}") from None


def _kl_attacks(
    released: pd.DataFrame,
    raw: pd.DataFrame,
    hierarchies_dir: str | Path,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
) -> dict[str, Any]:
    """The join and one-known-value attacks (:mod:`pipeline.core.attacks`) of every raw record on a (k, ℓ) release."""
    from pipeline.core.attacks import join_attack, kl_release_belief, one_known_value_attacks, summarize_attack, victim_table
    from pipeline.core.hierarchies import HierarchyError, load_hierarchies

    try:
        hierarchies = load_hierarchies(hierarchies_dir, list(quasi_identifiers))
        belief = kl_release_belief(released, quasi_identifiers, sensitive_attributes, hierarchies)
    except (HierarchyError, ValueError) as error:
        raise ClassAuditError(f"{hierarchies_dir}: {error}") from None
    victims = victim_table(
        raw, pd.DataFrame({"source_row_id": raw["row_id"].to_numpy(np.int64)}), quasi_identifiers, sensitive_attributes
    )
    join = join_attack(belief, victims)
    out: dict[str, Any] = {"join": _short(summarize_attack(join["probability"].to_numpy(), join["certain"].to_numpy(), ell=ell))}
    if len(sensitive_attributes) >= 2:
        pinned = np.zeros(len(victims), dtype=bool)
        worst = np.zeros(len(victims))
        for frame in one_known_value_attacks(belief, victims).values():
            pinned |= frame["pinned"].to_numpy(bool)
            worst = np.maximum(worst, frame["probability"].to_numpy(float))
        out["one_known_value"] = _short(summarize_attack(worst, pinned, ell=ell))
    return out


def _short(summary: Mapping[str, Any]) -> dict[str, Any]:
    """An attack summary without its 101 quantiles (the histogram stays)."""
    return {key: value for key, value in summary.items() if key != "quantiles"}


def audit_kl_release(
    release_dir: str | Path,
    *,
    raw_path: str | Path | None = None,
    hierarchies_dir: str | Path | None = None,
    min_confidence: float | None = None,
    min_support: int | None = None,
) -> dict[str, Any]:
    """Audit a published (k, ℓ) release from its files (``msa-release audit`` on a kl release).

    Parameters
    ----------
    release_dir
        ``<home>/releases/<release_id>`` (or a releases directory with LATEST) of a ``kl`` release.
    raw_path
        Optional: its input, read with the manifest's ``input_reading``; the strong-rule adversary then runs on the
        release (rules at ``min_confidence``, default the manifest's or 0.8, and support ``≥ min_support`` records,
        default ``max(ℓ, 5)``).
    hierarchies_dir
        Optional (with ``raw_path``): the release's hierarchies (their SHA-256 must match the manifest's); the join
        and one-known-value attacks then run for every raw record.

    Returns
    -------
    dict
        The shape of :func:`audit_generalized_table` with ``release`` (release_id, directory, model, k, ell) in place
        of ``table``, ``structure`` (``n_released``, ``record_count_matches_manifest``) and ``attacks`` (None
        without ``hierarchies_dir``).

    Raises
    ------
    ClassAuditError
        Not a kl release, a missing table, an unreadable raw table, hierarchies that are not the release's.
    """
    from pipeline.release.audit import AuditError, _resolve_release_dir

    try:
        directory = _resolve_release_dir(Path(release_dir).expanduser().resolve())
    except AuditError as error:
        raise ClassAuditError(str(error)) from None
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ClassAuditError(f"{manifest_path}: cannot read the manifest ({type(error).__name__})") from None
    if manifest.get("model") != "kl":
        raise ClassAuditError(f"{manifest_path}: model {manifest.get('model')!r} is not a (k, ℓ) release")
    file = directory / "kl_released.parquet"
    if not file.is_file():
        raise ClassAuditError(f"{file} is missing: a kl release must contain kl_released.parquet")
    released = pd.read_parquet(file)
    quasi_identifiers = list(manifest["quasi_identifiers"])
    sensitive_attributes = list(manifest["sensitive_attributes"])
    k, ell = int(manifest["k"]), int(manifest["ell"])
    slack = float((manifest.get("attacks") or {}).get("slack", 0.05))
    classes = class_audit(released, quasi_identifiers, sensitive_attributes, ell=ell, class_column="cluster_id", slack=slack)
    n_released = int(manifest.get("n_released", len(released)))
    structure = {"n_released": len(released), "record_count_matches_manifest": n_released == len(released)}
    raw_section = adversary = attacks = workload = None
    if raw_path is not None:
        raw, raw_sha256 = _raw_records(raw_path, quasi_identifiers, sensitive_attributes, manifest.get("input_reading"))
        raw_section = {"path": str(raw_path), "sha256": raw_sha256, "n_records": int(len(raw))}
        workload = _query_workload(released, raw, quasi_identifiers, sensitive_attributes, hierarchies_dir)
        threshold = float(min_confidence if min_confidence is not None else manifest.get("min_confidence") or 0.8)
        if len(sensitive_attributes) >= 2:
            cluster_codes = pd.factorize(released["cluster_id"])[0].astype(np.int64)
            adversary = _rule_adversary(
                released, cluster_codes, raw, sensitive_attributes, ell=ell, min_confidence=threshold, min_support=min_support
            )
        if hierarchies_dir is not None:
            _check_release_hierarchies(manifest, hierarchies_dir, quasi_identifiers)
            attacks = _kl_attacks(released, raw, hierarchies_dir, quasi_identifiers, sensitive_attributes, ell=ell)
    extra = (
        []
        if structure["record_count_matches_manifest"]
        else [f"kl_released holds {len(released)} records, the manifest says {n_released}"]
    )
    verdict, reasons = _verdict(classes, k=k, ell=ell, extra=extra)
    from pipeline.release.audit import identity_risk_from_files

    return {
        "verdict": verdict,
        "reasons": reasons,
        "warnings": _warnings(classes, ell=ell),
        "identity_risk": identity_risk_from_files(directory, manifest),
        "release": {
            "release_id": manifest.get("release_id"),
            "directory": str(directory),
            "model": "kl",
            "k": k,
            "ell": ell,
        },
        "raw": raw_section,
        "structure": structure,
        "classes": classes,
        "strong_rule_adversary": adversary,
        "attacks": attacks,
        "query_workload": workload,
    }


def _check_release_hierarchies(
    manifest: Mapping[str, Any], hierarchies_dir: str | Path, quasi_identifiers: Sequence[str]
) -> None:
    """Every quasi-identifier's hierarchy file in ``hierarchies_dir`` has the SHA-256 the manifest records."""
    from pipeline.core.hierarchies import find_hierarchy_file

    recorded = ((manifest.get("hierarchies") or {}).get("files")) or {}
    for attribute in quasi_identifiers:
        file = find_hierarchy_file(hierarchies_dir, attribute)
        expected = (recorded.get(attribute) or {}).get("sha256")
        if file is None or (expected is not None and _sha256(file) != expected):
            raise ClassAuditError(
                f"{hierarchies_dir}: the hierarchy of {attribute!r} is missing or is not the one the release was "
                "generalized with (its SHA-256 differs from the manifest's); pass the release's --hierarchies"
            )
