"""The typed manifest of a release (``manifest.json`` and the ``release_manifest`` table).

:class:`Manifest` says the type of every manifest key; :func:`pipeline.release.publish.publish_release` validates a
manifest against it before anything is written, so a wrong type (a string where a count belongs, an unknown key)
fails before a release directory exists. Validation only: the manifest is written as given, so ``manifest.json``
stays byte-compatible with earlier releases. The common part serves every model; the (k, ℓ) section and the
posterior-gate section are ``None`` (JSON ``null``) in the releases of the other models.

No Dagster here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from enum import Enum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, NonNegativeInt, PositiveInt, StrictBool, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from pipeline.settings import default_min_support

__all__ = [
    "InputReading",
    "Manifest",
    "Override",
    "Sharding",
    "ShardPart",
    "ShardSpread",
    "Utility",
    "release_overrides",
    "utility_of_checks",
    "validate_contract",
    "validate_input_reading",
    "validate_manifest",
]

ModelT = TypeVar("ModelT", bound=BaseModel)

#: A JSON object (checks, attacks, the input reading, versions, timings, the profile).
JsonObject = dict[str, Any]


class InputReading(BaseModel):
    """How a release read its input, so that ``msa-release audit --raw`` reads the raw table the same way.

    Published, so it names no unconfigured column and no path: the file's base name, the number of columns and the
    0-based position of each configured column (a headerless CSV); older releases listed every name instead
    (``column_names``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input_file: str | None = None
    input_format: str = "auto"
    csv_header: StrictBool | None = None
    column_count: int | None = None
    column_positions: dict[str, int] = {}
    column_names: list[str] | None = None  # releases made before column_positions
    delimiter: str = ","
    strip_whitespace: StrictBool = True
    missing_value_tokens: list[str] = []
    missing_value_policy: str | None = None

    def all_column_names(self) -> list[str]:
        """Every column name in file order; the columns the release did not configure are ``column_<i>`` (1-based)."""
        if self.column_names:
            return list(self.column_names)
        if not self.column_count:
            return []
        names = [f"column_{i + 1}" for i in range(self.column_count)]
        for name, position in self.column_positions.items():
            names[position] = name
        return names


class Utility(BaseModel):
    """What the release loses and the utility gate's verdict (``checks.gates.utility_within_thresholds``, issue 15):
    records deleted out of the eligible ones (read minus dropped for a missing value; for (k, ℓ) the suppressed
    records) and, per sensitive attribute, suppressed cells out of its cells in the release; shares are fractions."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    records_eligible: int
    records_deleted: int
    deleted_share: float
    suppressed_cells: dict[str, int]
    attribute_cells: dict[str, int]
    suppressed_share: dict[str, float]
    max_deleted_share: float
    max_suppressed_share: float
    passed: StrictBool


class Override(BaseModel):
    """A setting of the release that weakens a default protection or threshold: its value, its default and what it
    means for the release, in plain words (:func:`release_overrides`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    setting: str
    value: Any
    default: Any
    effect: str


class ShardSpread(BaseModel):
    """The per-shard spread of a sharded release: ``[min, max]`` over the shards of each count."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_records: tuple[NonNegativeInt, NonNegativeInt]
    n_deleted: tuple[NonNegativeInt, NonNegativeInt]
    n_suppressed_cells: tuple[NonNegativeInt, NonNegativeInt]


class ShardPart(BaseModel):
    """One published part file: ``path`` relative to the release directory (``<table>/part-<s:05d>.parquet``), its
    row count and the SHA-256 of its bytes (hex)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: str
    rows: NonNegativeInt
    sha256: str


class Sharding(BaseModel):
    """The manifest's ``sharding`` of a sharded release (issue 17; ``null`` in an unsharded one): S, the records per
    shard asked for, the engine and its workers, the per-shard spread of records, deletions and suppressed cells, and
    the published part files per table (written by :func:`pipeline.release.sharded_publish.publish_sharded_release`).
    The shard key's salt is never recorded."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    n_shards: PositiveInt
    shard_rows: PositiveInt
    engine: str
    workers: PositiveInt
    per_shard: ShardSpread
    parts: dict[str, list[ShardPart]] | None = None


class Manifest(BaseModel):
    """Every key of a release manifest and its type; a key left out is ``null`` (SPEC: README "Release contract")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # --------------------------------------------------------------- every model
    notice: str | None = None
    promotion: JsonObject | None = None
    release_id: str | None = None
    created_at: str | None = None
    input_hmac: str | None = None
    model: str | None = None
    allow_disclosure: StrictBool | None = None
    disclosure_override_used: StrictBool | None = None
    allow_recomposition: StrictBool | None = None
    recomposition: list[JsonObject] | None = None
    input_reading: InputReading | None = None
    ell: int | None = None
    ell_per_attribute: dict[str, int] | None = None
    quasi_identifiers: list[str] | None = None
    sensitive_attributes: list[str] | None = None
    n_input: int | None = None
    n_dropped_missing: int | None = None
    dropped_missing_by_attribute: dict[str, int] | None = None
    # what reading the input changed, counts only (issue 14's cleaning; reported since session 39): per
    # quasi-identifier the records whose value was missing (published as '?'), per column the look-alike spellings
    # merged into another
    missing_quasi_identifier_by_column: dict[str, int] | None = None
    look_alike_spellings_merged: dict[str, int] | None = None
    checks: list[JsonObject] | None = None
    stage_seconds: dict[str, float] | None = None
    package_versions: dict[str, str] | None = None
    profile: JsonObject | None = None
    # --------------------------------------------------------------- mixed and Rating
    min_confidence: float | None = None
    min_support: int | None = None
    seed: int | None = None
    randomness: str | None = None
    grouping: str | None = None
    stratum_deletion_budget: float | None = None
    residual_policy: str | None = None
    n_deleted_for_eligibility: int | None = None
    n_generalized_groups: int | None = None
    n_generalized_cells: int | None = None
    n_strata: int | None = None
    n_generalized_attribute_table_cells: int | None = None
    n_sac_released: int | None = None
    n_attribute_table: int | None = None
    n_deleted: int | None = None
    n_suppressed_cells: int | None = None
    posterior_slack: float | None = None
    posterior_gate: str | None = None
    posterior_gate_warned: StrictBool | None = None
    # --------------------------------------------------------------- (k, ℓ) (P2, SPEC §14)
    k: int | None = None
    kl_method: str | None = None
    max_block_size: int | None = None
    hierarchies: JsonObject | list[Any] | str | None = None
    generalization_weights: dict[str, float] | None = None
    n_released: int | None = None
    n_suppressed_records: int | None = None
    n_clusters: int | None = None
    total_generalization_cost: float | None = None
    total_naive_cost: int | None = None
    attacks: JsonObject | None = None
    # --------------------------------------------------------------- utility gate and overrides (issue 15)
    utility: Utility | None = None
    overrides: list[Override] | None = None
    # --------------------------------------------------------------- sharded releases (issue 17)
    sharding: Sharding | None = None

    @field_validator("model")
    @classmethod
    def _registered_model(cls, value: str | None) -> str | None:
        """A registered publication model (:data:`pipeline.models.PUBLICATION_MODELS`), or None."""
        from pipeline.models import PUBLICATION_MODELS

        if value is not None and value not in PUBLICATION_MODELS:
            raise PydanticCustomError("enum", "not a registered publication model")
        return value


def validate_manifest(manifest: Mapping[str, object]) -> Manifest:
    """Check a manifest's keys and types.

    Parameters
    ----------
    manifest
        Key -> JSON-ready value (Python ``int``/``float``/``str``/``bool``/``None``, lists and dicts).

    Returns
    -------
    Manifest
        The typed manifest (the input itself is what gets published).

    Raises
    ------
    ValueError
        An unknown key or a value of the wrong type; the message names the key(s), never the value.
    """
    return validate_contract(Manifest, dict(manifest), "the release manifest")


def validate_input_reading(reading: Mapping[str, object]) -> InputReading:
    """A manifest's ``input_reading`` as :class:`InputReading`.

    Raises
    ------
    ValueError
        An unknown key or a value of the wrong type; the message names the key(s), never the value.
    """
    return validate_contract(InputReading, dict(reading), "the manifest's input_reading")


def validate_contract(model: type[ModelT], data: dict[str, object], what: str) -> ModelT:
    """``data`` as ``model`` (a pydantic contract: the manifest, report.json, the audit report).

    Raises
    ------
    ValueError
        A missing or unknown key or a value of the wrong type: "<what> does not match its contract: <key> (<error
        type>), …", naming the keys (dotted paths), never the values.
    """
    try:
        return model.model_validate(data)
    except ValidationError as error:  # pydantic's own message quotes the values: name keys and error types only
        problems = sorted({f"{'.'.join(str(p) for p in e['loc'])} ({e['type']})" for e in error.errors()})
        raise ValueError(f"{what} does not match its contract: {', '.join(problems)}") from None


#: The utility gate's name (``checks/gates.py``); its observed figures are the manifest's ``utility``.
UTILITY_GATE = "utility_within_thresholds"
#: Keys of the manifest's ``utility`` taken from the gate's figures (``pipeline.core.verification.UTILITY_KEYS``).
_UTILITY_FIGURES = tuple(name for name in Utility.model_fields if name != "passed")


def utility_of_checks(checks: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The manifest's ``utility`` from this run's gate outcomes: the utility gate's figures and whether it passed, or
    None when the model runs no utility gate (a plug-in that names none)."""
    for check in checks:
        if check.get("name") == UTILITY_GATE:
            observed = check.get("observed") or {}
            return {**{key: observed[key] for key in _UTILITY_FIGURES}, "passed": bool(check.get("passed"))}
    return None


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Enum) else value


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def _above(value: Any, default: Any) -> bool:
    return float(value) > float(default)


#: Setting -> (whether its value weakens the default's protection, the effect in plain words given value and default).
OVERRIDE_RULES: dict[str, tuple[Callable[[Any, Any], bool], Callable[[Any, Any], str]]] = {
    "max_deleted_share": (
        _above,
        lambda v, d: f"up to {_percent(v)} of the eligible records may be deleted (default limit {_percent(d)})",
    ),
    "max_suppressed_share": (
        _above,
        lambda v, d: f"up to {_percent(v)} of a sensitive attribute's cells may be suppressed (default limit {_percent(d)})",
    ),
    "confidence_tolerance": (
        _above,
        lambda v, d: f"strong-rule confidences recovered from the release may differ from the true ones by up to {v:g} "
        f"(default {d:g})",
    ),
    "allow_disclosure": (
        lambda v, d: bool(v) and not bool(d),
        lambda v, d: "published even if the strong-rule adversary learns a rule holder's value with probability above 1/ℓ",
    ),
    "posterior_gate": (
        lambda v, d: v == "warn" and d != "warn",
        lambda v, d: "the learned-model gate only warns: records the adversary guesses above its bound are published",
    ),
    "posterior_slack": (
        _above,
        lambda v, d: f"the learned-model adversary may guess a true value up to {v:g} above max(1/ℓ, population "
        f"posterior) (default {d:g})",
    ),
    # the strong-rule adversary the disclosure gate bounds knows the rules of at least min_support records and
    # min_confidence (red team, session 38: --min-support 1000 mined no rule, so the gate bounded nothing on a shared
    # Rating release whose adversary reaches 0.47 with the default rules)
    "min_support": (
        _above,
        lambda v, d: f"strong rules held by fewer than {v:g} records (default {d:g}) are not mined, so the disclosure "
        "gate does not bound them",
    ),
    "min_confidence": (
        _above,
        lambda v, d: f"rules of confidence below {v:g} (default {d:g}) are not strong rules, so the disclosure gate does "
        "not bound them",
    ),
    "allow_recomposition": (
        lambda v, d: bool(v) and not bool(d),
        lambda v, d: "may share records with an earlier, different release of this home; intersecting the two can pin values",
    ),
    "randomness": (
        lambda v, d: v == "spec-reference" and v != d,
        lambda v, d: "random choices follow the input order (SPEC's reference algorithms), which the release can leak",
    ),
    "residual_policy": (
        lambda v, d: v == "suppress" and v != d,
        lambda v, d: "Rating's residual cells are suppressed instead of deleting whole records; a suppressed cell can "
        "name its value",
    ),
    "grouping": (
        lambda v, d: v == "p1" and v != d,
        lambda v, d: "P1's grouping with exact quasi-identifiers, which a learned-model adversary can use on correlated data",
    ),
}


def release_overrides(values: Mapping[str, Any], defaults: Mapping[str, Any], names: Iterable[str]) -> list[dict[str, Any]]:
    """The manifest's ``overrides``: every setting among ``names`` whose value weakens its default's protection or
    threshold (:data:`OVERRIDE_RULES`), in the order of ``names``.

    Parameters
    ----------
    values
        The run's settings (``ReleaseSettings`` as a mapping; enum members allowed).
    defaults
        Each setting's default.
    names
        The settings the run's job reads (``pipeline.models.settings_of_job``); others do not apply.

    Returns
    -------
    list of dict
        ``setting``, ``value``, ``default`` (JSON values) and ``effect`` (plain words), as :class:`Override`.
    """
    overrides = []
    for name in names:
        if name not in OVERRIDE_RULES or name not in values:
            continue
        weakens, effect = OVERRIDE_RULES[name]
        value, default = _plain(values[name]), _plain(defaults.get(name))
        if name == "min_support":  # 0 means max(ℓ, 5) records (ReleaseSettings.effective_min_support)
            effective = default_min_support(int(values.get("ell") or 0))
            value = int(value) if value else effective
            default = int(default) if default else effective
        if weakens(value, default):
            overrides.append({"setting": name, "value": value, "default": default, "effect": effect(value, default)})
    return overrides
