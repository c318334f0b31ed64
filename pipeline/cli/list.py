"""msa-release list: one line per release of the home (id, model, input, ℓ, verdict, deleted %, suppressed %), read from
each release's manifest.json; LATEST and the comparison releases (``<home>/comparisons/``) are marked."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import click

from pipeline.cli.app import main
from pipeline.cli.common import latest_release

#: The columns of ``msa-release list``, in order.
COLUMNS = ("release", "model", "input", "ell", "verdict", "deleted %", "suppressed %", "")

#: What a field missing from an older manifest shows.
MISSING = "-"


def _percent(share: float | None) -> str:
    return MISSING if share is None else f"{100.0 * share:.1f}"


def deleted_share(manifest: Mapping[str, Any]) -> float | None:
    """The share of eligible records (read minus dropped for a missing sensitive value) that the release left out:
    the manifest's ``utility.deleted_share`` when it has one, else ``n_deleted`` (mixed, Rating) or
    ``n_suppressed_records`` ((k, ℓ)) over ``n_input - n_dropped_missing``; None when the manifest cannot say."""
    utility = manifest.get("utility")
    if isinstance(utility, Mapping) and utility.get("deleted_share") is not None:
        return float(utility["deleted_share"])
    left_out = manifest.get("n_deleted")
    if left_out is None:
        left_out = manifest.get("n_suppressed_records")
    n_input, n_dropped = manifest.get("n_input"), manifest.get("n_dropped_missing") or 0
    if left_out is None or not n_input or n_input - n_dropped <= 0:
        return None
    return float(left_out) / float(n_input - n_dropped)


def suppressed_text(manifest: Mapping[str, Any]) -> str:
    """The largest share of suppressed attribute-table cells over the sensitive attributes, with its attribute
    (``"49.0 (health)"``), from the manifest's ``utility.suppressed_share``; ``"0.0"`` for an older manifest that
    suppressed no cell; ``"-"`` when the manifest cannot say (an older one with suppressed cells, a (k, ℓ) release)."""
    utility = manifest.get("utility")
    shares = utility.get("suppressed_share") if isinstance(utility, Mapping) else None
    if isinstance(shares, Mapping) and shares:
        attribute, share = max(shares.items(), key=lambda item: (float(item[1]), item[0]))
        return f"{100.0 * float(share):.1f}" + (f" ({attribute})" if float(share) > 0 else "")
    if manifest.get("n_suppressed_cells") == 0:
        return "0.0"
    return MISSING


def verdict(manifest: Mapping[str, Any]) -> str:
    """``passed`` when every gate passed (or did not apply) and no protection was weakened; ``overridden`` when a
    gate failed and was overridden (``--allow-disclosure``, ``--posterior-gate warn``) or the manifest lists
    ``overrides``; ``-`` when the manifest has no gate results."""
    checks = manifest.get("checks")
    if not isinstance(checks, list):
        return MISSING
    overridden = any(isinstance(c, Mapping) and c.get("status") == "failed_overridden" for c in checks)
    overridden = overridden or bool(manifest.get("overrides")) or bool(manifest.get("disclosure_override_used"))
    overridden = overridden or bool(manifest.get("posterior_gate_warned"))
    return "overridden" if overridden else "passed"


def release_row(release: Path, manifest: Mapping[str, Any] | None, mark: str) -> tuple[str, ...]:
    """One line of the listing (``COLUMNS``) for ``release`` and its manifest (None: unreadable)."""
    if manifest is None:
        return (release.name, MISSING, MISSING, MISSING, "manifest.json unreadable", MISSING, MISSING, mark)
    reading = manifest.get("input_reading")
    input_file = reading.get("input_file") if isinstance(reading, Mapping) else None
    ell = manifest.get("ell")
    return (
        str(manifest.get("release_id") or release.name),
        str(manifest.get("model") or MISSING),
        str(input_file or MISSING),
        MISSING if ell is None else str(ell),
        verdict(manifest),
        _percent(deleted_share(manifest)),
        suppressed_text(manifest),
        mark,
    )


def _manifest(release: Path) -> Mapping[str, Any] | None:
    try:
        loaded = json.loads((release / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return loaded if isinstance(loaded, Mapping) else None


def listing_rows(home: Path, latest: Path | None) -> list[tuple[str, ...]]:
    """The lines of ``msa-release list`` for ``home``: its releases oldest first (``LATEST`` marked), then the
    comparison releases of ``<home>/comparisons/`` (marked ``comparison``) when that directory exists."""
    from pipeline.release.listing import list_releases

    rows = []
    for release in list_releases(home / "releases"):
        mark = "LATEST" if latest is not None and release.name == latest.name else ""
        rows.append(release_row(release, _manifest(release), mark))
    for release in list_releases(home / "comparisons"):
        rows.append(release_row(release, _manifest(release), "comparison"))
    return rows


def format_rows(rows: list[tuple[str, ...]]) -> str:
    """``rows`` under the ``COLUMNS`` header, each column left-aligned to its widest cell."""
    table = [COLUMNS, *rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    return "\n".join("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in table)


@main.command(name="list")
@click.option("--home", type=click.Path(file_okay=False), help="Release home (default $MSA_RELEASE_HOME or ./var).")
def list_command(home: str | None) -> None:
    """List the releases of the home, oldest first: id, model, input file, ℓ, verdict (passed, or overridden when a
    gate failed and was overridden), records deleted and the largest share of suppressed attribute-table cells (in
    %), LATEST marked; then the comparison releases (<home>/comparisons/), marked "comparison". Fields an older
    manifest does not have show "-"."""
    from pipeline.home import release_home as default_home

    release_home = Path(home).resolve() if home else default_home()  # read only: a missing home is not created
    rows = listing_rows(release_home, latest_release(release_home))
    if not rows:
        click.echo(f"no release in {release_home / 'releases'}")
        return
    click.echo(format_rows(rows))
