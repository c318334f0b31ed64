"""The typed manifest of a release (``manifest.json`` and the ``release_manifest`` table).

:class:`Manifest` says the type of every manifest key; :func:`pipeline.release.publish.publish_release` validates a
manifest against it before anything is written, so a wrong type (a string where a count belongs, an unknown key)
fails before a release directory exists. Validation only: the manifest is written as given, so ``manifest.json``
stays byte-compatible with earlier releases. The common part serves every model; the (k, ℓ) section and the
posterior-gate section are ``None`` (JSON ``null``) in the releases of the other models.

No Dagster here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, StrictBool, ValidationError, field_validator
from pydantic_core import PydanticCustomError

__all__ = ["InputReading", "Manifest", "validate_contract", "validate_input_reading", "validate_manifest"]

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
