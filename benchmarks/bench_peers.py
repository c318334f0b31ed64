"""The ``peers`` section of ``make bench`` (issue 18): msa-release and anjana side by side on Adult, in one sitting.

``make bench`` runs it after the size section (``make bench SECTIONS=peers`` runs it alone;
``python benchmarks/bench_release.py --sections peers``). Every run is a fresh process, timed from outside:

* ``msa-release run`` on UCI Adult with the README's Adult settings (``make release``: ``--max-deleted-share 0.25``):
  the default mixed model ℓ = 3, ``--model rating`` ℓ = 3 (``--allow-disclosure``, as the README runs the Rating
  baseline: a comparison), ``--model kl`` k = 3 ℓ = 3 and k = 5 ℓ = 2, every gate,
  the publish and the audit included (the whole command a user waits for);
* anjana 1.2.3 (https://github.com/IFCA-Advanced-Computing/anjana) on the same 30,718 records (Adult after the
  default missing-value policy, the same quasi-identifiers and sensitive attributes, ARX's Adult hierarchies of
  ``data/adult/hierarchies``) at k = 3 ℓ = 3 and k = 5 ℓ = 2, at most :data:`ANJANA_SUPPRESSION_PERCENT` % of the
  records suppressed: anjana's ``l_diversity`` protects one sensitive attribute per call, so
  ``tests/release/anjana_adult.py`` (the script of the anjana audit test) calls it once per sensitive attribute,
  each call generalizing further from the previous call's output; the process reads the CSV, runs anjana and writes
  its table;
* the stack floor (``python -m benchmarks.stack_floor``): the libraries the release is built on (pandas and pyarrow,
  DuckDB, Dagster and its SQLite storage, Great Expectations as the gates import it, matplotlib's Agg figures),
  imported and nothing else. What the release takes above it is the project's work and Dagster's run bookkeeping;
  the targets' notes quote it.

anjana cannot be installed beside this project's pins (anjana 1.2.3 pins numpy 2.0.2 and pycanon 1.3.5, which pins
scipy 1.15.3, while mlxtend 0.25.0 needs scipy >= 1.16.3; the dev group pins pycanon < 1.2.1), so neither the project's
environment nor a dependency group of its lock can hold it: the section installs it into its own virtual environment,
``<work dir>/peers-venv``, from ``benchmarks/peers-requirements.txt`` (every package pinned with its hashes, made by
``uv pip compile --generate-hashes``), once, with uv. If that fails, the anjana rows say "not run" with the reason.
ARX is run only if a jar is given (``--arx-jar`` or ``$ARX_JAR``); this harness has no ARX driver yet, so the report
says "ARX: not run (no jar)" (or that a jar was found but no driver exists).

Order and repetitions: first one unmeasured warm-up run of every configuration (imports and the page cache warm,
anjana's environment built), then ``runs`` rounds, each running every configuration once in the same order
(round-robin: a slow period of a shared machine hits every configuration alike). Per configuration: the median
wall time, the median CPU time (user + system of the whole process tree, from ``getrusage(RUSAGE_CHILDREN)`` around
the run: the process and every descendant it waited for) and the largest peak resident set of the process tree
(sampled every 0.1 s from /proc like the size section: the sum of VmRSS over the process and its descendants).

Targets (issue 18): the warm default mixed release ≤ 6 s wall and ≤ 400 MiB peak; ``--model kl`` at (3, 3) and at
(5, 2) no slower (median wall of the whole command) than anjana at the same (k, ℓ) in the same sitting.
:func:`evaluate_peer_targets` and :func:`render_peers_markdown` are pure functions of the measured numbers
(``tests/benchmarks/test_bench_peers.py``); no timing is asserted in tests.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from benchmarks import bench_release as bench

PROJECT_ROOT = bench.PROJECT_ROOT
#: Every package of anjana 1.2.3's environment, pinned with hashes (``uv pip compile --generate-hashes``).
PEERS_REQUIREMENTS = PROJECT_ROOT / "benchmarks" / "peers-requirements.txt"
#: The script that runs anjana on a table, one ``l_diversity`` call per sensitive attribute (also used by the audit test).
ANJANA_SCRIPT = PROJECT_ROOT / "tests" / "release" / "anjana_adult.py"
ANJANA_VERSION = "1.2.3"
#: Largest share of records anjana may suppress, in percent (the README's anjana release of Adult uses 5 %).
ANJANA_SUPPRESSION_PERCENT = 5
ADULT_HIERARCHIES = PROJECT_ROOT / "data" / "adult" / "hierarchies"
#: ``make release``'s settings for Adult (README, Default configuration): the utility gate accepts up to 25 % deleted.
ADULT_RUN_ARGUMENTS = ("--max-deleted-share", "0.25")
#: Issue 18's targets of the peers section.
PEER_TARGETS = {
    "mixed_wall_seconds": 6.0,
    "mixed_tree_peak_rss_mb": 400.0,
    "kl_over_anjana_ratio": 1.0,
}
DEFAULT_PEER_TIMEOUT_SECONDS = 900.0
#: The configuration that times :mod:`benchmarks.stack_floor` (quoted in the targets' notes).
FLOOR_KEY = "stack-floor"


@dataclass(frozen=True)
class PeerRun:
    """One configuration of the peers section: a tool, its model and parameters."""

    key: str
    label: str
    tool: str  # "msa", "anjana" or "floor" (the stack's imports alone, :mod:`benchmarks.stack_floor`)
    model: str | None = None  # "mixed", "rating" or "kl"; None for the floor
    ell: int | None = None
    k: int | None = None
    #: further ``msa-release run`` options of the README's command for this model
    options: tuple[str, ...] = ()

    def msa_arguments(self) -> list[str]:
        """The ``msa-release run`` options of this configuration (beyond the home and :data:`ADULT_RUN_ARGUMENTS`).

        Raises
        ------
        ValueError
            For an anjana configuration or the stack floor, or an msa-release configuration without ℓ.
        """
        if self.tool != "msa" or self.ell is None:
            raise ValueError(f"{self.key} is not an msa-release run")
        arguments = [] if self.model == "mixed" else ["--model", self.model]
        if self.k is not None:
            arguments += ["--k", str(self.k)]
        return [*arguments, "--ell", str(self.ell), *self.options]


#: The configurations, in the round-robin order of every round.
PEER_RUNS = (
    PeerRun("msa-mixed-l3", "msa mixed ℓ=3 (`msa-release run`)", "msa", "mixed", 3),
    # the README's Rating baseline: `--allow-disclosure` (its rule holders' disclosure is above 1/ℓ, which the mixed
    # model bounds), published as a comparison
    PeerRun("msa-rating-l3", "msa rating ℓ=3 (`--allow-disclosure`)", "msa", "rating", 3, options=("--allow-disclosure",)),
    PeerRun("msa-kl-k3-l3", "msa kl k=3 ℓ=3", "msa", "kl", 3, 3),
    PeerRun("msa-kl-k5-l2", "msa kl k=5 ℓ=2", "msa", "kl", 2, 5),
    PeerRun("anjana-k3-l3", f"anjana {ANJANA_VERSION} k=3 ℓ=3", "anjana", "kl", 3, 3),
    PeerRun("anjana-k5-l2", f"anjana {ANJANA_VERSION} k=5 ℓ=2", "anjana", "kl", 2, 5),
    # what no change inside pipeline/ can remove: the libraries the release is built on, imported as it imports them
    PeerRun(FLOOR_KEY, "stack floor: the release's libraries imported, no release (`python -m benchmarks.stack_floor`)", "floor"),
)


# --------------------------------------------------------------------------------------------
# Pure: summaries, targets, report


def summarize_peer_runs(measurements: list[dict]) -> dict:
    """Median wall and CPU seconds and the largest process-tree peak (MiB) over the successful measurements.

    ``measurements``: dicts with ``exit_status``, ``wall_seconds``, ``cpu_seconds`` and ``tree_peak_rss_mb`` (None
    where /proc is not available). Returns ``{"successful_runs": 0, "runs": n}`` when none succeeded.
    """
    ok = [m for m in measurements if m.get("exit_status") == 0]
    summary: dict = {"successful_runs": len(ok), "runs": len(measurements)}
    if not ok:
        return summary
    peaks = [m["tree_peak_rss_mb"] for m in ok if m.get("tree_peak_rss_mb") is not None]
    walls = [m["wall_seconds"] for m in ok]
    summary.update(
        {
            "median_wall_seconds": round(statistics.median(walls), 3),
            "min_wall_seconds": round(min(walls), 3),
            "max_wall_seconds": round(max(walls), 3),
            "median_cpu_seconds": round(statistics.median(m["cpu_seconds"] for m in ok), 3),
            "tree_peak_rss_mb": round(max(peaks), 1) if peaks else None,
        }
    )
    return summary


def evaluate_peer_targets(summaries: dict[str, dict], not_run: dict[str, str] | None = None) -> list[dict]:
    """Issue 18's targets of the peers section from the configurations' summaries (:func:`summarize_peer_runs`).

    ``summaries``: :data:`PEER_RUNS` key -> summary (missing or unsuccessful keys give "not measured");
    ``not_run``: key -> why that configuration did not run (quoted in the note).

    * the warm default mixed release on Adult: median wall ≤ 6 s, largest process-tree peak ≤ 400 MiB;
    * ``--model kl`` at (3, 3) and (5, 2): median wall of the whole command / anjana's at the same (k, ℓ) ≤ 1.

    Returns
    -------
    list of dict
        target, description, value, limit, unit, verdict (pass, miss, not measured), note, issue (18).
    """
    not_run = not_run or {}
    rows: list[dict] = []

    def add(name: str, description: str, value, limit: float, unit: str, note: str = "") -> None:
        rows.append(
            {
                "target": name,
                "description": description,
                "value": value,
                "limit": limit,
                "unit": unit,
                "verdict": bench._verdict(value, limit),
                "note": note,
                "issue": 18,
            }
        )

    def figure(key: str, name: str):
        return (summaries.get(key) or {}).get(name)

    floor_wall, floor_peak = figure(FLOOR_KEY, "median_wall_seconds"), figure(FLOOR_KEY, "tree_peak_rss_mb")
    floor_seconds = f"; the stack's imports alone ({FLOOR_KEY}): {floor_wall:.2f} s" if floor_wall is not None else ""
    floor_mib = f"; the stack's imports alone ({FLOOR_KEY}): {floor_peak:.0f} MiB" if floor_peak is not None else ""
    mixed_note = not_run.get("msa-mixed-l3", "median of the measured runs, warm (one unmeasured warm-up run)")
    add(
        "peers_mixed_wall_seconds",
        "Adult, warm `msa-release run` (default mixed ℓ = 3, every gate and the audit): wall time",
        figure("msa-mixed-l3", "median_wall_seconds"),
        PEER_TARGETS["mixed_wall_seconds"],
        "s",
        mixed_note + floor_seconds,
    )
    add(
        "peers_mixed_tree_peak_rss_mb",
        "Adult, warm `msa-release run` (default mixed ℓ = 3): peak RSS of the process tree",
        figure("msa-mixed-l3", "tree_peak_rss_mb"),
        PEER_TARGETS["mixed_tree_peak_rss_mb"],
        "MiB",
        not_run.get("msa-mixed-l3", "largest over the measured runs") + floor_mib,
    )
    for k, ell in ((3, 3), (5, 2)):
        ours, theirs = f"msa-kl-k{k}-l{ell}", f"anjana-k{k}-l{ell}"
        mine, anjana = figure(ours, "median_wall_seconds"), figure(theirs, "median_wall_seconds")
        if mine is not None and anjana:
            ratio, note = round(mine / anjana, 3), f"msa-release {mine:.2f} s, anjana {anjana:.2f} s (median wall)"
            if floor_wall is not None:
                note += f"{floor_seconds}, {floor_wall / anjana:.2f} x anjana's whole command"
        else:
            missing = [f"{key}: {not_run.get(key, 'no successful run')}" for key, v in ((ours, mine), (theirs, anjana)) if not v]
            ratio, note = None, "; ".join(missing)
        add(
            f"peers_kl_k{k}_l{ell}_over_anjana",
            f"Adult, `msa-release run --model kl --k {k} --ell {ell}` / anjana at k = {k}, ℓ = {ell} (whole command, "
            "same sitting): wall-time ratio",
            ratio,
            PEER_TARGETS["kl_over_anjana_ratio"],
            "x",
            note,
        )
    return rows


def busy_machine_note(results: dict) -> str | None:
    """A warning when the machine was busy during the sitting (the 1-minute load average at the start or the end above
    the usable CPUs), else None: such figures are a check of the harness, not the ones to publish."""
    machine = results.get("machine") or {}
    cpus = machine.get("usable_cpus") or machine.get("logical_cpus")
    loads = [
        (when, figures[0])
        for when, figures in (("start", machine.get("load_average_at_start")), ("end", results.get("load_average_at_end")))
        if figures
    ]
    busy = [f"{load:.1f} at the {when}" for when, load in loads if cpus and load > cpus]
    if not busy:
        return None
    return (
        f"**Busy machine**: load average {' and '.join(busy)} on {cpus} usable CPUs: other processes competed for the "
        "CPUs, so these figures check the harness and are not the ones to publish (rerun on an idle machine)."
    )


def render_peers_table(results: dict) -> list[str]:
    """The side-by-side table (Markdown lines): one row per configuration (median wall s, median CPU s, largest
    process-tree peak MiB, successful / measured runs) and ARX's row."""
    lines = ["| run | wall s | CPU s | peak RSS MiB | runs |", "|---|---:|---:|---:|---|"]
    for entry in (results.get("runs") or {}).values():
        summary = entry.get("summary") or {}
        if entry.get("not_run"):
            lines.append(f"| {entry['label']} | not run | — | — | {entry['not_run']} |")
            continue
        lines.append(
            f"| {entry['label']} | {bench._format(summary.get('median_wall_seconds'))} "
            f"| {bench._format(summary.get('median_cpu_seconds'))} | {bench._format(summary.get('tree_peak_rss_mb'), 0)} "
            f"| {summary.get('successful_runs', 0)}/{summary.get('runs', 0)} |"
        )
    lines.append(f"| ARX | {results.get('arx') or 'not run (no jar)'} | — | — | |")
    return lines


def render_peers_markdown(results: dict) -> str:
    """The peers report (Markdown): the side-by-side table, the targets with pass / miss, how it was measured.

    ``results``: the content of ``peers.json`` (``runs``: key -> {label, summary, not_run?}; ``targets``; ``arx``;
    ``machine``; ``started_at``; ``rounds``).
    """
    machine = results.get("machine") or {}
    load = machine.get("load_average_at_start")
    lines = [
        "# Peers on Adult: msa-release and anjana in one sitting (issue 18)",
        "",
        f"Generated by `make bench SECTIONS=peers` (benchmarks/bench_peers.py) on {results.get('started_at', '—')}: "
        f"median of {results.get('rounds', '—')} round-robin rounds after one unmeasured warm-up run of each "
        f"configuration, same machine ({machine.get('cpu_model', '—')}, {machine.get('usable_cpus', '—')} usable CPUs, "
        f"{machine.get('memory_gb', '—')} GiB). Load average at the start: {load}, at the end: "
        f"{results.get('load_average_at_end')} (figures measured on a busy machine are not comparable with those of an "
        "idle one).",
        "",
        *([note, ""] if (note := busy_machine_note(results)) else []),
        *render_peers_table(results),
        "",
        "## Targets (issue 18)",
        "",
        "| target | measured | limit | verdict | note |",
        "|---|---:|---:|---|---|",
    ]
    for target in results.get("targets") or []:
        value = f"{bench._format(target['value'])} {target['unit'] if target['value'] is not None else ''}"
        lines.append(
            f"| {target['description']} | {value} | {bench._format(target['limit'])} {target['unit']} "
            f"| **{target['verdict']}** | {target['note']} |"
        )
    lines += [
        "",
        "Wall = the whole command from outside (process start-up and imports included). CPU = user + system seconds of "
        "the process tree (`getrusage(RUSAGE_CHILDREN)` around the run). Peak RSS = the largest sum of VmRSS over the "
        "process and its descendants, sampled every 0.1 s from /proc, largest over the runs.",
        "",
        "msa-release: `msa-release run` on `data/adult/adult.data` with `--max-deleted-share 0.25` (the README's Adult "
        "settings, `make release`), every gate, the publish, report.html and the audit included; the configuration's "
        "options are in the run's label. anjana "
        f"{ANJANA_VERSION}: `tests/release/anjana_adult.py` in its own environment (`benchmarks/peers-requirements.txt`) "
        "on the same 30,718 records (a CSV of the quasi-identifiers sex, race, marital-status, native-country, workclass "
        "and the sensitive attributes education, occupation, age, relationship), ARX's Adult hierarchies, one "
        "`l_diversity` call per sensitive attribute (distinct ℓ-diversity of each, k-anonymity), at most "
        f"{ANJANA_SUPPRESSION_PERCENT} % of the records suppressed; the process reads the CSV, anonymizes and writes its "
        "table. anjana does not publish several sensitive attributes linked to each other, run gates, an audit or a "
        "report: the comparison is of the whole command each tool needs for a release of Adult.",
        "",
        "Stack floor: `python -m benchmarks.stack_floor` imports the libraries `msa-release run` is built on as the "
        "release imports them (pandas and pyarrow, DuckDB with one in-memory connection, Dagster and its SQLite "
        "storage, Great Expectations as the gates import it, matplotlib's Agg figures) and does nothing else: no "
        "record is read and no run is made. What a release takes above it is the project's own work and Dagster's run "
        "bookkeeping; what it takes itself no change inside `pipeline/` removes while the CLI's release runs on these "
        "libraries.",
        "",
        "Raw figures: `peers.json`.",
        "",
    ]
    failures = [
        (entry["label"], m)
        for entry in (results.get("runs") or {}).values()
        for m in entry.get("measurements") or []
        if m.get("exit_status") != 0
    ]
    if failures:
        lines += ["## Failures", ""]
        lines += [f"- {label}: exit {m['exit_status']}: {(m.get('error') or '')[-400:]!r}" for label, m in failures]
        lines.append("")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Measuring


def measure_command(command: list[str], *, timeout: float | None, interval: float = 0.1, **kwargs) -> dict:
    """Run ``command`` once: wall seconds, CPU seconds of its process tree, peak RSS of its process tree (MiB).

    CPU = the growth of this process's ``RUSAGE_CHILDREN`` user + system time across the run (the command and
    every descendant it waited for; nothing else may run as this process's child meanwhile). ``kwargs`` go to
    ``subprocess.Popen`` (cwd, env). On failure ``error`` holds the end of stderr (or stdout).
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    completed, sampler = bench._run_sampled(command, timeout=timeout, interval=interval, **kwargs)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    outcome: dict = {
        "exit_status": completed.returncode,
        "wall_seconds": round(wall, 3),
        "cpu_seconds": round((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), 3),
        "tree_peak_rss_mb": round(sampler.peak_bytes / 1024**2, 1) if sampler.available else None,
    }
    if completed.returncode != 0:
        outcome["error"] = (completed.stderr or completed.stdout).strip()[-3000:]
    return outcome


def find_uv() -> str | None:
    """uv from the project's ``.tools/bin`` (``make env`` bootstraps it there when PATH has none), else PATH."""
    local = PROJECT_ROOT / ".tools" / "bin" / "uv"
    return str(local) if local.exists() else shutil.which("uv")


def ensure_peers_environment(venv: Path, log=print) -> tuple[str | None, str | None]:
    """anjana's own virtual environment at ``venv`` (built once from :data:`PEERS_REQUIREMENTS` with uv).

    Returns ``(python, None)`` when it is usable, ``(None, reason)`` when it cannot be built (no uv, no Python 3.11,
    PyPI unreachable): the anjana rows then say "not run" with the reason.
    """
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if marker.exists() and marker.read_text() == PEERS_REQUIREMENTS.read_text():
        return str(python), None
    uv = find_uv()
    if uv is None:
        return None, "uv is not installed (make env bootstraps it into .tools/): anjana's environment cannot be built"
    log(f"[peers] building anjana's environment {venv} from {PEERS_REQUIREMENTS.name} ...")
    environment = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for command in (
        [uv, "venv", "--quiet", "--clear", "--python", python_version, str(venv)],
        [uv, "pip", "install", "--quiet", "--require-hashes", "--python", str(python), "-r", str(PEERS_REQUIREMENTS)],
    ):
        done = bench._run_with_timeout(command, timeout=900, env=environment, cwd=PROJECT_ROOT)
        if done.returncode != 0:
            return None, f"anjana {ANJANA_VERSION} could not be installed ({' '.join(command[:3])}): {done.stderr.strip()[-300:]}"
    marker.write_text(PEERS_REQUIREMENTS.read_text())
    return str(python), None


def write_anjana_input(path: Path) -> int:
    """Adult after the default missing-value policy (30,718 records), the default quasi-identifiers and sensitive
    attributes, as a CSV of text (anjana's input; written once, not timed). Returns the number of records."""
    from pipeline.io.loading import load_records
    from pipeline.resources import ADULT_COLUMNS

    loaded = load_records(
        PROJECT_ROOT / "data" / "adult" / "adult.data",
        quasi_identifiers=bench.ADULT_QUASI_IDENTIFIERS,
        sensitive_attributes=bench.ADULT_SENSITIVE_ATTRIBUTES,
        csv_header=False,
        column_names=ADULT_COLUMNS,
    )
    records = loaded.records[[*bench.ADULT_QUASI_IDENTIFIERS, *bench.ADULT_SENSITIVE_ATTRIBUTES]].astype(str)
    path.parent.mkdir(parents=True, exist_ok=True)
    records.to_csv(path, index=False)
    return len(records)


def peer_command(run: PeerRun, *, work_dir: Path, anjana_python: str | None, anjana_input: Path) -> list[str]:
    """The command of one configuration (msa-release in its own home under ``work_dir``; anjana in its environment;
    the stack floor in this interpreter).

    Raises
    ------
    ValueError
        An anjana configuration without k or ℓ.
    """
    if run.tool == "msa":
        home = work_dir / "homes" / run.key
        return [bench._tool("msa-release"), "run", *ADULT_RUN_ARGUMENTS, *run.msa_arguments(), "--quiet", "--home", str(home)]
    if run.tool == "floor":
        return [sys.executable, "-m", "benchmarks.stack_floor"]
    if run.k is None or run.ell is None:
        raise ValueError(f"{run.key}: anjana's configuration needs k and ℓ")
    return [
        str(anjana_python),
        str(ANJANA_SCRIPT),
        str(anjana_input),
        str(ADULT_HIERARCHIES),
        ",".join(bench.ADULT_QUASI_IDENTIFIERS),
        ",".join(bench.ADULT_SENSITIVE_ATTRIBUTES),
        str(run.k),
        str(run.ell),
        str(ANJANA_SUPPRESSION_PERCENT),
        str(work_dir / "anjana" / f"{run.key}.csv"),
    ]


def arx_status(arx_jar: str | None) -> str:
    """What the report says about ARX: not run without a jar; with one, that no driver exists in this harness yet."""
    if not arx_jar:
        return "not run (no jar)"
    if not Path(arx_jar).is_file():
        return f"not run (no jar at {arx_jar})"
    return f"not run (a jar is given, {Path(arx_jar).name}, but this harness has no ARX driver yet)"


def run_peers(
    *,
    output_dir: Path,
    work_dir: Path,
    rounds: int = 3,
    timeout: float | None = DEFAULT_PEER_TIMEOUT_SECONDS,
    arx_jar: str | None = None,
    configurations: tuple[PeerRun, ...] = PEER_RUNS,
    log=print,
) -> dict:
    """Run the peers section and write ``peers.json`` and ``peers.md`` into ``output_dir``; returns the results."""
    work_dir = work_dir / "peers"
    anjana_input = work_dir / "anjana" / "adult_raw.csv"
    not_run: dict[str, str] = {}
    anjana_python = None
    if any(run.tool == "anjana" for run in configurations):
        anjana_python, reason = ensure_peers_environment(work_dir / "peers-venv", log)
        if reason:
            log(f"[peers] anjana: not run: {reason}")
            not_run.update({run.key: reason for run in configurations if run.tool == "anjana"})
        else:
            write_anjana_input(anjana_input)
    results: dict = {
        "started_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "rounds": rounds,
        "machine": bench.machine_description(),
        "arx": arx_status(arx_jar),
        "targets_definition": PEER_TARGETS,
        "runs": {
            run.key: {"label": run.label, "tool": run.tool, "model": run.model, "k": run.k, "ell": run.ell, "measurements": []}
            for run in configurations
        },
    }
    active = [run for run in configurations if run.key not in not_run]
    commands = {
        run.key: peer_command(run, work_dir=work_dir, anjana_python=anjana_python, anjana_input=anjana_input) for run in active
    }
    for key, reason in not_run.items():
        results["runs"][key]["not_run"] = reason
    root = f"{PROJECT_ROOT}{os.sep}"  # the report names paths inside the checkout relative to it
    results["runs"] = {
        key: {**entry, "command": [c.removeprefix(root) for c in commands[key]] if key in commands else None}
        for key, entry in results["runs"].items()
    }

    def once(run: PeerRun) -> dict:
        home = work_dir / "homes" / run.key
        outcome = measure_command(commands[run.key], timeout=timeout, cwd=PROJECT_ROOT, env=bench._environment(home))
        bench.forget_releases(home)  # the bench keeps neither the releases nor their registry entries
        return outcome

    for run in active:  # warm-up: imports and page cache warm, homes and warehouses made; not measured
        log(f"[peers] warm-up {run.label} ...")
        warm = once(run)
        results["runs"][run.key]["warm_up"] = warm
        log(f"[peers]   exit {warm['exit_status']}, {warm['wall_seconds']:.1f} s")
    for index in range(rounds):
        for run in active:
            log(f"[peers] round {index + 1}/{rounds}: {run.label} ...")
            outcome = once(run)
            results["runs"][run.key]["measurements"].append(outcome)
            log(
                f"[peers]   exit {outcome['exit_status']}, {outcome['wall_seconds']:.1f} s wall, {outcome['cpu_seconds']:.1f} s CPU, "
                f"peak {outcome['tree_peak_rss_mb']} MiB"
            )
    for entry in results["runs"].values():
        entry["summary"] = summarize_peer_runs(entry["measurements"])
    results["finished_at"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    results["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    results["targets"] = evaluate_peer_targets(
        {key: entry["summary"] for key, entry in results["runs"].items()},
        not_run,
    )
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "peers.json").write_text(json.dumps(results, indent=2) + "\n")
    (output_dir / "peers.md").write_text(render_peers_markdown(results))
    return results
