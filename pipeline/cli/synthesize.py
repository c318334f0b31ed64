"""msa-release synthesize: synthetic tables of whole source rows (the scale benchmark)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import FiniteFloatRange, UnusableInput, settings_from_options, validate_settings


@main.command()
@click.option("--rows", type=click.IntRange(min=1), required=True, help="Records to write (e.g. 1000000).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Random seed (same seed, same file).")
@click.option("--output", type=click.Path(dir_okay=False), required=True, help="Parquet file to write.")
@click.option(
    "--sampling",
    type=click.Choice(["balanced", "replacement"]),
    default="balanced",
    show_default=True,
    help="balanced: every source row floor(N/n) times plus a random subset once more (rules kept); "
    "replacement: N independent draws.",
)
@click.option(
    "--chunk-rows",
    type=click.IntRange(min=1),
    default=1_000_000,
    show_default=True,
    help="Rows drawn and written at a time, one Parquet row group each (memory: the source plus one chunk, whatever --rows).",
)
@click.option("--input", "input_path", type=click.Path(dir_okay=False), help="Source CSV or Parquet file (default: UCI Adult).")
@click.option("--input-format", type=click.Choice(["auto", "csv", "parquet"]), help="Default: by extension.")
@click.option("--header/--no-header", default=None, help="Whether the source CSV has a header row (default with --input: yes).")
@click.option("--column-names", help="All column names of the source in file order, comma-separated (CSV without header).")
@click.option("--delimiter", help="CSV field separator (default ',').")
@click.option("--quasi-identifiers", help="Comma-separated quasi-identifier columns to keep.")
@click.option("--sensitive-attributes", help="Comma-separated sensitive attribute columns to keep (at least 2).")
@click.option("--missing-tokens", help="Comma-separated values meaning 'missing' (default: '', NULL, ?).")
@click.option(
    "--max-value-length",
    type=click.IntRange(min=1),
    help="Longest accepted value of a kept column, in bytes of UTF-8 (default 4096); a longer value is refused (exit 2).",
)
@click.option(
    "--min-confidence",
    type=FiniteFloatRange(min=0.0, max=1.0, min_open=True),
    help="Threshold of the rule comparison source vs sample (default 0.8).",
)
def synthesize(**options) -> None:
    """Write a synthetic table of --rows whole rows of the source (default: UCI Adult's quasi-identifiers
    and sensitive attributes of the default configuration, after the missing-value policy) as Parquet.

    Prints whether the sample's strong rules equal the source's. Exit status 2 on unusable input.
    """
    from pipeline.evaluation.synthetic import synthesize as write_synthetic
    from pipeline.io.loading import InputError, file_sha256, load_records, resolve_input_path
    from pipeline.resources import ReleaseSettings

    started = time.monotonic()
    config = settings_from_options(options)
    validate_settings(config)
    settings = ReleaseSettings(**config)
    try:
        loaded = load_records(
            settings.input_path,
            **settings.reading_options(),
        )
        source_path = resolve_input_path(settings.input_path)
    except InputError as error:
        raise UnusableInput(str(error)) from error
    target = Path(options["output"]).expanduser()
    if target.exists() and target.resolve() == source_path:  # the same file by any name (resolve follows links)
        # red team, session 39: --output equal to --input replaced the source CSV with the Parquet sample
        raise UnusableInput(
            f"--output {options['output']} is the input file ({source_path}): writing the sample there would replace "
            "the source; pass another --output"
        )
    result = write_synthetic(
        loaded.records.drop(columns="row_id"),
        settings.sensitive_attributes,
        rows=options["rows"],
        seed=options["seed"],
        output=options["output"],
        sampling=options["sampling"],
        min_confidence=settings.min_confidence,
        chunk_rows=options["chunk_rows"],
        provenance={"source": source_path.name, "source_sha256": file_sha256(source_path)},
    )
    click.echo(
        f"Wrote {result.rows} records ({options['sampling']} sampling, seed {options['seed']}) of {result.source_rows} "
        f"source records to {result.path} in {time.monotonic() - started:.1f} s\n"
        f"  columns        {', '.join(result.columns)}\n"
        f"  strong rules   {result.sample_rules} in the sample, {result.source_rules} in the source "
        f"(min_confidence {settings.min_confidence}): {'equal' if result.rules_equal_source else 'DIFFERENT'}"
    )
