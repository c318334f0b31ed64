"""Dagster resources: the release parameters (one config for the whole run) and the release home."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field, PrivateAttr, field_validator, model_validator

from pipeline.home import ensure_release_home, home_access_warning, release_home
from pipeline.settings import (
    DEFAULT_MIN_CONFIDENCE,
    DEFAULT_MIN_SHARD_ROWS,
    DEFAULT_POSTERIOR_SLACK,
    DEFAULT_SHARD_ROWS,
    MAX_SEED,
    SHARDING_SETTINGS,
    Engine,
    Grouping,
    KLMethod,
    Model,
    PosteriorGate,
    ResidualPolicy,
    SparkLaunch,
    default_min_support,
)

__all__ = [
    "ADULT_COLUMNS",
    "ENGINES",
    "SHARDING_SETTINGS",
    "ADULT_HIERARCHIES",
    "ADULT_EXAMPLE_INPUT",
    "ADULT_EXAMPLE_SETTINGS",
    "ADULT_INPUT",
    "NULL_MEANS_DEFAULT",
    "adult_example_settings",
    "ExperimentSettings",
    "KL_METHODS",
    "MODELS",
    "GROUPINGS",
    "RANDOMNESS",
    "RESIDUAL_POLICIES",
    "ReleaseSettings",
    "ReleaseStore",
    "ensure_release_home",
    "home_access_warning",
    "is_adult_input",
    "release_home",
]

#: Column names of UCI Adult's ``adult.data`` (no header row in the file).
ADULT_COLUMNS = [
    "age",
    "workclass",
    "fnlwgt",
    "education",
    "education-num",
    "marital-status",
    "occupation",
    "relationship",
    "race",
    "sex",
    "capital-gain",
    "capital-loss",
    "hours-per-week",
    "native-country",
    "income",
]


#: Publication models: the mixed model of P1, the plain Rating baseline (SPEC §7) and the
#: (k, ℓ)-anonymity model of P2 (SPEC §14).
MODELS = tuple(Model)

#: Where a release runs (``ReleaseSettings.engine``): ``memory`` (the ``release`` job), ``local`` or ``spark`` (the
#: ``sharded_release`` job, issue 17).
ENGINES = tuple(Engine)

#: What the posterior gate does when a record is above its bound (``posterior_gate``).
POSTERIOR_GATE_MODES = tuple(PosteriorGate)
#: Default of ``posterior_gate``: a release above the bound is refused (issue 12). The default Adult release passes it
#: since Rating runs inside quasi-identifier strata (``grouping: qi_aware``; docs/posterior.md).
DEFAULT_POSTERIOR_GATE = PosteriorGate.block

#: SAC~ grouping of the mixed model (``ReleaseSettings.grouping``).
GROUPINGS = tuple(Grouping)

#: What happens to Rating's residual values that every SID already holds (``ReleaseSettings.residual_policy``).
RESIDUAL_POLICIES = tuple(ResidualPolicy)

#: Where a release's random choices come from (``ReleaseSettings.randomness``).
RANDOMNESS = ("home-secret", "spec-reference")

#: Methods of the (k, ℓ) model (``pipeline.core.kl_anonymity.kl_anonymize``).
KL_METHODS = tuple(KLMethod)

PROJECT_ROOT = Path(__file__).resolve().parents[1]
#: The shipped UCI Adult file (the default input) and its ARX hierarchies.
ADULT_INPUT = PROJECT_ROOT / "data" / "adult" / "adult.data"
ADULT_HIERARCHIES = PROJECT_ROOT / "data" / "adult" / "hierarchies"


def is_adult_input(input_path: str | Path) -> bool:
    """Whether ``input_path`` (resolved like the reader does: working directory, then the project root) is the
    shipped ``data/adult/adult.data``."""
    candidate = Path(input_path).expanduser()
    resolved = candidate if candidate.is_absolute() or candidate.exists() else PROJECT_ROOT / candidate
    try:
        return resolved.resolve() == ADULT_INPUT.resolve()
    except (OSError, RuntimeError):
        return False


def _format_of(path: Path) -> str:
    return "parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv"


#: Defaults of the utility gate's thresholds (issue 15): a release that deletes more than this share of its eligible
#: records, or suppresses more than this share of a sensitive attribute's cells, is refused unless raised.
DEFAULT_MAX_DELETED_SHARE = 0.10
DEFAULT_MAX_SUPPRESSED_SHARE = 0.10


class ReleaseSettings(dg.ConfigurableResource):
    """Parameters of one release run, shared by every asset and gate of the job.

    The defaults publish UCI Adult as in P1 §6 (SPEC §12): quasi-identifiers sex, race,
    marital-status, native-country, workclass; sensitive attributes education, occupation,
    age, relationship; ℓ = 3; min_confidence = 0.8; seed 0. With ``model = 'kl'`` (the
    ``kl_release`` job) the quasi-identifiers are generalised along the hierarchies of
    ``hierarchies_dir`` into equivalence classes of at least ``k`` records with ``Diverse ≥ ℓ``
    (P2, SPEC §14); ``min_confidence``, ``seed``, ``allow_disclosure`` and
    ``confidence_tolerance`` do not apply to it.

    Each publishing job takes only the fields its model reads (``COMMON_SETTINGS`` and the plug-in's
    ``settings_fields``, :mod:`pipeline.models`) and checks them with this class before a run exists
    (``pipeline.jobs.job_settings_mapping``); the ``evaluation`` and ``attacks`` jobs take every field.
    """

    input_path: str = Field(
        default="data/adult/adult.data",
        description="Input table: a CSV or Parquet file (relative paths: working directory, then the project root).",
    )
    input_format: str = Field(default="auto", description="'csv', 'parquet' or 'auto' (by file extension).")
    csv_header: bool | None = Field(
        default=None,
        description="Whether the CSV's first row holds the column names. Unset (null): Adult's adult.data (the default "
        "input) has none; any other CSV is looked at: a header when its first row names every configured column, else "
        "when Python's csv.Sniffer finds one (a first row unlike the rest in type or length).",
    )
    column_names: list[str] = Field(
        default=[],
        description="Names of all columns in file order, for a CSV without header row (or to rename a Parquet file's). "
        "Empty (default): the header row's names; Adult's 15 names for Adult's headerless adult.data.",
    )
    delimiter: str = Field(default=",", description="CSV field separator.")
    strip_whitespace: bool = Field(default=True, description="Strip spaces around every value (Adult writes ', ').")
    max_value_length: int = Field(
        default=4096,
        ge=1,
        description="Longest accepted value of a configured column, in bytes of UTF-8: a longer value is refused when "
        "the input is read (exit status 2, naming the file, the column and the line, never the value), so that no "
        "single value can drive the memory of a run.",
    )
    quasi_identifiers: list[str] = Field(
        default=["sex", "race", "marital-status", "native-country", "workclass"],
        description="Quasi-identifier columns (names in the input): published unchanged by the mixed and Rating models, "
        "generalised along the hierarchies by the (k, ℓ) model.",
    )
    sensitive_attributes: list[str] = Field(
        default=["education", "occupation", "age", "relationship"],
        description="Sensitive attribute columns (names in the input; at least 2, none also a quasi-identifier), in schema order.",
    )
    ell: int = Field(
        default=3,
        ge=2,
        le=1000,
        description="ℓ, an integer in [2, 1000]: size of every SAC~ group and minimum number "
        "of distinct values per SID (mixed, Rating; disclosure bound 1/ℓ); minimum Diverse of every equivalence class (kl).",
    )
    ell_per_attribute: dict[str, int] = Field(
        default={},
        description="ℓ_i per sensitive attribute (P0's sensitivity coefficients, SPEC §6.7; mixed, Rating), e.g. "
        "{education: 4, occupation: 3, age: 2, relationship: 2}: every sensitive attribute needs an integer ℓ_i in "
        "[2, 1000]. The SIDs of attribute i get >= ℓ_i distinct values and its disclosure bound is 1/ℓ_i; SAC~ groups "
        "have L = max ℓ_i members, and ell is then L (whatever value ell is given). Empty (default): ell for every "
        "attribute. Not for the (k, ℓ) model. On the command line: --ell education=4,occupation=3,age=2,relationship=2.",
    )
    min_confidence: float = Field(
        default=DEFAULT_MIN_CONFIDENCE,
        gt=0.0,
        le=1.0,
        description="Minimum confidence of a strong rule, in (0, 1]; compared with >= (mixed, Rating; not used by kl).",
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=MAX_SEED,
        description="Seed (integer in [0, 2**63 - 1]: the manifest stores it as a 64-bit integer) of the per-group, "
        "per-cluster random permutation of SAC~ (mixed model).",
    )
    grouping: Grouping = Field(
        default=Grouping.qi_aware,
        description="Grouping and bucketization (mixed and Rating models): 'qi_aware' (default): SAC~ partners with the "
        "seed's quasi-identifier tuple first, the quasi-identifiers of a group whose members differ generalized to their "
        "lowest common ancestor in hierarchies_dir (else '*'), and, with residual_policy 'delete', Rating run inside "
        "quasi-identifier strata (records of a SID publish the same generalized quasi-identifiers), so members of a group "
        "or SID cannot be told apart; 'p1': P1's Algorithm 11 and plain Rating (exact quasi-identifiers; on correlated "
        "data an adversary who learns P(sensitive | quasi-identifiers) recovers the values: the deFinetti attack).",
    )
    stratum_deletion_budget: float = Field(
        default=0.02,
        ge=0.0,
        le=1.0,
        description="qi_aware grouping: a quasi-identifier stratum is split into more specific ones only if the split "
        "deletes at most this many more records (for ℓ-eligibility) per record whose quasi-identifiers it publishes more "
        "specifically, in [0, 1]. 0: fewest deletions, most generalization; larger: more specific quasi-identifiers, "
        "more deleted records (Adult ℓ = 3: 0 → about 100 more deletions and almost every attribute-table cell "
        "generalized; 0.02 → about 600 and 57 % of cells; 0.05 → about 1,300 and 40 %).",
    )
    allow_recomposition: bool = Field(
        default=False,
        description="Publish even if the release shares records with an earlier release of this home made with other "
        "settings or other records (an intersection of the two can pin values; see docs/series.md). Recorded in the "
        "manifest (allow_recomposition, recomposition).",
    )
    residual_policy: ResidualPolicy = Field(
        default=ResidualPolicy.delete,
        description="Rating residuals (mixed: the attribute table; rating: the whole table). 'delete' (default): "
        "before Rating, whole records are deleted until no value exceeds 1/ℓ of the records bucketized (Anatomy's "
        "eligibility), so no cell is suppressed; a suppressed cell (NULL SID) names its value, since only a value "
        "held by every SID is suppressed. 'suppress': SPEC's reference behaviour (suppressed cells are known with "
        "certainty; refused by the no_certain_attribute_table_cell gate).",
    )
    min_support: int = Field(
        default=0,
        ge=0,
        le=MAX_SEED,  # a 64-bit integer in the manifest
        description="Minimum support of a strong rule, in records (mixed, Rating). 0 (default) means max(ℓ, 5). "
        "Rules held by fewer records are neither used nor printed anywhere (report, audit, manifest). "
        "1 is SPEC §1's value (every co-occurrence), which discloses rare records through their rules.",
    )
    missing_value_tokens: list[str] = Field(
        default=["", "NULL", "?"], description="Values that mean 'missing' (SQL NULL always does)."
    )
    missing_value_policy: str = Field(
        default="drop_records_missing_sensitive",
        description="'drop_records_missing_sensitive': drop records with a missing sensitive value; "
        "a missing quasi-identifier is kept as the value '?'. Both counts are reported.",
    )
    model: Model = Field(
        default=Model.mixed,
        description="Publication model: 'mixed' (SAC~ + improved Rating, P1), published by the `release` job; 'rating' "
        "(plain Rating on the whole table, the baseline of P1 §6; refused by the disclosure gate unless "
        "allow_disclosure), published by the `rating_release` job; or 'kl' ((k, ℓ)-anonymity by generalisation, P2), "
        "published by the `kl_release` job.",
    )
    randomness: str = Field(
        default="home-secret",
        description="'home-secret' (default): records are consumed in a keyed order of their content, each "
        "attribute is bucketized in its own keyed order with keyed random SID numbers, and the SAC~ permutation "
        "is keyed, all from $MSA_RELEASE_HOME/secret.key, so no published id carries the input order and the "
        "published seed cannot replay the release. 'spec-reference': SPEC's algorithms in input order (golden "
        "examples, teaching); leaks the input order and is refused by the release_carries_no_input_order gate "
        "on tables of more than a few hundred records.",
    )
    allow_disclosure: bool = Field(
        default=False,
        description="Publish even if the strong-rule adversary beats 1/ℓ (the disclosure gate then only warns). "
        "Recorded in the manifest. Meant for the Rating baseline; never needed by the mixed model.",
    )
    confidence_tolerance: float = Field(
        default=0.05,
        ge=0.0,
        le=1.0,
        description="Largest accepted |recovered - raw| rule confidence when records were deleted or cells suppressed.",
    )
    max_deleted_share: float = Field(
        default=DEFAULT_MAX_DELETED_SHARE,
        ge=0.0,
        le=1.0,
        description="Utility gate: largest accepted share of eligible records (read minus those dropped for a missing "
        "value) that the release deletes ((k, ℓ): suppresses); above it the release is refused. Raising it is "
        "recorded as an override in the manifest, the summary and report.html.",
    )
    max_suppressed_share: float = Field(
        default=DEFAULT_MAX_SUPPRESSED_SHARE,
        ge=0.0,
        le=1.0,
        description="Utility gate: largest accepted share of a sensitive attribute's published cells that are "
        "suppressed, per attribute; above it the release is refused. Raising it is recorded as an override.",
    )
    posterior_slack: float = Field(
        default=DEFAULT_POSTERIOR_SLACK,
        ge=0.0,
        le=1.0,
        description="Posterior gate: tolerance added to max(1/ℓ, population posterior) when bounding the learned-model "
        "adversary's posterior of every record's true sensitive value (mixed, Rating); kl: the same slack for the "
        "adversaries measured on the release (manifest 'attacks', not gated).",
    )
    posterior_gate: PosteriorGate = Field(
        default=DEFAULT_POSTERIOR_GATE,
        description="Posterior gate: 'block' (default: a record above the bound refuses the release) or 'warn' (the gate "
        "still fails and says so in the manifest, the report and the summary, with WARN severity, and does not block; "
        "e.g. for grouping 'p1' on correlated data).",
    )
    profile: bool = Field(
        default=False,
        description="Record the wall time and peak memory (RSS) of every stage into the manifest (column "
        "'profile') and the Dagster metadata (profile_seconds_<stage>, profile_peak_rss_mb_<stage>); "
        "see pipeline/evaluation/profiling.py for how the peak is measured.",
    )
    k: int = Field(
        default=3,
        ge=2,
        le=1_000_000,
        description="(k, ℓ) model: minimum number of records of an equivalence class (cluster_id); an integer in "
        "[2, 1000000] and k >= ℓ.",
    )
    hierarchies_dir: str = Field(
        default="",
        description="Folder of ARX generalization hierarchies, one file per quasi-identifier named "
        "'<quasi-identifier>.csv' or '*_hierarchy_<quasi-identifier>.csv' (relative paths: working directory, then "
        "the project root); make one for your table with `msa-release hierarchies`. Empty (default): Adult's "
        "(data/adult/hierarchies) when the input is Adult's adult.data, none for any other input (the kl model is then "
        "refused; the mixed and Rating models' qi_aware grouping generalizes quasi-identifiers to '*' only).",
    )
    generalization_weights: dict[str, float] = Field(
        default={},
        description="(k, ℓ) model: weight c_i >= 0 of each quasi-identifier in the generalisation cost S "
        "(SPEC §14.2); a quasi-identifier not listed weighs 1.",
    )
    kl_method: KLMethod = Field(
        default=KLMethod.blocked,
        description="(k, ℓ) model: 'blocked' (default: Mondrian-style blocks of at most max_block_size records, "
        "then the §14.3 greedy in each), 'greedy' (§14.3 on the whole table; at most 6000 records, O(n²) memory) "
        "or 'exact' (§14.4 subset DP; at most 16 records).",
    )
    max_block_size: int = Field(
        default=256,
        ge=4,
        le=6000,
        description="(k, ℓ) model, method 'blocked': largest block the greedy runs on (at least 2k).",
    )
    mining_backend: str = Field(
        default="auto",
        description="How strong rules are mined: 'auto' (mlxtend FP-growth below duckdb_mining_threshold records, "
        "a DuckDB aggregate from there on), 'mlxtend-apriori', 'mlxtend-fpgrowth', 'duckdb' or 'counting'. "
        "All give the same rules.",
    )
    duckdb_mining_threshold: int = Field(
        default=100_000,
        ge=1,
        description="With mining_backend 'auto': tables of at least this many records are mined with DuckDB.",
    )
    private_baseline_max_records: int = Field(
        default=1_000_000,
        ge=0,
        description="report.html's Rating baseline (P1's plain Rating of the same records, computed privately in the "
        "publish step, never published) is computed up to this many records; above, the report says it was not "
        "computed (it costs about 12 s per million records). 0: never.",
    )
    keep_releases: int = Field(
        default=0,
        ge=0,
        description="Retention: after a successful publish, remove the oldest release directories beyond the newest "
        "keep_releases (never the one LATEST names) of the directory it was published to (releases/ or comparisons/, "
        "each kept separately); 0 (default) keeps every release.",
    )
    promote: bool | None = Field(
        default=None,
        description="Shared release or comparison. Unset (default): shared (releases/<id>/, LATEST moves) unless the "
        "model is a baseline (rating) or a gate failed and an override let it through (allow_disclosure, "
        "posterior_gate 'warn'): those go to comparisons/<id>/, never LATEST, marked 'COMPARISON — not for sharing'. "
        "false: always a comparison. true: shared when every applicable gate passed; a release above a bound stays "
        "a comparison (pipeline/release/promotion.py).",
    )

    engine: Engine | None = Field(
        default=None,
        description="Where the release runs (issue 17). Null (not set): the model's default engine, 'local' for the "
        "mixed model, 'memory' for rating and kl. 'local': the `sharded_release` job, DuckDB stages the input in "
        "shards of shard_rows records and a pool of `workers` processes releases them (a table of up to shard_rows "
        "records is one shard: the in-memory release byte for byte, published as part files); 'spark': the "
        "`sharded_release` job on Apache Spark (spark_master or spark_remote); 'memory': the model's in-memory job "
        "(`release` for mixed: the whole table in memory, release.duckdb). Sharded releases publish the mixed model only.",
    )
    workers: int = Field(
        default=2, ge=1, le=1024, description="engine 'local': processes that release shards in parallel (>= 1)."
    )
    shard_rows: int = Field(
        default=DEFAULT_SHARD_ROWS,
        ge=1,
        description="Sharded release: records per shard; S = ceil(records / shard_rows) shards (a table of up to "
        "shard_rows records is one shard, i.e. the same release as engine 'memory').",
    )
    min_shard_rows: int = Field(
        default=DEFAULT_MIN_SHARD_ROWS,
        ge=1,
        description="Sharded release: smallest accepted mean shard size when there is more than one shard; below "
        "~50,000 records a random split costs more than 1 % extra suppressed cells and AIL (lower it for tests).",
    )
    spark_master: str | None = Field(
        default=None,
        description="engine 'spark': the Spark master in client mode, e.g. 'local[2]', 'yarn', 'k8s://https://host:443' "
        "(or spark_remote for Spark Connect).",
    )
    spark_remote: str | None = Field(
        default=None, description="engine 'spark': a Spark Connect URL 'sc://host:15002' (instead of spark_master)."
    )
    spark_launch: SparkLaunch = Field(
        default=SparkLaunch.client,
        description="engine 'spark': 'client' (default: the release step runs the shards on its own SparkSession) or "
        "'pipes' (the release step launches the standalone job `python -m pipeline.engines.spark_job` through the "
        "Dagster Pipes client of the resource pipes_subprocess_client, with spark_master or spark_remote, and reads "
        "the shards' summaries it writes; the gates stay this job's blocking checks).",
    )

    @field_validator("input_format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        if value not in ("auto", "csv", "parquet"):
            raise ValueError(f"input_format must be 'auto', 'csv' or 'parquet', got {value!r}")
        return value

    @field_validator("model", "posterior_gate", "grouping", "residual_policy", "kl_method", "engine", "spark_launch")
    @classmethod
    def _plain_text(cls, value) -> str:
        """The typed choices (:mod:`pipeline.settings`) are checked by their enum (in the Dagster config schema too)
        and kept as plain text: they go into manifests, Dagster metadata and messages, which take strings."""
        return str(value)

    @field_validator("randomness")
    @classmethod
    def _known_randomness(cls, value: str) -> str:
        if value not in RANDOMNESS:
            raise ValueError(f"randomness must be one of {list(RANDOMNESS)}, got {value!r}")
        return value

    @field_validator("mining_backend")
    @classmethod
    def _known_mining_backend(cls, value: str) -> str:
        from pipeline.core.rules import MINING_BACKENDS

        if value not in ("auto", "mlxtend", *MINING_BACKENDS):
            raise ValueError(f"mining_backend must be 'auto' or one of {list(MINING_BACKENDS)}, got {value!r}")
        return value

    @field_validator("missing_value_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value != "drop_records_missing_sensitive":
            raise ValueError(f"missing_value_policy {value!r} is not supported; use 'drop_records_missing_sensitive'")
        return value

    @field_validator("min_confidence", mode="before")
    @classmethod
    def _finite_min_confidence(cls, value):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"min_confidence must be a number in (0, 1], got {value!r}")
        return value

    @field_validator("delimiter")
    @classmethod
    def _one_character_delimiter(cls, value: str) -> str:
        if len(value) != 1 or value in ('"', "\n", "\r"):
            raise ValueError(
                f"delimiter must be one character other than a quote or a line break, got {value!r} "
                "(e.g. ',' or ';'; a tab: $'\\t' in bash)"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _default_engine(cls, data: Any) -> Any:
        """``engine`` not set (absent or null): the model's default engine (:func:`pipeline.models.default_engine`:
        ``local`` for the mixed model, ``memory`` for the others), so that ``engine`` always names where the run goes."""
        if isinstance(data, dict) and data.get("engine") is None:
            from pipeline.models import default_engine

            model = data.get("model")
            data = {**data, "engine": default_engine(str(model) if model is not None else None)}
        return data

    @model_validator(mode="before")
    @classmethod
    def _ell_is_largest_of_per_attribute(cls, data: Any) -> Any:
        """With ``ell_per_attribute``, ``ell`` is L = max ℓ_i (SPEC §6.7); its entries are checked after."""
        if isinstance(data, dict):
            mapping = data.get("ell_per_attribute")
            if isinstance(mapping, dict) and mapping:
                values = list(mapping.values())
                if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
                    data = {**data, "ell": max(values)}
        return data

    def ell_by_attribute(self) -> dict[str, int]:
        """ℓ_i of every sensitive attribute (schema order): ``ell_per_attribute``, or ``ell`` for each when empty."""
        if self.ell_per_attribute:
            return {a: int(self.ell_per_attribute[a]) for a in self.sensitive_attributes}
        return dict.fromkeys(self.sensitive_attributes, int(self.ell))

    def ell_requirement(self) -> int | dict[str, int]:
        """What the core takes as ``ell`` (:mod:`pipeline.core.sensitivity`): the integer ℓ, or the mapping when
        ``ell_per_attribute`` is set."""
        return self.ell_by_attribute() if self.ell_per_attribute else int(self.ell)

    def feasibility_ell(self) -> int | dict[str, int]:
        """What the input's early ℓ check reads (:func:`pipeline.io.loading.check_ell_feasible`): ℓ_i per attribute for
        Rating (its SIDs need ℓ_i values), else ℓ = L (SAC~ groups need L distinct values on every attribute; (k, ℓ)
        classes Diverse >= ℓ)."""
        from pipeline.io.loading import LargestEll

        if self.model == "rating":
            return self.ell_requirement()
        # the mixed model with ℓ_i: L = max ℓ_i, naming the ℓ_i in a refusal
        return LargestEll(self.ell_by_attribute()) if self.ell_per_attribute and self.model == "mixed" else int(self.ell)

    @model_validator(mode="after")
    def _columns_consistent(self) -> ReleaseSettings:
        from pipeline.vocabulary import setting, setting_example

        if len(self.sensitive_attributes) < 2:
            raise ValueError(
                f"sensitive_attributes needs at least 2 columns, got {list(self.sensitive_attributes)}: the models "
                f"protect several sensitive attributes at once; name 2 or more with {setting_example('sensitive_attributes', ['a', 'b'])} "
                "(for a single sensitive attribute use a plain ℓ-diversity tool)"
            )
        for kind, names in (("quasi_identifiers", self.quasi_identifiers), ("sensitive_attributes", self.sensitive_attributes)):
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ValueError(f"{kind} lists {repeated} more than once; name every column once")
        both = sorted(set(self.quasi_identifiers) & set(self.sensitive_attributes))
        if both:
            raise ValueError(
                f"column(s) {both} are both quasi-identifier and sensitive attribute; a column plays one role: remove "
                f"it from {setting('quasi_identifiers')} or from {setting('sensitive_attributes')}"
            )
        if self.ell_per_attribute:
            self._check_ell_per_attribute()
        self._check_engine()
        from pipeline.models import publication_model

        publication_model(self.model).parameters(self)  # the model's own checks (e.g. k >= ell for the (k, ℓ) model)
        return self

    def _check_engine(self) -> None:
        """A sharded engine publishes the mixed model; the Spark settings go with engine 'spark', one of them."""
        from pipeline.vocabulary import setting, setting_example

        if self.engine != Engine.memory and self.model != Model.mixed:
            raise ValueError(
                f"{setting_example('engine', str(self.engine))} runs sharded releases of the mixed model only, not "
                f"{setting_example('model', str(self.model))}: leave {setting('engine')} out (the {self.model} model "
                "runs in memory)"
            )
        for name in ("spark_master", "spark_remote"):
            if getattr(self, name) is not None and self.engine != Engine.spark:
                raise ValueError(
                    f"{setting(name)} is for {setting_example('engine', 'spark')} only (the engine is "
                    f"{self.engine}): add {setting_example('engine', 'spark')} or leave {setting(name)} out"
                )
        if self.spark_master is not None and self.spark_remote is not None:
            raise ValueError(
                f"give one of {setting('spark_master')} (client mode) and {setting('spark_remote')} (Spark Connect), not both"
            )
        if self.spark_launch != SparkLaunch.client and self.engine != Engine.spark:
            raise ValueError(
                f"{setting_example('spark_launch', str(self.spark_launch))} is for {setting_example('engine', 'spark')} "
                f"only (the engine is {self.engine}): add {setting_example('engine', 'spark')} or leave "
                f"{setting('spark_launch')} out"
            )

    def _check_ell_per_attribute(self) -> None:
        """Every sensitive attribute has an integer ℓ_i in [2, 1000] and no other name has one (names, never values
        of the table, are quoted)."""
        from pipeline.vocabulary import setting

        missing = [a for a in self.sensitive_attributes if a not in self.ell_per_attribute]
        unknown = [a for a in self.ell_per_attribute if a not in self.sensitive_attributes]
        if missing:
            # a misspelt name is both: name it too (newcomer, session 40: dept=2 for department said only "no ℓ for
            # ['department']")
            raise ValueError(
                f"{setting('ell_per_attribute')} gives no ℓ for sensitive attribute(s) {missing}"
                + (f" and gives one for {unknown}, which is not a sensitive attribute (misspelt?)" if unknown else "")
                + f": give every sensitive attribute ({list(self.sensitive_attributes)}) its ℓ_i"
            )
        if unknown:
            raise ValueError(
                f"{setting('ell_per_attribute')} gives an ℓ for {unknown}, which is not a sensitive attribute "
                f"({list(self.sensitive_attributes)}); remove it or add it to {setting('sensitive_attributes')}"
            )
        wrong = [a for a, v in self.ell_per_attribute.items() if not 2 <= int(v) <= 1000]
        if wrong:
            raise ValueError(
                f"{setting('ell_per_attribute')}: the ℓ of {wrong} must be an integer in [2, 1000] (a sensitive "
                "attribute with ℓ_i < 2 is not protected)"
            )

    def input_is_adult(self) -> bool:
        """Whether the input is the shipped UCI Adult file (``data/adult/adult.data``, the default input), whose
        defaults (no header row, Adult's column names, Adult's hierarchies) apply; any other file, Adult-derived
        copies included, is a new table."""
        return is_adult_input(self.input_path)

    def effective_csv_header(self) -> bool:
        """``csv_header`` as set; unset: False for Adult's adult.data and for Parquet, else detected
        (:func:`pipeline.io.loading.detect_csv_header`, with the configured columns). A file that cannot be read
        counts as having a header: the reader then names the problem."""
        if self.csv_header is not None:
            return bool(self.csv_header)
        if self.input_is_adult() or self.column_names:
            return False
        from pipeline.io.loading import InputError, detect_csv_header, resolve_input_path

        try:
            path = resolve_input_path(self.input_path)
            if (self.input_format if self.input_format != "auto" else _format_of(path)) != "csv":
                return False
            return detect_csv_header(path, self.delimiter, expected_columns=[*self.quasi_identifiers, *self.sensitive_attributes])
        except InputError:
            return True

    def effective_column_names(self) -> list[str]:
        """``column_names`` as set; empty: Adult's 15 names for Adult's adult.data read without header, else []
        (the header row's names)."""
        if self.column_names:
            return list(self.column_names)
        if self.input_is_adult() and not self.effective_csv_header():
            return list(ADULT_COLUMNS)
        return []

    def reading_options(self) -> dict[str, Any]:
        """The keyword arguments of :func:`pipeline.io.loading.load_records` that these settings configure (how the
        input is read and cleaned: format, header, names, delimiter, missing-value tokens, maximum value length),
        so that every reader of the input (the ingest asset, the preflight, ``synthesize``, ``kl-quality``) reads it
        the same way."""
        return {
            "quasi_identifiers": self.quasi_identifiers,
            "sensitive_attributes": self.sensitive_attributes,
            "input_format": self.input_format,
            "csv_header": self.effective_csv_header(),
            "column_names": self.effective_column_names(),
            "delimiter": self.delimiter,
            "strip_whitespace": self.strip_whitespace,
            "missing_value_tokens": self.missing_value_tokens,
            "max_value_length": self.max_value_length,
        }

    def effective_generalization_weights(self) -> dict[str, float]:
        """Weight ``c_i`` of every quasi-identifier, in quasi-identifier order (1 when not configured)."""
        return {name: float(self.generalization_weights.get(name, 1.0)) for name in self.quasi_identifiers}

    _started_profiler: bool = PrivateAttr(default=False)

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """With ``profile``: start the memory sampler of this process (once per run with the
        in-process executor) unless one already runs (``msa-release run --profile`` starts it)."""
        if self.profile:
            from pipeline.evaluation.profiling import ensure_sampler

            _, self._started_profiler = ensure_sampler()

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        """Stop the memory sampler if :meth:`setup_for_execution` started it."""
        if self._started_profiler:
            from pipeline.evaluation.profiling import current_sampler

            sampler = current_sampler()
            if sampler is not None:
                sampler.stop()
            self._started_profiler = False

    def series_configuration(self) -> dict:
        """What the release registry compares (``pipeline.core.series.CONFIGURATION_KEYS``): the settings that
        change what a release says about a record, ``None`` where the model does not use them; never the seed
        (the model's plug-in says which, :meth:`pipeline.models.base.PublicationModel.series_configuration`)."""
        from pipeline.models import publication_model

        model = publication_model(self.model)
        return model.series_configuration(model.parameters(self))

    def effective_min_support(self) -> int:
        """``min_support`` in records: as set, or max(ℓ, 5) when it is 0 (the default)."""
        return int(self.min_support) if self.min_support else default_min_support(self.ell)

    def hierarchies_path(self) -> Path | None:
        """``hierarchies_dir`` resolved like ``input_path``: as given (absolute, or existing relative to
        the working directory), else relative to the project root. Not checked for existence. Empty (the default):
        Adult's shipped hierarchies when the input is Adult's adult.data, else None (no hierarchies: Adult's are
        never applied to another table because a column name happens to match)."""
        if not self.hierarchies_dir.strip():
            return ADULT_HIERARCHIES if self.input_is_adult() else None
        candidate = Path(self.hierarchies_dir).expanduser()
        if candidate.is_absolute() or candidate.exists():
            return candidate.resolve()
        return (PROJECT_ROOT / candidate).resolve()


#: The Adult example's explicit utility override, per model (issue 15). The default Adult release deletes about 6,100
#: of its 30,718 eligible records (19.8 %; Rating: 13.6 %), above the utility gate's default of 10 %. In the run config
#: schema of the jobs of these models the setting's default is null ("not set"); a run of the Adult example (its
#: ``input_path`` left at Adult's) that leaves it null gets this value, which the manifest, the CLI summary and
#: report.html then show as an override; any other input gets the settings' default (0.10).
ADULT_EXAMPLE_SETTINGS: dict[str, dict[str, float]] = {
    "mixed": {"max_deleted_share": 0.25},
    "rating": {"max_deleted_share": 0.25},
}
#: Settings whose null in a run config means "not set" (:func:`adult_example_settings`).
NULL_MEANS_DEFAULT = frozenset(key for values in ADULT_EXAMPLE_SETTINGS.values() for key in values)
#: The input of the Adult example (``ReleaseSettings.input_path``'s default).
ADULT_EXAMPLE_INPUT = ReleaseSettings.model_fields["input_path"].default


def adult_example_settings(model: str, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The values that the settings of :data:`ADULT_EXAMPLE_SETTINGS` left null (not set) take in a run of ``model``
    with ``settings`` (the run config's settings, Dagster's defaults filled in): the Adult example's value when the
    input is the Adult example, else the settings' own default. A setting the run sets is never changed.

    Returns
    -------
    dict
        Setting -> value, for every setting of ``model``'s Adult example that ``settings`` holds as null or lacks.
    """
    example = settings.get("input_path", ADULT_EXAMPLE_INPUT) == ADULT_EXAMPLE_INPUT
    return {
        key: value if example else ReleaseSettings.model_fields[key].default
        for key, value in ADULT_EXAMPLE_SETTINGS.get(model, {}).items()
        if settings.get(key) is None
    }


class ReleaseStore(dg.ConfigurableResource):
    """Where releases are published: ``<home>/releases/<release_id>/`` and ``<home>/releases/LATEST`` (shared),
    ``<home>/comparisons/<release_id>/`` (comparisons, :mod:`pipeline.release.promotion`)."""

    home: str = Field(description="Absolute path of $MSA_RELEASE_HOME.")

    def setup_for_execution(self, context: dg.InitResourceContext) -> None:
        """Refuse a run whose config moves the warehouse (and its release lock) out of this home
        (:func:`pipeline.warehouse.check_one_home`; the warehouse refuses a moved store the same way), and a home
        whose path the release's file reader would take as a pattern (:func:`pipeline.home.check_home_path`)."""
        from pipeline.home import check_home_path
        from pipeline.warehouse import check_one_home, run_config_override

        check_home_path(self.home)
        database = run_config_override(context, "io_manager", "database")
        if database is not None:
            check_one_home(self.home, database)

    @property
    def releases_dir(self) -> Path:
        return Path(self.home) / "releases"

    @property
    def comparisons_dir(self) -> Path:
        """``<home>/comparisons``: releases published with ``promote`` off (never named by ``LATEST``)."""
        return Path(self.home) / "comparisons"

    def home_secret(self) -> bytes:
        """This home's secret (``<home>/secret.key``, :mod:`pipeline.release.home_secret`), created 0600 on
        first use; the source of every keyed random choice of a release, never published.

        Raises
        ------
        pipeline.release.home_secret.HomeSecretError
            The key file exists but is unreadable, has the wrong size or is readable by others.
        """
        from pipeline.release.home_secret import load_or_create_secret

        return load_or_create_secret(Path(self.home))


class ExperimentSettings(dg.ConfigurableResource):
    """Points of the P1 §6 experiments (``evaluation`` assets); defaults: SPEC §12 on all of Adult.

    The data, quasi-identifiers, sensitive attributes (in schema order; m = the first m) come
    from :class:`ReleaseSettings`, so users run the same comparison on their own table.
    """

    output_dir: str = Field(
        default="",
        description="Where figures, results.json and REPORT.md go (relative: project root; empty: "
        "$MSA_RELEASE_HOME/experiments, never the committed reports/ unless named).",
    )
    ell_values: list[int] = Field(default=[2, 3, 4, 5, 6], description="ℓ sweep (Figures 3, 6, 7).")
    min_confidence_values: list[float] = Field(
        default=[0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95], description="min_confidence sweep (Figures 4, 8)."
    )
    record_counts: list[int] = Field(
        default=[2000, 5000, 10000, 15000, 20000, 25000, 0], description="Random-subset sizes of Figure 1 (0 = all)."
    )
    attribute_set_sizes: list[int] = Field(default=[2, 3, 4], description="m values (Figures 2, 5, 9).")
    default_ell: int = Field(default=3, ge=2, description="ℓ while another parameter varies.")
    default_min_confidence: float = Field(
        default=0.8, gt=0.0, le=1.0, description="min_confidence while another parameter varies."
    )
    histogram_ells: list[int] = Field(default=[3, 2], description="ℓ of Figures 10 and 11.")
    timing_repeats: int = Field(default=5, ge=1, le=100, description="Timed runs per point of Figures 1-2 (median reported).")
    seed: int = Field(default=0, ge=0, description="Seed of the random subsets and of the SAC~ permutation.")
    dataset_description: str = Field(default="UCI Adult (adult.data, CC BY 4.0)", description="Named in REPORT.md.")

    def plan(self):
        """The :class:`pipeline.evaluation.experiments.ExperimentPlan` of these settings (validated)."""
        from pipeline.evaluation.experiments import ExperimentPlan

        return ExperimentPlan(
            ell_values=tuple(self.ell_values),
            min_confidence_values=tuple(self.min_confidence_values),
            record_counts=tuple(self.record_counts),
            attribute_set_sizes=tuple(self.attribute_set_sizes),
            default_ell=self.default_ell,
            default_min_confidence=self.default_min_confidence,
            histogram_ells=tuple(self.histogram_ells),
            timing_repeats=self.timing_repeats,
            seed=self.seed,
        )

    def output_path(self) -> Path:
        """``output_dir`` resolved: empty -> ``$MSA_RELEASE_HOME/experiments``; relative -> under the project root."""
        if not self.output_dir:
            return release_home() / "experiments"
        path = Path(self.output_dir)
        if not path.is_absolute():
            path = Path(__file__).resolve().parents[1] / path
        return path
