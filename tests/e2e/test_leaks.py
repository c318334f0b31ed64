"""Issue 6, "Nothing raw leaks": a release directory holds exactly the contract and nothing that
identifies a source record; the Dagster event log of a run (metadata, check evaluations, log
messages, step outputs, failures), as stored on disk, never holds a raw sensitive value.

The input is the first 2,000 Adult records, shuffled, with every sensitive value replaced by a
distinctive token (``QQSA<attribute>V<number>QQ``) and a source identifier column
(``QQID<number>QQ``) that is not configured, so a leak is a plain substring search.
"""

import json
import re
from pathlib import Path

import dagster as dg
import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest

from pipeline.models import PUBLICATION_MODELS
from pipeline.release.publish import MODEL_TABLES, contract_schemas, list_releases, read_latest
from pipeline.resources import ADULT_COLUMNS
from tests.jobs import ACCEPT_ANY_LOSS, run_job

ROOT = Path(__file__).resolve().parents[2]
QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]
SENSITIVE_ATTRIBUTES = ["education", "occupation", "age", "relationship"]
#: The gate on rule confidences is not the subject here: on this shuffled sample some rules lose
#: their holders to deleted records (deviation up to 1.0), so it is relaxed to let the run publish.
PUBLISH_TOLERANCE = 1.0
SENSITIVE_TOKEN = re.compile(r"QQSA\dV\d{4}QQ")
IDENTIFIER_TOKEN = "QQID"
#: A whole token (``QQID<number>QQ``): the bare prefix can occur by chance inside an inline PNG's base64.
IDENTIFIER_PATTERN = rb"QQID[0-9]+QQ"


def tokenized_adult(path: Path, n_rows: int = 2000) -> pd.DataFrame:
    """Adult's first ``n_rows`` records, shuffled (seed 6), sensitive values tokenized, plus ``record_id``."""
    frame = pd.read_csv(
        ROOT / "data/adult/adult.data", header=None, names=ADULT_COLUMNS, skipinitialspace=True, nrows=n_rows, dtype=str
    )
    for index, attribute in enumerate(SENSITIVE_ATTRIBUTES):
        values = sorted(v for v in frame[attribute].unique() if v != "?")
        codes = {v: f"QQSA{index}V{number:04d}QQ" for number, v in enumerate(values)}
        frame[attribute] = frame[attribute].map(lambda v: codes.get(v, v))
    frame.insert(0, "record_id", [f"{IDENTIFIER_TOKEN}{n:06d}QQ" for n in range(len(frame))])
    frame = frame.sample(frac=1.0, random_state=6).reset_index(drop=True)
    frame.to_csv(path, index=False)
    return frame


def settings(input_path: Path, **overrides) -> dict:
    common = {
        "input_path": str(input_path),
        "csv_header": True,
        "column_names": [],
        "quasi_identifiers": QUASI_IDENTIFIERS,
        "sensitive_attributes": SENSITIVE_ATTRIBUTES,
        "hierarchies_dir": "data/adult/hierarchies",  # a copy of Adult is another file: named, never implied (issue 15)
        **ACCEPT_ANY_LOSS,  # the sample deletes more than the utility gate's 10 %; these tests are about leaks
    }
    if overrides.get("model") != "kl":  # the (k, ℓ) job has no posterior gate and takes no posterior_gate setting
        # the 2,000-record Adult sample fails the posterior gate (P1 grouping; docs/posterior.md): warn, so the
        # release is published and its files and event log (the gate's figures included) are checked here
        common["posterior_gate"] = "warn"
    return {**common, **overrides}


@pytest.fixture(scope="module")
def tokenized(tmp_path_factory):
    directory = tmp_path_factory.mktemp("leaks")
    frame = tokenized_adult(directory / "tokenized.csv")
    return directory, frame


# ---------------------------------------------------------------------------------------------
# (a) the release directory holds the contract and nothing else


PART_TABLES = ("sac_released", "attribute_table", "id_table")


def _sharded_release_tables(release_dir: Path, schemas: dict) -> dict[str, pd.DataFrame]:
    """A sharded release's files (manifest.json, the report, one Parquet file of attribute_clusters and
    release_manifest, and a directory of part files ``part-<s:05d>.parquet`` per table of ``PART_TABLES``; nothing
    else, no release.duckdb), each table's columns and DuckDB types exactly the contract's; its tables, parts in name
    order."""
    parts = [t for t in PART_TABLES if t in schemas]
    assert sorted(p.name for p in release_dir.iterdir()) == sorted(
        ["manifest.json", "report.html", "report.json", *parts, *(f"{t}.parquet" for t in schemas if t not in parts)]
    )
    tables = {}
    for table, columns in schemas.items():
        if table in parts:
            files = sorted((release_dir / table).iterdir())
            assert files and all(re.fullmatch(r"part-\d{5}\.parquet", f.name) and f.is_file() for f in files), table
        else:
            files = [release_dir / f"{table}.parquet"]
        for path in files:
            parquet = pq.read_table(path)
            assert parquet.column_names == list(columns), path
            assert not any(b"pandas" in key for key in (parquet.schema.metadata or {})), path
        pattern = str(release_dir / table / "part-*.parquet") if table in parts else str(files[0])
        described = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{pattern}')").fetchall()
        assert [(row[0], row[1]) for row in described] == list(columns.items()), table
        tables[table] = duckdb.sql(f"SELECT * FROM read_parquet('{pattern}')").df()
    return tables


def _assert_release_holds_only_the_contract(release_dir: Path, frame: pd.DataFrame) -> None:
    manifest = json.loads((release_dir / "manifest.json").read_text())
    model = manifest["model"]
    schemas = contract_schemas(QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, model=model)
    assert set(schemas) == {*MODEL_TABLES[model], "release_manifest"}
    if (release_dir / "release.duckdb").exists():  # the in-memory jobs
        # files: release.duckdb, manifest.json, one Parquet file per contract table, the report page
        # and its figures (report.html, report.json); no directory, no WAL
        assert sorted(p.name for p in release_dir.iterdir()) == sorted(
            ["release.duckdb", "manifest.json", "report.html", "report.json", *(f"{t}.parquet" for t in schemas)]
        )
        assert all(p.is_file() for p in release_dir.iterdir())
        assert set(manifest) == set(schemas["release_manifest"])

        connection = duckdb.connect(str(release_dir / "release.duckdb"), read_only=True)
        try:
            objects = connection.execute("SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT internal").fetchall()
            assert sorted(objects) == sorted(("main", t) for t in schemas)
            assert connection.execute("SELECT count(*) FROM duckdb_views() WHERE NOT internal").fetchone()[0] == 0
            assert connection.execute("SELECT count(*) FROM duckdb_sequences()").fetchone()[0] == 0
            assert connection.execute("SELECT count(*) FROM duckdb_indexes()").fetchone()[0] == 0
            assert connection.execute("SELECT count(*) FROM duckdb_functions() WHERE NOT internal").fetchone()[0] == 0
            tables = {}
            for table, columns in schemas.items():
                described = connection.execute(
                    "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = ? ORDER BY ordinal_position",
                    [table],
                ).fetchall()
                assert described == list(columns.items()), table
                tables[table] = connection.execute(f'SELECT * FROM "{table}"').df()
        finally:
            connection.close()

        for table, columns in schemas.items():
            parquet = pq.read_table(release_dir / f"{table}.parquet")
            assert parquet.column_names == list(columns), table
            assert parquet.num_rows == len(tables[table]), table
            assert not any(b"pandas" in key for key in (parquet.schema.metadata or {})), table

    else:  # a sharded release (the mixed model's default engine, issue 17): part files, no release.duckdb
        tables = _sharded_release_tables(release_dir, schemas)
        assert set(manifest) == set(schemas["release_manifest"])

    # no source identifier anywhere: not as a column, not as a value, not in any file's bytes
    for path in release_dir.rglob("*"):
        if path.is_file():
            assert not re.search(IDENTIFIER_PATTERN, path.read_bytes()), path.name
    source_columns = set(frame.columns) - set(QUASI_IDENTIFIERS) - set(SENSITIVE_ATTRIBUTES)
    for table, content in tables.items():
        assert not source_columns & set(content.columns), table
        for column in content.columns:
            text = content[column].astype(str)
            assert not text.str.contains(IDENTIFIER_TOKEN).any(), (table, column)
        if table == "release_manifest":
            continue
        for column in content.columns:  # an identifier-like column: one distinct text value per row
            if column not in ("row_id",) and content[column].dtype == object and len(content) > 10:
                assert content[column].nunique() < len(content), (table, column)

    # row_id: 1..n over the released rows, in the documented content order, not the input order
    row_tables = [t for t in ("sac_released", "attribute_table", "kl_released") if t in tables]
    row_ids = np.concatenate([tables[t]["row_id"].to_numpy() for t in row_tables])
    assert sorted(row_ids) == list(range(1, len(row_ids) + 1))
    # SAC~ rows: by group id, then by content inside a group; (k, ℓ) rows by class then content
    order_keys = {
        "sac_released": ["group_id", *QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES],
        "kl_released": ["cluster_id", *SENSITIVE_ATTRIBUTES],
    }
    for table in [t for t in row_tables if t in order_keys]:
        by_row_id = tables[table].sort_values("row_id").reset_index(drop=True)
        by_content = by_row_id.sort_values(order_keys[table], kind="stable", na_position="first").reset_index(drop=True)
        pd.testing.assert_frame_equal(by_row_id, by_content, obj=f"{table} ordered by row_id")
    # attribute-table rows (and SAC~ groups) follow a keyed hash of their content: neither the input
    # order nor a sort by quasi-identifiers (the order gate measures the correlation with the input)
    if "attribute_table" in tables and len(tables["attribute_table"]) > 10:
        by_row_id = tables["attribute_table"].sort_values("row_id").reset_index(drop=True)
        by_content = by_row_id.sort_values([*QUASI_IDENTIFIERS], kind="stable").reset_index(drop=True)
        assert not by_row_id.equals(by_content)
    # the input is shuffled, so a content order cannot reproduce it
    input_order = frame[QUASI_IDENTIFIERS].astype(str).agg("|".join, axis=1)
    assert not input_order.is_monotonic_increasing


def _assert_no_input_path(release_dir: Path, input_path: Path) -> None:
    """Issue 14: the manifest and the report publish the input's file name only, never its directory (which may
    name a person, a ward or a project); the audit gets the raw table from ``--raw``."""
    manifest = json.loads((release_dir / "manifest.json").read_text())
    assert manifest["input_reading"]["input_file"] == input_path.name
    for path in (path for path in release_dir.rglob("*") if path.is_file()):  # part files too (a sharded release)
        content = path.read_bytes()
        assert str(input_path.parent).encode() not in content, path.name
        assert str(input_path.parent).encode("unicode_escape") not in content, path.name
    assert input_path.name.encode() in (release_dir / "report.html").read_bytes()


def test_mixed_release_directory_holds_only_the_contract(tokenized, tmp_path):
    directory, frame = tokenized
    home = tmp_path / "home"
    with dg.DagsterInstance.ephemeral() as instance:
        result = run_job(
            home, "release", settings(directory / "tokenized.csv", confidence_tolerance=PUBLISH_TOLERANCE), instance=instance
        )
    assert result.success
    _assert_release_holds_only_the_contract(read_latest(home / "releases"), frame)
    _assert_no_input_path(read_latest(home / "releases"), directory / "tokenized.csv")


def test_default_mixed_release_directory_holds_only_the_contract(tokenized, tmp_path):
    """Issue 17: the mixed model's default job, ``sharded_release`` on engine local (one shard here), publishes the
    contract as part files and nothing else."""
    directory, frame = tokenized
    home = tmp_path / "home"
    with dg.DagsterInstance.ephemeral() as instance:
        result = run_job(
            home,
            "sharded_release",
            settings(directory / "tokenized.csv", confidence_tolerance=PUBLISH_TOLERANCE),
            instance=instance,
        )
    assert result.success
    release_dir = read_latest(home / "releases")
    assert json.loads((release_dir / "manifest.json").read_text())["sharding"]["engine"] == "local"
    _assert_release_holds_only_the_contract(release_dir, frame)
    _assert_no_input_path(release_dir, directory / "tokenized.csv")


def test_kl_release_directory_holds_only_the_contract(tokenized, tmp_path):
    directory, frame = tokenized
    home = tmp_path / "home"
    with dg.DagsterInstance.ephemeral() as instance:
        result = run_job(home, "kl_release", settings(directory / "tokenized.csv", model="kl"), instance=instance)
    assert result.success
    _assert_release_holds_only_the_contract(read_latest(home / "releases"), frame)
    _assert_no_input_path(read_latest(home / "releases"), directory / "tokenized.csv")


def test_the_contract_check_catches_an_extra_table(tokenized, tmp_path):
    """The check above can fail: a release with one extra column in one table is refused."""
    directory, frame = tokenized
    home = tmp_path / "home"
    with dg.DagsterInstance.ephemeral() as instance:
        assert run_job(
            home, "release", settings(directory / "tokenized.csv", confidence_tolerance=PUBLISH_TOLERANCE), instance=instance
        ).success
    release_dir = read_latest(home / "releases")
    connection = duckdb.connect(str(release_dir / "release.duckdb"))
    try:
        connection.execute("CREATE TABLE input_rows AS SELECT 1 AS source_row")
    finally:
        connection.close()
    with pytest.raises(AssertionError):
        _assert_release_holds_only_the_contract(release_dir, frame)


# ---------------------------------------------------------------------------------------------
# (b) no raw sensitive value in the event log of a run


#: Steps that publish a release (one per model, from the registry: ``publish_release``, ``publish_rating_release``,
#: ``publish_kl_release``): their metadata may preview the PUBLISHED tables (issue 7), whose values are public by then;
#: every other step (the private assets, the gates) must show none.
PUBLISH_STEPS = {model.publish_step for model in PUBLICATION_MODELS.values()}


def _preview_tokens(entries) -> set[str]:
    """Tokens shown in the ``preview_*`` metadata of the publish steps (first rows of released tables)."""
    tokens: set[str] = set()
    for entry in entries:
        if entry.step_key not in PUBLISH_STEPS or entry.dagster_event is None:
            continue
        metadata = {}
        if entry.dagster_event.is_step_materialization:
            metadata = entry.dagster_event.step_materialization_data.materialization.metadata
        for key, value in metadata.items():
            if key.startswith("preview_"):
                tokens.update(SENSITIVE_TOKEN.findall(str(getattr(value, "value", value))))
    return tokens


def _leaks_in_event_log(instance: dg.DagsterInstance, run_id: str) -> tuple[list[str], set[str]]:
    """Sensitive or identifier tokens in the run's event log, except published previews; and the
    set of previewed tokens (allowed)."""
    from dagster._serdes import serialize_value

    entries = instance.all_logs(run_id)
    allowed = _preview_tokens(entries)
    found = []
    for entry in entries:
        text = serialize_value(entry)
        for match in SENSITIVE_TOKEN.findall(text) + re.findall(IDENTIFIER_TOKEN + r"\d+QQ", text):
            if entry.step_key in PUBLISH_STEPS and match in allowed:
                continue
            kind = entry.dagster_event.event_type_value if entry.dagster_event else "log message"
            found.append(f"{kind} of step {entry.step_key}: {match}")
    return found, allowed


def _leaks_on_disk(directory: Path, allowed: set[str] = frozenset()) -> list[str]:
    found = []
    for path in directory.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            tokens = {t.decode() for t in re.findall(rb"QQSA\dV\d{4}QQ", data)} - set(allowed)
            if tokens or re.search(IDENTIFIER_PATTERN, data):
                found.append(str(path.relative_to(directory)))
    return found


@pytest.mark.parametrize(
    ("job", "overrides", "should_publish"),
    [
        ("release", {"confidence_tolerance": PUBLISH_TOLERANCE}, True),
        # the default job of the mixed model (issue 17): engine local, its staging, shard workers and S-row summary
        ("sharded_release", {"confidence_tolerance": PUBLISH_TOLERANCE}, True),
        # gate no_certain_attribute_table_cell fails (suppressed cells name their value): failure paths are walked too
        ("release", {"residual_policy": "suppress"}, False),
        # gate 4 refuses for data loss (issue 15): its diagnosis in the check's description and metadata and the
        # step's failure name rules by their attributes only (the values are in the private home's refusal.html)
        ("release", {"ell": 5}, False),
        ("rating_release", {"model": "rating", "allow_disclosure": True, "confidence_tolerance": PUBLISH_TOLERANCE}, True),
        ("kl_release", {"model": "kl"}, True),
    ],
    ids=["mixed", "mixed-default-engine", "mixed-gate-fails", "mixed-refused-for-loss", "rating", "kl"],
)
def test_event_log_of_a_run_holds_no_raw_sensitive_value(tokenized, tmp_path, job, overrides, should_publish):
    directory, _ = tokenized
    home = tmp_path / "home"
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        result = run_job(home, job, settings(directory / "tokenized.csv", **overrides), instance=instance)
        assert result.success is should_publish
        # Rating with allow_disclosure is published as a comparison (issue 15): comparisons/, never LATEST
        published = (
            list_releases(home / "comparisons") if overrides.get("model") == "rating" else [read_latest(home / "releases")]
        )
        assert (bool(published) and published[-1] is not None) is should_publish
        entries = instance.all_logs(result.run_id)
        kinds = {e.dagster_event.event_type_value for e in entries if e.dagster_event}
        assert {"ASSET_MATERIALIZATION", "ASSET_CHECK_EVALUATION", "STEP_OUTPUT"} <= kinds
        assert any(e.dagster_event is None for e in entries) or not should_publish  # user log messages walked
        leaks, previewed = _leaks_in_event_log(instance, result.run_id)
    assert leaks == [], leaks[:10]
    if overrides == {"ell": 5}:
        gate = {e.check_name: e for e in result.get_asset_check_evaluations()}["rule_confidence_preserved"]
        assert not gate.passed and (gate.description or "").startswith("Release refused")
        (page,) = (home / "refusals").glob("*/refusal.html")
        assert SENSITIVE_TOKEN.search(page.read_text())  # the walk above would have found the rules' values
    # previews appear only once something was published, and only values of the released tables
    # (the sharded job previews no table at all: nothing record-level reaches Dagster, only S-row summaries)
    assert (len(previewed) > 0) is (should_publish and job != "sharded_release")
    assert _leaks_on_disk(dagster_home, previewed) == []  # the stored event log, run storage and compute logs


def test_the_event_log_walk_finds_a_planted_value(tokenized, tmp_path):
    """The walk can fail: an asset that logs a sensitive value is caught."""
    directory, frame = tokenized

    @dg.asset(key=["private", "leaky"], deps=[dg.AssetKey(["private", "raw_records"])], group_name="ingest")
    def leaky(context: dg.AssetExecutionContext) -> None:
        context.log.info(f"first education value: {frame['education'].iloc[0]}")

    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize([leaky], instance=instance, raise_on_error=False)
        assert result.success
        leaks, _ = _leaks_in_event_log(instance, result.run_id)
    assert leaks and "log message" in leaks[0]


# ---------------------------------------------------------------------------------------------
# (c) a failed run: the messages, logs and stored events of a refused input hold no value of it (issue 14)


def test_headerless_input_read_with_a_header_leaks_no_record(tokenized, tmp_path, monkeypatch):
    """The tokenized Adult sample written WITHOUT a header row, read with one: its first record would be the column
    names. The CLI refuses it (exit 2) and the job's ingest step fails with exit status 2; neither the message nor
    anything stored in DAGSTER_HOME holds a value of that record, and the message suggests --no-header (the CLI) or
    `csv_header: false` (the job)."""
    from click.testing import CliRunner

    from pipeline.cli import main
    from pipeline.failures import step_failures

    _, frame = tokenized
    headerless = tmp_path / "headerless.csv"
    frame.to_csv(headerless, index=False, header=False)
    first_record = [str(v) for v in frame.iloc[0]]
    assert re.search(IDENTIFIER_PATTERN, first_record[0].encode()) and SENSITIVE_TOKEN.search(",".join(first_record))

    def assert_no_value_of_the_record(text: str) -> None:
        assert not SENSITIVE_TOKEN.search(text) and IDENTIFIER_TOKEN not in text, text
        for value in first_record:  # every cell, quoted as Python would list it
            assert repr(value) not in text, (value, text)

    # the CLI: checked before Dagster starts
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    outcome = CliRunner().invoke(
        main,
        [
            "run",
            "--input",
            str(headerless),
            "--quasi-identifiers",
            ",".join(QUASI_IDENTIFIERS),
            "--sensitive-attributes",
            ",".join(SENSITIVE_ATTRIBUTES),
            "--home",
            str(tmp_path / "cli-home"),
        ],
    )
    assert outcome.exit_code == 2, outcome.output
    # (its first record repeats a value, e.g. capital-gain and capital-loss 0: the duplicate check speaks first)
    assert "the header row" in outcome.output and "--no-header --column-names" in outcome.output
    assert_no_value_of_the_record(outcome.output)

    # the job (as the inbox sensor or the UI launch it): the failure and every stored event
    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        result = run_job(tmp_path / "home", "release", settings(headerless), instance=instance)
        assert not result.success
        failures = step_failures(result)
        assert [f.exit_status for f in failures] == [2], failures
        assert "`csv_header: false`" in failures[0].message  # the job speaks run-config keys (issue 15)
        assert_no_value_of_the_record(failures[0].message)
        assert_no_value_of_the_record(failures[0].error_text)
        leaks, previewed = _leaks_in_event_log(instance, result.run_id)
    assert leaks == [] and previewed == set(), leaks[:10]
    assert _leaks_on_disk(dagster_home) == []


def _assert_refused_without_a_value(tmp_path: Path, job: str, broken: Path, named: str) -> None:
    """Run ``job`` on ``broken``: one step fails with exit status 2, its message holds ``named``, and neither the
    failure nor the run's event log nor anything under its DAGSTER_HOME holds a sensitive value or an identifier."""
    from pipeline.failures import step_failures

    dagster_home = tmp_path / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        result = run_job(tmp_path / "home", job, settings(broken), instance=instance)
        assert not result.success
        failures = step_failures(result)
        assert [f.exit_status for f in failures] == [2], failures
        assert named in failures[0].message
        for text in (failures[0].message, failures[0].error_text):
            assert not SENSITIVE_TOKEN.search(text) and IDENTIFIER_TOKEN not in text, text
        leaks, previewed = _leaks_in_event_log(instance, result.run_id)
    assert leaks == [] and previewed == set(), leaks[:10]
    assert _leaks_on_disk(dagster_home) == []


@pytest.mark.parametrize("job", ["release", "sharded_release", "plan"])
def test_a_line_the_csv_reader_cannot_parse_leaves_no_value_in_the_event_log(tokenized, tmp_path, job):
    """A record with an unclosed quote (a red team's case): DuckDB's error quotes the offending line and the lines after
    it ("Original Line: …"). The step fails with exit status 2 naming the file and the line, and neither its failure
    nor anything stored in DAGSTER_HOME holds a value: before, the default job's failure kept DuckDB's error as its
    cause, which Dagster stores with the run (135 whole records of the red team's file)."""
    directory, _ = tokenized
    lines = (directory / "tokenized.csv").read_text().splitlines()
    lines[10] += ',"QQSA0V9999QQ unclosed'
    broken = tmp_path / "broken.csv"
    broken.write_text("\n".join(lines) + "\n")
    _assert_refused_without_a_value(tmp_path, job, broken, "broken.csv")


@pytest.mark.parametrize("job", ["release", "plan"])
def test_a_row_the_csv_reader_meets_after_its_first_vector_leaves_no_value_in_the_event_log(tmp_path, job):
    """Red team, session 39: DuckDB parses the first 2,048 records when the query runs and the rest while the Arrow
    reader fetches them, where its error arrives as an ``OSError`` quoting the whole line; the in-memory job and the
    plan let it through, so the traceback printed the record and the run's failure events stored it. Now the same exit
    status 2 naming the file and line as a row in the first vector, and no value anywhere."""
    source = tmp_path / "tokenized.csv"
    tokenized_adult(source, n_rows=3000)
    lines = source.read_text().splitlines()
    lines[2900] += ",QQSA0V9998QQ"  # one field too many, on line 2,901 of the file (record 2,900)
    broken = tmp_path / "late.csv"
    broken.write_text("\n".join(lines) + "\n")
    _assert_refused_without_a_value(tmp_path, job, broken, "late.csv, line 2901: the row has more than 16 fields")
