"""msa-release hierarchies: ARX-format generalization hierarchies for a table's quasi-identifiers, generated the way
ARX's hierarchy wizard does (:mod:`pipeline.core.hierarchy_builder`), so that ``msa-release run --model kl
--hierarchies DIR`` works on a table other than Adult."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import UnusableInput, _split


def _builders(value: str | None) -> dict[str, str]:
    """``"zip=mask,age=interval"`` -> ``{"zip": "mask", "age": "interval"}`` (``--builder``)."""
    from pipeline.core.hierarchy_builder import BUILDERS

    builders: dict[str, str] = {}
    for item in _split(value) or []:
        name, separator, builder = item.rpartition("=")
        if not separator or not name.strip() or builder.strip() not in BUILDERS:
            raise click.BadParameter(
                f"{item!r} is not column=builder with a builder among {list(BUILDERS)} (example: zip=mask,age=interval)",
                param_hint="--builder",
            )
        builders[name.strip()] = builder.strip()
    return builders


def hierarchy_text(rows) -> str:
    """The ARX file of ``rows``: no header, ``;``-separated (a cell holding ``;`` or a quote is quoted, which the
    reader's csv module undoes), LF line ends."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, delimiter=";", quotechar='"', lineterminator="\n")
    writer.writerows(rows)
    return buffer.getvalue()


@main.command("hierarchies")
@click.option("--input", "input_path", type=click.Path(dir_okay=False), help="CSV or Parquet file (default: UCI Adult).")
@click.option("--input-format", type=click.Choice(["auto", "csv", "parquet"]), help="Default: by extension.")
@click.option(
    "--header/--no-header",
    default=None,
    help="Whether the CSV has a header row (default: detected, as for a run configured in the UI; Adult: no).",
)
@click.option("--column-names", help="All column names in file order, comma-separated (CSV without header).")
@click.option("--delimiter", help="CSV field separator (default ',').")
@click.option("--quasi-identifiers", required=True, help="Comma-separated quasi-identifier columns: one hierarchy each.")
@click.option("--missing-tokens", help="Comma-separated values meaning 'missing' (default: '', NULL, ?); listed as '?'.")
@click.option("--max-value-length", type=click.IntRange(min=1), help="Longest accepted value, in bytes (default 4096).")
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    help="Folder to write <column>.csv into (default: ./<input name>-hierarchies); created if missing.",
)
@click.option(
    "--builder",
    help="column=interval|mask|group for columns whose builder is not the suggested one (numbers: interval; codes of "
    "one length with a leading 0: mask; other text: group).",
)
@click.option("--group-size", type=click.IntRange(min=2), default=3, show_default=True, help="Values per group (group).")
@click.option("--overwrite", is_flag=True, help="Replace hierarchy files that already exist in the folder.")
def hierarchies(**options) -> None:
    """Write one ARX hierarchy per quasi-identifier (`<column>.csv`: no header, `;`-separated, a base value then
    its generalizations up to `*`), read from the table with the same options as `msa-release run`.

    Numbers get nested intervals whose width doubles level by level ([20-25[, [20-30[, ..., *); codes of one length
    (ZIP) are masked from the right (0213*, 021**, ..., *); other text is grouped alphabetically (a..c, ..., *); a
    missing value is listed as '?'. Check the files (they are a starting point, as in ARX's wizard) before
    `msa-release run --model kl --hierarchies DIR`. Exit status 2 lists every problem at once.
    """
    from pipeline.core.hierarchies import Hierarchy, HierarchyError
    from pipeline.core.hierarchy_builder import HierarchyGenerationError, build_hierarchies
    from pipeline.io.loading import InputError, load_records
    from pipeline.resources import ReleaseSettings

    quasi_identifiers = _split(options["quasi_identifiers"]) or []
    if not quasi_identifiers:
        raise click.UsageError("name at least one column with --quasi-identifiers")
    given = {
        "input_path": options["input_path"],
        "input_format": options["input_format"],
        "csv_header": options["header"],
        "column_names": _split(options["column_names"]),
        "delimiter": options["delimiter"],
        "missing_value_tokens": options["missing_tokens"].split(",") if options["missing_tokens"] is not None else None,
        "max_value_length": options["max_value_length"],
    }
    try:
        # the run's reading rules (header detection, Adult's names for Adult's file); the sensitive attributes are
        # not read: every record counts, none is dropped
        settings = ReleaseSettings(**{k: v for k, v in given.items() if v is not None})
        reading = settings.model_copy(
            update={"quasi_identifiers": quasi_identifiers, "sensitive_attributes": []}
        ).reading_options()
    except ValueError as error:  # pydantic's ValidationError is a ValueError
        raise click.UsageError(str(error)) from error
    reading["sensitive_attributes"] = []
    input_path = options["input_path"] or ReleaseSettings().input_path
    try:
        loaded = load_records(input_path, **reading, for_model=False)
        built = build_hierarchies(
            {name: [str(v) for v in loaded.records[name].cat.categories] for name in quasi_identifiers},
            builders=_builders(options["builder"]),
            group_size=options["group_size"],
        )
    except (InputError, HierarchyGenerationError) as error:
        raise UnusableInput(str(error)) from error
    output = Path(options["output"] or f"{Path(input_path).name.split('.')[0]}-hierarchies")
    targets = {name: output / f"{name}.csv" for name in quasi_identifiers}
    problems = [
        f"{name!r}: its file name would not be {name}.csv"
        for name in quasi_identifiers
        if os.sep in name or name in ("", ".", "..")
    ]
    existing = [str(path) for path in targets.values() if path.exists()]
    if existing and not options["overwrite"]:
        problems.append(f"{len(existing)} file(s) exist already ({', '.join(existing)}); pass --overwrite or another --output")
    if problems:
        raise UnusableInput(f"no hierarchy written ({len(problems)} problem(s)): " + "; ".join(problems))
    try:
        output.mkdir(parents=True, exist_ok=True)
        for name, hierarchy in built.items():
            text = hierarchy_text(hierarchy.rows)
            check = Hierarchy.from_rows(list(hierarchy.rows), attribute=name, source=str(targets[name]))  # validates
            staged = targets[name].with_name(f".{targets[name].name}.tmp")
            staged.write_text(text, encoding="utf-8")
            staged.replace(targets[name])
            click.echo(f"{targets[name]}: {hierarchy.builder}, {len(check.base_values)} value(s), height {check.height}")
    except HierarchyError as error:
        raise UnusableInput(f"a generated hierarchy is invalid (please report it): {error}") from error
    except OSError as error:
        raise UnusableInput(f"cannot write the hierarchies into {output} ({error.strerror or error})") from error
    click.echo(f"hierarchies of {len(built)} quasi-identifier(s) in {output}: check them, then --hierarchies {output}")
