"""The release report page: ``releases/<release_id>/report.html`` (no Dagster here).

Every release directory holds ``report.html``, a self-contained page (no network, no scripts,
no external styles; figures are inline PNG ``data:`` URIs drawn with matplotlib) that a data
steward can hand to a privacy officer, and ``report.json``, the aggregate figures the page is
drawn from that the other release files do not hold (AIL, RCE, every strong rule's raw and
recovered confidence; for the (k, ℓ) model the class-size counts and the average generalisation
level of every quasi-identifier). Both are written into the staging directory by the publish
assets, so they are part of the atomic release; ``msa-release report RELEASE_DIR`` regenerates
``report.html`` from the release files.

What the page shows: the parameters, record accounting, each gate with its observed figures and
status, the Great Expectations validation results of each gate (expectation type, column,
bounds, success, element and unexpected counts), the disclosure-probability histogram of the
rule holders, recovered vs raw confidence of every strong rule, AIL and RCE, and the comparison
with the Rating baseline (or the mixed model, for a Rating release) when a release of the same
input with the same parameters exists in the same ``releases/`` directory. Strong rules are
shown with their values: P1 Lemma 22 makes every rule and its confidence recoverable from the
release itself. No record, input row or raw value outside the rules is ever shown.

HTML contract (relied on by the browser test): the page has an ``<h1>`` containing
"msa-release report"; every figure is an ``<img>`` whose ``src`` starts with
``data:image/png;base64,`` and whose ``alt`` is not empty; every gate row carries
``data-gate="<gate name>"`` and ``data-status`` (``passed``, ``failed``, ``failed_overridden``
or ``not_applicable``).

Sources: SPEC §9 (gates), §10 (adversary), §11 (AIL, RCE, confidences), §14 ((k, ℓ) model).
"""

from __future__ import annotations

import base64
import contextlib
import html
import io
import json
import math
import os
import string
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import matplotlib

from pipeline.errors import UnusableInputError
from pipeline.release.reports import validate_report_data

if TYPE_CHECKING:
    from pipeline.models.base import PublicationModel

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

__all__ = [
    "GATE_DESCRIPTIONS",
    "REPORT_DATA",
    "REPORT_FILES",
    "REPORT_HTML",
    "ReportError",
    "audit_histogram_png",
    "find_baseline",
    "private_rating_baseline",
    "kl_report_data",
    "mixed_report_data",
    "regenerate_report",
    "render_report",
    "report_files",
    "utility_banner",
]

REPORT_HTML = "report.html"
REPORT_DATA = "report.json"
REPORT_FILES = (REPORT_HTML, REPORT_DATA)
#: Version of the layout of ``report.json``.
REPORT_DATA_FORMAT = 1
TEMPLATE = Path(__file__).resolve().parent / "templates" / "release_report.html"

#: One line per gate (README "Release gates").
GATE_DESCRIPTIONS = {
    "sac_released_is_l_diverse": "Every SAC~ group has exactly ℓ rows and ℓ distinct values on every sensitive "
    "attribute; each group's multiset of cluster tuples equals the original.",
    "attribute_table_is_l_diverse": "Every SID of every attribute has at least ℓ distinct values (no value above "
    "1/ℓ) and one record per value occurrence; suppressed cells are counted.",
    "disclosure_within_bound": "The strong-rule adversary (SPEC §10) run on the candidate gives every record a "
    "disclosure probability of at most 1/ℓ (exact rationals).",
    "rule_confidence_preserved": "Every strong rule's confidence recovered from the released tables alone "
    "(Lemma 22) equals the raw one (within the tolerance when records were deleted or cells suppressed).",
    "records_accounted_for": "Every input record is in exactly one of SAC~, the attribute table or the deleted "
    "list, and the counts add up.",
    "no_probability_tilt": "No SID of an attribute other than S_max holds a strong value.",
    "posterior_within_bound": "The learned-model adversary (deFinetti attack, Kifer 2009: naive Bayes fitted by EM on "
    "the release, exact posterior inside every SAC~ group and SID) gives no record's true sensitive value a posterior "
    "above max(1/ℓ, the population posterior from the quasi-identifiers alone) + posterior_slack.",
    "no_certain_attribute_table_cell": "No attribute-table cell is disclosed with probability above 1/ℓ by an "
    "adversary who knows how residuals are placed (a suppressed cell holds a value every SID of its attribute holds).",
    "release_carries_no_input_order": "No published id or SID column carries the input order (|Spearman ρ| with the "
    "input position ≤ max(0.05, 4/√(n−1))), and the order-replay adversary, who replays Rating from the ID table "
    "and links a row's cells by position, guesses attribute-table cells no better than chance + 4σ.",
    "kl_clusters_are_k_anonymous": "Every equivalence class has at least k rows and one generalised "
    "quasi-identifier tuple, and every label generalises the record's own value along its hierarchy.",
    "kl_clusters_are_l_diverse": "Every equivalence class has Diverse ≥ ℓ (ℓ pairwise totally different "
    "sensitive tuples), recomputed from the candidate table alone.",
    "kl_records_accounted_for": "Every input record is released exactly once or reported suppressed, and "
    "n_input − n_dropped_missing = n_released + n_suppressed_records.",
    "utility_within_thresholds": "At most max_deleted_share of the eligible records are deleted ((k, ℓ): suppressed) "
    "and, for every sensitive attribute, at most max_suppressed_share of its cells in the release are suppressed.",
}
STATUS_LABELS = {
    "passed": "passed",
    "failed": "FAILED",
    "failed_overridden": "failed, published anyway (allow_disclosure, or posterior_gate 'warn')",
    "not_applicable": "not applicable",
}
#: Observed figures not listed in the gate table (shown elsewhere or too long).
_HIDDEN_FIGURES = {"gx_expectations", "histogram_bins_0_to_1_step_0.1", "rules"}
DISCLOSURE_HISTOGRAM_KEY = "histogram_bins_0_to_1_step_0.1"


class ReportError(UnusableInputError, ValueError):
    """The release directory cannot be reported on; the message names the file and what to do."""


# --------------------------------------------------------------------------- figures of report.json


def mixed_report_data(release, rules, *, domain: Mapping[str, int]) -> dict:
    """``report.json`` of a mixed or Rating release.

    Parameters
    ----------
    release
        :class:`pipeline.release.audit.PublishedRelease` (read back, or built in memory from the gated
        candidate tables and the manifest before publishing).
    rules
        Strong rules of the raw table (``pipeline.core.rules.mine_strong_rules``: attributes,
        values, ``support_antecedent`` and ``support_both`` in records).
    domain
        Sensitive attribute -> number of distinct values in the raw table (RCE, SPEC §11).

    Returns
    -------
    dict
        JSON-safe: ``report_format``, ``model``, ``metrics`` (``additional_information_loss``,
        fraction 0..1; ``reconstruction_error``, records; ``reconstruction_error_per_record``;
        ``average_raw_confidence``, ``average_released_confidence``, ``n_suppressed_cells``,
        ``n_deleted``) and ``rules`` (antecedent, consequent, raw and released confidence).
    """
    from pipeline.release.audit import release_metrics

    metrics = release_metrics(release, rules, domain=domain)
    rule_list = metrics.pop("rules")
    return {"report_format": REPORT_DATA_FORMAT, "model": release.manifest["model"], "metrics": metrics, "rules": rule_list}


#: Figures of the private Rating baseline kept in report.json (aggregates only).
PRIVATE_BASELINE_FIGURES = (
    "additional_information_loss",
    "reconstruction_error_per_record",
    "average_released_confidence",
    "max_disclosure",
    "n_holders_above_bound",
    "n_holders_certain",
    "n_suppressed_cells",
    "n_deleted",
    "n_records",
)


def private_rating_baseline(
    records, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str], *, ell: int, min_confidence: float, rules
) -> dict:
    """P1's plain Rating (SPEC §7) on the same records, built in memory and measured, never published.

    Parameters
    ----------
    records
        The raw records (``row_id``, quasi-identifiers, sensitive attributes).
    rules
        The strong rules of ``records`` (as used by the release).

    Returns
    -------
    dict
        :data:`PRIVATE_BASELINE_FIGURES` (AIL 0..1, RCE per record, average recovered rule confidence or None,
        the strong-rule adversary's max disclosure and the numbers of rule holders above 1/ℓ and disclosed with
        certainty, suppressed cells, deleted records, records), plus ``model`` = ``"rating"`` and ``published`` = False.

    References
    ----------
    P1 §6 (the comparison); issue 12, release series (c).
    """
    from pipeline.evaluation.experiments import evaluate_release

    columns = ["row_id", *quasi_identifiers, *sensitive_attributes]
    figures = evaluate_release(
        records[columns],
        quasi_identifiers,
        sensitive_attributes,
        model="rating",
        ell=ell,
        min_confidence=min_confidence,
        rules=rules,
    )
    return {"model": "rating", "published": False, **{key: figures.get(key) for key in PRIVATE_BASELINE_FIGURES}}


def kl_report_data(kl_released, kl_clusters, quasi_identifiers: Sequence[str]) -> dict:
    """``report.json`` of a (k, ℓ) release.

    Parameters
    ----------
    kl_released
        The released table (``cluster_id`` per row).
    kl_clusters
        ``private/kl_clusters`` (``n_records`` and ``<qi>__level`` per class), or None when
        regenerating from the release files alone (the levels are then not known).
    quasi_identifiers
        In release order.

    Returns
    -------
    dict
        JSON-safe: ``class_size_counts`` (class size -> number of classes) and
        ``average_generalization_level`` (quasi-identifier -> mean levels climbed per record,
        or None when ``kl_clusters`` is None).
    """
    sizes = kl_released.groupby("cluster_id", observed=True).size()
    counts = {str(int(size)): int(n) for size, n in sizes.value_counts().sort_index().items()}
    levels = None
    if kl_clusters is not None and len(kl_clusters):
        weights = kl_clusters["n_records"].astype(float)
        levels = {a: float((kl_clusters[f"{a}__level"] * weights).sum() / weights.sum()) for a in quasi_identifiers}
    return {
        "report_format": REPORT_DATA_FORMAT,
        "model": "kl",
        "kl": {"class_size_counts": counts, "average_generalization_level": levels},
    }


# --------------------------------------------------------------------------- baseline


def _same_release_question(a: Mapping, b: Mapping) -> bool:
    keys = ("input_hmac", "ell", "quasi_identifiers", "sensitive_attributes")
    return all(a.get(k) == b.get(k) for k in keys) and a.get("min_confidence") == b.get("min_confidence")


def find_baseline(releases_dir: Path, manifest: Mapping) -> dict | None:
    """The newest release of the other model of the same comparison in ``releases_dir``.

    The other model is the plug-in's ``compared_with``: for a mixed release, the newest Rating release of the same
    input (SHA-256), ℓ, min_confidence, quasi-identifiers and sensitive attributes; for a Rating release, the
    newest such mixed release. None when there is none, and always for a model that names none ((k, ℓ)).

    Returns
    -------
    dict or None
        ``release_id``, ``model``, ``manifest`` and ``data`` (its ``report.json``, or None).
    """
    plugin = _plugin(manifest)
    other = plugin.compared_with if plugin is not None else None
    if other is None or not Path(releases_dir).is_dir():
        return None
    found = []
    for directory in Path(releases_dir).iterdir():
        if directory.name.startswith(".") or directory.name == manifest.get("release_id") or not directory.is_dir():
            continue
        try:
            candidate = json.loads((directory / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        if candidate.get("model") == other and _same_release_question(candidate, manifest):
            found.append((str(candidate.get("created_at", "")), directory.name, directory, candidate))
    if not found:
        return None
    _, name, directory, candidate = max(found)
    try:
        data = json.loads((directory / REPORT_DATA).read_text())
    except (OSError, ValueError):
        data = None
    return {"release_id": name, "model": other, "manifest": candidate, "data": data}


# --------------------------------------------------------------------------- rendering helpers


def _e(value) -> str:
    return html.escape(str(value), quote=True)


def _number(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:.6g}"
    if value is None:
        return "n/a"
    return str(value)


def _png(figure: Figure) -> str:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def audit_histogram_png(histogram: Mapping[str, int], ell: int) -> str:
    """Base64 PNG of the audit's per-record disclosure histogram (:func:`pipeline.release.audit.disclosure_histogram`:
    bin label -> records), with the bound 1/ℓ; for the Dagster UI (``audit/release_disclosure``)."""
    labels, counts = list(histogram), [int(v) for v in histogram.values()]
    figure = Figure(figsize=(7.5, 3.0))
    axis = figure.subplots()
    axis.bar(range(len(labels)), counts, color="tab:blue")
    axis.set_xticks(range(len(labels)), labels, rotation=45, ha="right", fontsize=8)
    bound = next(
        (i for i, label in enumerate(labels) if label != "0" and float(label.split(",")[1].strip(" ]")) >= 1 / ell - 1e-12), None
    )
    if bound is not None:
        axis.axvline(bound + 0.5, color="tab:red", linestyle="--", label=f"bins to the right: entirely above 1/ℓ = {1 / ell:.3f}")
        axis.legend(frameon=False, fontsize=8)
    axis.set_yscale("symlog")
    axis.set_ylabel("released records")
    axis.set_xlabel("disclosure probability")
    figure.suptitle("Adversary's disclosure probability per released record", fontsize=10)
    return _png(figure)


def _img(figure: Figure, alt: str, caption: str) -> str:
    return (
        f'<figure><img src="data:image/png;base64,{_png(figure)}" alt="{_e(alt)}"><figcaption>{_e(caption)}</figcaption></figure>'
    )


def _table(header: Sequence[str], rows: Sequence[Sequence], *, numeric: Sequence[bool] | None = None, row_attrs=None) -> str:
    numeric = numeric or [False] * len(header)
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = []
    for index, row in enumerate(rows):
        attrs = row_attrs[index] if row_attrs else ""
        cells = "".join(
            f'<td class="number">{_e(_number(v))}</td>'
            if numeric[i]
            else f"<td>{v if isinstance(v, _Raw) else _e(_number(v))}</td>"
            for i, v in enumerate(row)
        )
        body.append(f"<tr{attrs}>{cells}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


class _Raw(str):
    """Already-escaped HTML inside a table cell."""


def _status_badge(status: str) -> str:
    return f'<span class="status status-{_e(status)}">{_e(STATUS_LABELS.get(status, status))}</span>'


def _gate_status(gate: Mapping) -> str:
    return str(gate.get("status") or ("passed" if gate.get("passed") else "failed"))


# --------------------------------------------------------------------------- the model's plug-in


def _plugin(manifest: Mapping) -> PublicationModel | None:
    """The plug-in of the release's model (:mod:`pipeline.models`), or None for a model the registry does not know
    (its page then shows the common sections only)."""
    from pipeline.models import publication_model

    try:
        return publication_model(str(manifest.get("model")))
    except KeyError:
        return None


def _label(manifest: Mapping) -> str:
    plugin = _plugin(manifest)
    return plugin.label if plugin is not None else str(manifest.get("model"))


def _compares_with_baseline(manifest: Mapping) -> bool:
    plugin = _plugin(manifest)
    return plugin is not None and plugin.compared_with is not None


# --------------------------------------------------------------------------- sections


def _parameters(manifest: Mapping) -> str:
    reading = manifest.get("input_reading") or {}
    rows = [
        ("model", _label(manifest)),
        ("ℓ (ell)", manifest.get("ell")),
    ]
    plugin = _plugin(manifest)
    if plugin is not None:
        rows += plugin.report_parameters(manifest)
    rows += [
        ("quasi-identifiers", ", ".join(manifest.get("quasi_identifiers") or [])),
        ("sensitive attributes", ", ".join(manifest.get("sensitive_attributes") or [])),
        ("input file", reading.get("input_file") or reading.get("input_path")),
        ("input fingerprint (HMAC with the home secret)", manifest.get("input_hmac")),
        ("input format", reading.get("input_format")),
        ("missing-value tokens", ", ".join(repr(t) for t in reading.get("missing_value_tokens") or [])),
        ("missing-value policy", reading.get("missing_value_policy")),
        ("created at", manifest.get("created_at")),
    ]
    versions = manifest.get("package_versions") or {}
    if versions:
        rows.append(("package versions", ", ".join(f"{k} {v}" for k, v in versions.items())))
    return "<h2>Parameters</h2>" + _table(["parameter", "value"], rows)


def _accounting(manifest: Mapping) -> str:
    n_input, n_dropped = manifest.get("n_input") or 0, manifest.get("n_dropped_missing") or 0
    kept = n_input - n_dropped
    plugin = _plugin(manifest)
    parts, equation, extra = plugin.report_accounting(manifest) if plugin is not None else ([], "n_input − n_dropped_missing", [])
    adds_up = kept == sum(n for _, n in parts)
    rows = [("records read (n_input)", n_input), ("dropped: missing sensitive value", n_dropped), ("kept", kept), *parts]
    rows += extra
    figure = Figure(figsize=(7.5, 1.5))
    axis = figure.subplots()
    left = 0
    colors = ["tab:blue", "tab:orange", "tab:red", "tab:gray"]
    for (label, n), color in zip([*parts, ("dropped", n_dropped)], colors, strict=False):
        axis.barh([0], [n], left=left, color=color, label=f"{label}: {n:,}")
        left += n
    axis.set_yticks([])
    axis.set_xlabel("records")
    axis.legend(loc="upper center", bbox_to_anchor=(0.5, -0.45), ncol=4, frameon=False, fontsize=8)
    figure.suptitle("Where every input record went", fontsize=10)
    return (
        "<h2>Record accounting</h2>"
        + _table(["", "records"], rows, numeric=[False, True])
        + f"<p>{_e(equation)}: <strong>{'holds' if adds_up else 'DOES NOT hold'}</strong> "
        f"({n_input:,} − {n_dropped:,} = {kept:,}).</p>"
        + _img(figure, "Stacked bar of the input records by destination", "Input records by destination.")
    )


def _figures_list(observed: Mapping) -> str:
    items = []
    for key, value in observed.items():
        if key in _HIDDEN_FIGURES:
            continue
        if isinstance(value, (dict, list)):
            value = json.dumps(value)
        items.append(f"<dt>{_e(key)}</dt><dd>{_e(_number(value))}</dd>")
    return f'<dl class="figures">{"".join(items)}</dl>' if items else ""


def _expectations_table(gate: Mapping) -> str:
    observed = gate.get("observed") or {}
    expectations = observed.get("gx_expectations")
    if not expectations:
        if gate.get("status") == "not_applicable":
            return '<p class="note">Not applicable to this model: no suite was run.</p>'
        return (
            '<p class="note">This release did not record per-expectation results (published before they were '
            f"recorded). Suite summary: success {_e(_number(observed.get('gx_success_percent')))} %, "
            f"{_e(_number(observed.get('gx_evaluated_expectations')))} expectations evaluated, failed: "
            f"{_e(observed.get('failed_expectations', 'n/a'))}.</p>"
        )
    rows = []
    for item in expectations:
        bounds = []
        for key in ("min_value", "max_value"):
            if item.get(key) is not None:
                bounds.append(f"{key.split('_')[0]} {_number(item[key])}")
        if item.get("value_set") is not None:
            bounds.append(f"in {item['value_set']}")
        rows.append(
            (
                item.get("type"),
                item.get("column") or "",
                "; ".join(bounds),
                _Raw(_status_badge("passed" if item.get("success") else "failed")),
                item.get("element_count"),
                item.get("unexpected_count"),
                item.get("unexpected_percent"),
                item.get("missing_count"),
                item.get("observed_value"),
            )
        )
    header = [
        "expectation",
        "column",
        "expected",
        "result",
        "rows checked",
        "unexpected",
        "unexpected %",
        "missing",
        "observed value",
    ]
    numeric = [False, False, False, False, True, True, True, True, False]
    if all(row[-1] is None for row in rows):  # map expectations have no aggregate observed value
        header, numeric, rows = header[:-1], numeric[:-1], [row[:-1] for row in rows]
    return _table(header, rows, numeric=numeric)


def _gates(manifest: Mapping) -> str:
    order = {name: position for position, name in enumerate(GATE_DESCRIPTIONS)}
    gates = sorted(manifest.get("checks") or [], key=lambda g: (order.get(g["name"], len(order)), g["name"]))
    rows, attrs = [], []
    for gate in gates:
        status = _gate_status(gate)
        rows.append(
            (
                _Raw(f"<code>{_e(gate['name'])}</code>"),
                GATE_DESCRIPTIONS.get(gate["name"], ""),
                _Raw(_status_badge(status)),
                _Raw(_figures_list(gate.get("observed") or {})),
            )
        )
        attrs.append(f' data-gate="{_e(gate["name"])}" data-status="{_e(status)}"')
    summary = _table(["gate", "what it checks", "status", "observed figures"], rows, row_attrs=attrs)
    details = "".join(
        f'<h3 id="gx-{_e(gate["name"])}">Great Expectations results: <code>{_e(gate["name"])}</code></h3>'
        + _expectations_table(gate)
        for gate in gates
    )
    intro = (
        "<p>Each gate is a blocking Dagster asset check that runs a Great Expectations suite on a frame derived "
        "from the candidate release (counts and flags per group, SID, record or class; never raw values). "
        "The release is published only if every applicable gate passes.</p>"
    )
    return "<h2>Release gates</h2>" + intro + summary + details


def _observed(manifest: Mapping, name: str) -> dict:
    for gate in manifest.get("checks") or []:
        if gate["name"] == name:
            return dict(gate.get("observed") or {})
    return {}


def disclosure_section(manifest: Mapping) -> str:
    observed = _observed(manifest, "disclosure_within_bound")
    counts = observed.get(DISCLOSURE_HISTOGRAM_KEY)
    ell = int(manifest["ell"])
    text = "<h2>Disclosure</h2>"
    if not observed:
        return text + "<p>The disclosure gate was not recorded in this release.</p>"
    text += (
        "<p>The adversary of SPEC §10 knows every strong rule and its confidence and sees the release; for every "
        "record that holds a strong rule it computes the probability that the record holds the rule's consequent. "
        f"The bound is 1/ℓ = {1 / ell:.4f}.</p>"
        + _table(
            ["figure", "value"],
            [
                ("records holding a strong rule", observed.get("n_records_with_strong_rules")),
                ("maximum disclosure probability", observed.get("max_disclosure_probability")),
                ("mean disclosure probability", observed.get("mean_disclosure_probability")),
                ("records above 1/ℓ", observed.get("n_records_above_bound")),
                ("records disclosed with certainty", observed.get("n_records_certain")),
            ],
            numeric=[False, True],
        )
    )
    if not counts:
        return text + "<p>No histogram was recorded.</p>"
    figure = Figure(figsize=(7.5, 3.2))
    axis = figure.subplots()
    edges = [round(0.1 * i, 1) for i in range(11)]
    axis.bar([e + 0.05 for e in edges[:-1]], counts, width=0.095, color="tab:blue", edgecolor="black", linewidth=0.4)
    axis.axvline(1 / ell, color="tab:red", linestyle="--", label=f"bound 1/ℓ = {1 / ell:.3f}")
    axis.set_xlim(0, 1)
    axis.set_xticks(edges)
    axis.set_xlabel("disclosure probability (bins of 0.1; the last includes 1)")
    axis.set_ylabel("records holding a strong rule")
    axis.yaxis.set_major_locator(MaxNLocator(integer=True))
    axis.legend(frameon=False)
    above = observed.get("n_records_above_bound")
    figure.suptitle(f"Disclosure probability of the rule holders ({above} above the bound)", fontsize=10)
    return text + _img(
        figure,
        f"Histogram of the disclosure probability of {sum(counts)} rule holders, bound 1/{ell}",
        "Per-record disclosure probability of the records holding a strong rule (SPEC §10), with the bound 1/ℓ. "
        "Bins are [a, a + 0.1); a record exactly at 1/ℓ is within the bound (the gate compares exact fractions).",
    )


def rules_section(manifest: Mapping, data: Mapping | None) -> str:
    text = "<h2>Strong rules: raw vs recovered confidence</h2>"
    rules = (data or {}).get("rules")
    if rules is None:
        return text + (
            "<p>Not available: this release has no <code>report.json</code> with the rule confidences. Regenerate "
            "the page with <code>msa-release report RELEASE_DIR --raw RAW</code> to compute them from the raw "
            "table.</p>"
        )
    observed = _observed(manifest, "rule_confidence_preserved")
    text += (
        "<p>Every strong rule (S_i = a) ⇒ (S_j = b) mined from the raw table with confidence ≥ min_confidence, its "
        "raw confidence and the confidence recovered from the released tables alone (P1 Lemma 22). Rules and "
        "their confidences are recoverable from the release, so showing them discloses nothing new.</p>"
    )
    if not rules:
        return text + "<p>No strong rule at this min_confidence.</p>"
    rows = []
    for rule in rules:
        raw, released = rule.get("raw_confidence"), rule.get("released_confidence")
        deviation = abs(released - raw) if raw is not None and released is not None else None
        rows.append(
            (
                f"{rule['antecedent'][0]} = {rule['antecedent'][1]}",
                f"{rule['consequent'][0]} = {rule['consequent'][1]}",
                raw,
                released,
                deviation,
            )
        )
    text += _table(
        ["antecedent", "consequent", "raw confidence", "recovered confidence", "|difference|"],
        rows,
        numeric=[False, False, True, True, True],
    )
    if observed:
        text += (
            f"<p>Gate <code>rule_confidence_preserved</code>: {observed.get('n_rules_exact', 'n/a')} of "
            f"{observed.get('n_strong_rules', 'n/a')} rules recovered exactly; largest difference "
            f"{_e(_number(observed.get('max_confidence_deviation')))} (tolerance "
            f"{_e(_number(observed.get('tolerance')))}, exact required: {_e(_number(observed.get('exact_required')))}).</p>"
        )
    figure = Figure(figsize=(4.8, 4.4))
    axis = figure.subplots()
    raw = [r["raw_confidence"] for r in rules]
    recovered = [r["released_confidence"] if r["released_confidence"] is not None else float("nan") for r in rules]
    low = min([*raw, *[x for x in recovered if x == x], float(manifest.get("min_confidence") or 1.0)]) - 0.05
    axis.plot([low, 1.0], [low, 1.0], color="gray", linestyle="--", linewidth=0.8, label="recovered = raw")
    axis.scatter(raw, recovered, color="tab:blue", zorder=3, label="strong rule")
    axis.set_xlim(low, 1.01)
    axis.set_ylim(low, 1.01)
    axis.set_xlabel("raw confidence")
    axis.set_ylabel("confidence recovered from the release")
    axis.legend(frameon=False, fontsize=8)
    figure.suptitle("Rule confidence: recovered vs raw", fontsize=10)
    return text + _img(
        figure,
        f"Scatter plot of the recovered vs raw confidence of {len(rules)} strong rules",
        "Each point is a strong rule; on the diagonal the release preserves its confidence exactly.",
    )


def utility_section(manifest: Mapping, data: Mapping | None) -> str:
    metrics = (data or {}).get("metrics")
    text = "<h2>Utility: AIL and RCE</h2>"
    if metrics is None:
        return text + (
            "<p>Not available: this release has no <code>report.json</code>. Regenerate the page with "
            "<code>msa-release report RELEASE_DIR --raw RAW</code>.</p>"
        )
    return text + (
        "<p>AIL (additional information loss, SPEC §11) is the mean loss per original cell beyond ℓ (0 when every "
        "possible-value set has exactly ℓ values; a suppressed cell or deleted record costs 1). RCE "
        "(reconstruction error) sums over the records 1 − 1/N, N being the number of sensitive tuples a reader "
        "cannot tell apart.</p>"
        + _table(
            ["metric", "value"],
            [
                ("additional information loss (AIL)", metrics.get("additional_information_loss")),
                ("reconstruction error (RCE), summed over records", metrics.get("reconstruction_error")),
                ("RCE per record", metrics.get("reconstruction_error_per_record")),
                ("average raw rule confidence", metrics.get("average_raw_confidence")),
                ("average recovered rule confidence", metrics.get("average_released_confidence")),
                ("suppressed cells", metrics.get("n_suppressed_cells")),
                ("deleted records", metrics.get("n_deleted")),
            ],
            numeric=[False, True],
        )
    )


#: The comparison table's rows (labels of :func:`_comparison_row`) -> the private baseline's figure
#: (:data:`PRIVATE_BASELINE_FIGURES`).
_PRIVATE_BASELINE_ROW = {
    "AIL": "additional_information_loss",
    "RCE per record": "reconstruction_error_per_record",
    "average recovered rule confidence": "average_released_confidence",
    "max disclosure probability": "max_disclosure",
    "records above 1/ℓ": "n_holders_above_bound",
    "records disclosed with certainty": "n_holders_certain",
    "suppressed cells": "n_suppressed_cells",
    "deleted records": "n_deleted",
}


def _comparison_row(manifest: Mapping, data: Mapping | None) -> dict:
    metrics = (data or {}).get("metrics") or {}
    disclosure = _observed(manifest, "disclosure_within_bound")
    return {
        "AIL": metrics.get("additional_information_loss"),
        "RCE per record": metrics.get("reconstruction_error_per_record"),
        "average recovered rule confidence": metrics.get("average_released_confidence"),
        "max disclosure probability": disclosure.get("max_disclosure_probability"),
        "records above 1/ℓ": disclosure.get("n_records_above_bound"),
        "records disclosed with certainty": disclosure.get("n_records_certain"),
        "suppressed cells": manifest.get("n_suppressed_cells"),
        "deleted records": manifest.get("n_deleted"),
    }


def baseline_section(manifest: Mapping, data: Mapping | None, baseline: Mapping | None) -> str:
    model = manifest["model"]
    other = {"mixed": "Rating baseline", "rating": "mixed model"}[model]
    text = f"<h2>Comparison with the {other}</h2>"
    private = (data or {}).get("private_rating_baseline")
    if baseline is None and private is not None and private.get("not_computed"):  # only the mixed model computes it
        return text + (
            f"<p>Not computed: the release covers {_e(_number(private.get('n_records')))} records, more than "
            f"<code>private_baseline_max_records</code> = {_e(_number(private.get('max_records')))} (P1's plain Rating "
            "of the same records is computed privately in the publish step, about 12 s per million records). Raise "
            "that setting to see it; never publish a Rating release only to compare (docs/series.md).</p>"
        )
    if baseline is None and private is not None:
        ours = _comparison_row(manifest, data)
        theirs = {label: private.get(key) for label, key in _PRIVATE_BASELINE_ROW.items()}
        return text + (
            "<p>P1's plain Rating (SPEC §7) of the same records, <strong>computed privately in this run and never "
            "published</strong>: publishing it too would let anyone intersect the two releases (docs/series.md). "
            "Rating bucketizes every sensitive attribute independently, so the strong-rule adversary (SPEC §10) beats "
            "1/ℓ on it; its figures are those of P1's reference algorithm (input order, suppressed residuals), "
            "the comparison of the paper.</p>"
            + _table(
                ["figure", "this release (mixed model)", "Rating, computed privately"],
                [(key, ours[key], theirs[key]) for key in ours],
                numeric=[False, True, True],
            )
        )
    if baseline is None:
        return text + (
            f"<p>Not available: no {other} release of the same input (same input HMAC), ℓ, min_confidence, "
            "quasi-identifiers and sensitive attributes is in this <code>releases/</code> directory. Do not publish "
            "one only to compare: a second release of the same records can be intersected with this one (the home's "
            "registry refuses it unless <code>--allow-recomposition</code>), and Rating discloses more to the "
            "strong-rule adversary. <code>make experiments</code> and <code>make privacy-report</code> compare the "
            "models privately, without publishing anything.</p>"
        )
    ours = _comparison_row(manifest, data)
    theirs = _comparison_row(baseline["manifest"], baseline.get("data"))
    names = {"mixed": "mixed model", "rating": "Rating"}
    header = ["figure", f"this release ({names[model]})", f"{names[baseline['model']]} (release {baseline['release_id']})"]
    rows = [(key, ours[key], theirs[key]) for key in ours]
    note = ""
    if baseline.get("data") is None:
        note = '<p class="note">The other release has no report.json: its AIL, RCE and confidences are not shown.</p>'
    return text + (
        "<p>The same input and parameters published with the other model of P1's comparison; Rating bucketizes "
        "every sensitive attribute independently, so the strong-rule adversary can beat 1/ℓ on it.</p>"
        + _table(header, rows, numeric=[False, True, True])
        + note
    )


def kl_section(manifest: Mapping, data: Mapping | None) -> str:
    classes = _observed(manifest, "kl_clusters_are_k_anonymous")
    diversity = _observed(manifest, "kl_clusters_are_l_diverse")
    n_released = manifest.get("n_released") or 0
    cost = manifest.get("total_generalization_cost")
    text = (
        "<h2>Equivalence classes and generalisation cost</h2>"
        "<p>The quasi-identifiers are generalised along the hierarchies so that every equivalence class "
        "(<code>cluster_id</code>) has at least k records and Diverse ≥ ℓ; the sensitive values are published "
        "unchanged. The price is quasi-identifier precision, measured by P2's cost S (SPEC §14.2).</p>"
        + _table(
            ["figure", "value"],
            [
                ("equivalence classes", manifest.get("n_clusters")),
                ("smallest class", classes.get("min_cluster_size")),
                ("largest class", classes.get("max_cluster_size")),
                ("average class size", classes.get("average_cluster_size")),
                ("smallest Diverse", diversity.get("min_diverse_observed")),
                ("generalisation cost S", cost),
                ("S per record", (cost / n_released) if cost is not None and n_released else None),
                ("naive cost (levels climbed)", manifest.get("total_naive_cost")),
            ],
            numeric=[False, True],
        )
    )
    attacks = manifest.get("attacks")
    if isinstance(attacks, str):
        attacks = json.loads(attacks)
    if attacks:
        text += (
            "<h3>Adversaries measured on this release (not gated)</h3>"
            "<p>The adversaries of docs/attacks.md, run on this release when it was published. None of these "
            "figures is a gate of the (k, ℓ) model: they say what it does <strong>not</strong> protect. Members of "
            "an equivalence class share their published quasi-identifiers, so the learned-model adversary's "
            "posterior of a member's value is the value's share of its class, which distinct ℓ-diversity does not "
            "bound; rows are published whole, so one known value of a victim can identify its row in the class.</p>"
            + _table(
                ["adversary (knows)", "figure"],
                [
                    (
                        "learned model (the release, the victim's quasi-identifiers): cells above max(1/ℓ, population) + "
                        f"{attacks.get('slack')}",
                        f"{_number(attacks.get('learned_model_cells_above_bound'))} of "
                        f"{_number(attacks.get('learned_model_cells'))}",
                    ),
                    ("… records with a cell above that bound", attacks.get("learned_model_records_above_bound")),
                    ("… largest posterior of a true value", attacks.get("learned_model_max_posterior")),
                    (
                        "one known value (the victim's class and one of its values): share of records with another value pinned",
                        attacks.get("one_known_value_share"),
                    ),
                    (
                        "input order: largest |Spearman ρ| of row_id / cluster_id with the input position",
                        attacks.get("max_abs_spearman_input_order"),
                    ),
                ],
                numeric=[False, True],
            )
        )
    kl = (data or {}).get("kl") or {}
    counts = kl.get("class_size_counts")
    if counts:
        sizes = sorted((int(s), int(n)) for s, n in counts.items())
        figure = Figure(figsize=(7.5, 3.2))
        axis = figure.subplots()
        axis.bar([s for s, _ in sizes], [n for _, n in sizes], color="tab:blue", width=0.8)
        axis.axvline(float(manifest.get("k") or 0) - 0.5, color="tab:red", linestyle="--", label=f"k = {manifest.get('k')}")
        if sizes[-1][0] > 60:
            axis.set_xscale("log")
        else:
            axis.xaxis.set_major_locator(MaxNLocator(integer=True))
        axis.set_xlabel("class size (records)")
        axis.set_ylabel("classes")
        axis.yaxis.set_major_locator(MaxNLocator(integer=True))
        axis.legend(frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        figure.suptitle("Equivalence-class sizes", fontsize=10)
        text += _img(
            figure,
            f"Histogram of the sizes of {sum(n for _, n in sizes)} equivalence classes",
            "Number of equivalence classes of each size; every class has at least k records.",
        )
    levels = kl.get("average_generalization_level")
    heights = {a: (f or {}).get("height") for a, f in ((manifest.get("hierarchies") or {}).get("files") or {}).items()}
    if levels:
        names = list(levels)
        shares = [levels[a] / heights[a] if heights.get(a) else 0.0 for a in names]
        figure = Figure(figsize=(7.5, 0.5 + 0.45 * len(names)))
        axis = figure.subplots()
        axis.barh(names, shares, color="tab:orange")
        axis.set_xlim(0, 1)
        axis.invert_yaxis()
        axis.set_xlabel("average levels climbed / hierarchy height (0 = original values, 1 = fully suppressed '*')")
        figure.suptitle("Generalisation per quasi-identifier", fontsize=10)
        text += _table(
            ["quasi-identifier", "average levels climbed", "hierarchy height"],
            [(a, levels[a], heights.get(a)) for a in names],
            numeric=[False, True, True],
        ) + _img(
            figure,
            "Bar chart of the average generalisation level of every quasi-identifier",
            "How far each quasi-identifier was generalised, on average over the records.",
        )
    elif data is None or not kl:
        text += '<p class="note">Class sizes and generalisation levels are not recorded (no report.json).</p>'
    return text


def _banner(manifest: Mapping) -> str:
    gates = manifest.get("checks") or []
    statuses = [_gate_status(g) for g in gates]
    applicable = [s for s in statuses if s != "not_applicable"]
    if manifest.get("disclosure_override_used"):
        return (
            '<div class="banner banner-warn"><strong>Published with allow_disclosure:</strong> the disclosure gate '
            "failed and was overridden; the bound 1/ℓ does NOT hold for every record.</div>"
        )
    if applicable and all(s == "passed" for s in applicable):
        return (
            f'<div class="banner banner-ok">All {len(applicable)} applicable release gates passed'
            + (f" ({len(statuses) - len(applicable)} not applicable to this model)" if len(applicable) < len(statuses) else "")
            + ".</div>"
        )
    return '<div class="banner banner-warn">Not every gate passed: see the gate table.</div>'


def _percent(share: float) -> str:
    return f"{100 * float(share):.1f} %"


def utility_banner(manifest: Mapping) -> str:
    """The utility banner (issue 15): records deleted and cells suppressed per sensitive attribute, each against its
    threshold, and every setting that weakens a default (the manifest's ``utility`` and ``overrides``). Green when
    no setting is overridden, yellow otherwise; empty for a release made before the utility gate. The element has
    ``data-utility`` = ``passed`` or ``failed`` and one ``li[data-override]`` per override."""
    utility, overrides = manifest.get("utility"), manifest.get("overrides") or []
    if not utility and not overrides:
        return ""
    parts = []
    if utility:
        order = [a for a in manifest.get("sensitive_attributes") or [] if a in utility["suppressed_share"]]
        order += [a for a in utility["suppressed_share"] if a not in order]
        shares = ", ".join(f"{_e(a)} {_percent(utility['suppressed_share'][a])}" for a in order)
        parts.append(
            f"<strong>Utility:</strong> {_number(utility['records_deleted'])} of {_number(utility['records_eligible'])} "
            f"eligible records deleted ({_percent(utility['deleted_share'])}; limit {_percent(utility['max_deleted_share'])}); "
            f"suppressed cells per sensitive attribute: {shares} (limit {_percent(utility['max_suppressed_share'])})."
        )
    if overrides:
        items = "".join(
            f'<li data-override="{_e(o["setting"])}"><code>{_e(o["setting"])}</code> = {_e(o["value"])} '
            f"(default {_e(o['default'])}): {_e(o['effect'])}</li>"
            for o in overrides
        )
        parts.append(f"<strong>Settings that weaken a default protection or threshold:</strong><ul>{items}</ul>")
    status = "passed" if not utility or utility.get("passed") else "failed"
    kind = "banner-ok" if not overrides and status == "passed" else "banner-warn"
    return f'<div class="banner {kind}" data-utility="{status}">{" ".join(parts)}</div>'


def render_report(
    manifest: Mapping, data: Mapping | None, *, baseline: Mapping | None = None, generated_by: str = "msa-release"
) -> str:
    """The HTML page of one release.

    Parameters
    ----------
    manifest
        The release manifest (``manifest.json`` as a dict).
    data
        The release's ``report.json`` (:func:`mixed_report_data` / :func:`kl_report_data`), or
        None when not available (the page then says which sections are missing).
    baseline
        :func:`find_baseline` for mixed and Rating releases (None: "not available").
    generated_by
        Shown on the page: what produced it (the publish step or the ``report`` command).

    Returns
    -------
    str
        A complete, self-contained HTML document (see the module docstring for its contract).
    """
    from pipeline.release.publish import package_versions

    sections = [_parameters(manifest), _accounting(manifest), _gates(manifest)]
    plugin = _plugin(manifest)
    if plugin is not None:  # its own sections (a model the registry does not know: parameters, accounting, gates)
        sections += plugin.report_sections(manifest, data, baseline)
    template = string.Template(TEMPLATE.read_text(encoding="utf-8"))
    return template.substitute(
        release_id=_e(manifest.get("release_id")),
        model_label=_e(_label(manifest)),
        created_at=_e(manifest.get("created_at")),
        version=_e(package_versions().get("msa-release", "")),
        generated_by=_e(generated_by),
        banner=_banner(manifest) + utility_banner(manifest),
        sections="\n".join(sections),
    )


def report_files(manifest: Mapping, data: Mapping, *, releases_dir: Path) -> dict[str, bytes]:
    """``report.html`` and ``report.json`` of a release about to be published (for
    :func:`pipeline.release.publish.publish_release`'s ``extra_files``); ``report.json`` is ``data`` as given.

    Raises
    ------
    ValueError
        ``data`` does not match its contract (:func:`pipeline.release.reports.validate_report_data`; the message names
        the key): nothing is written, so the release is not published.
    """
    validate_report_data(data)  # every key's type (pipeline/release/reports.py), before anything is written
    baseline = find_baseline(releases_dir, manifest) if _compares_with_baseline(manifest) else None
    page = render_report(manifest, data, baseline=baseline, generated_by="written when the release was published")
    return {
        REPORT_HTML: page.encode("utf-8"),
        REPORT_DATA: (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8"),
    }


def regenerate_report(release_dir: str | Path, *, raw_path: str | Path | None = None) -> Path:
    """Rewrite ``report.html`` of a published release from its files (``msa-release report``).

    Parameters
    ----------
    release_dir
        ``<home>/releases/<release_id>``, or a ``releases`` directory / home (then LATEST).
    raw_path
        Optional raw table: when the release has no ``report.json`` (published before it
        existed), the rule confidences, AIL and RCE of a mixed or Rating release are computed by
        the audit (:func:`pipeline.release.audit.run_audit`), reading the table as the release read its
        input. A (k, ℓ) release never needs it.

    Returns
    -------
    Path
        The rewritten ``report.html`` (replaced atomically; ``report.json`` is not changed).

    Raises
    ------
    ReportError
        Not a release directory, an unreadable manifest, or an unusable raw table.
    OSError
        ``report.html`` cannot be written (disk full, I/O error, not writable); the old page is left as it was.
    """
    from pipeline.release.audit import AuditError, _resolve_release_dir, run_audit

    try:
        directory = _resolve_release_dir(Path(release_dir).expanduser().resolve())
    except AuditError as error:
        raise ReportError(str(error)) from error
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError) as error:
        raise ReportError(f"{manifest_path}: cannot read the manifest ({error}); is {directory} a release?") from error
    plugin = _plugin(manifest)
    if plugin is None:
        raise ReportError(f"{manifest_path}: unknown model {manifest.get('model')!r}")
    data = None
    generated_by = "regenerated by msa-release report from the release files"
    data_path = directory / REPORT_DATA
    if data_path.is_file():
        try:
            data = json.loads(data_path.read_text())
        except ValueError as error:
            raise ReportError(f"{data_path}: not valid JSON ({error}); regenerate with --raw RAW") from error
    if data is None:
        data = plugin.report_data_from_files(directory, manifest)
    if data is None and raw_path is not None and plugin.audited:
        try:
            result = run_audit(directory, raw_path)
        except AuditError as error:
            raise ReportError(str(error)) from error
        metrics = result.report.metrics.model_dump(mode="json")
        data = {
            "report_format": REPORT_DATA_FORMAT,
            "model": manifest["model"],
            "rules": metrics.pop("rules"),
            "metrics": metrics,
        }
        generated_by += f" and the raw table {Path(raw_path).name}"
    baseline = find_baseline(directory.parent, manifest) if _compares_with_baseline(manifest) else None
    page = render_report(manifest, data, baseline=baseline, generated_by=generated_by)
    target = directory / REPORT_HTML
    temporary = directory / f".{REPORT_HTML}.tmp"
    try:
        temporary.write_text(page, encoding="utf-8")
        os.replace(temporary, target)
    except OSError:
        with contextlib.suppress(OSError):  # a full disk or an I/O error leaves the old page and no temporary file
            temporary.unlink(missing_ok=True)
        raise
    return target
