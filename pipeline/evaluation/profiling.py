"""Per-stage wall time and peak memory (RSS) of a release run (``--profile``).

No Dagster here: the assets hand over the step windows (start and end time of every step,
read from the run's event log) and this module attributes memory samples to them.

How the peak RSS of one step is measured, in one process (Dagster's in-process executor runs
every step of a run in the same Python process):

* ``vmhwm_reset`` (Linux, the default where it works): a background thread wakes every
  ``interval`` seconds, reads the kernel's high-water mark of the resident set, ``VmHWM`` in
  ``/proc/self/status``, and resets it by writing ``5`` to ``/proc/self/clear_refs`` (Linux
  ≥ 4.0, ``Documentation/admin-guide/mm/soft-dirty`` / ``proc.rst``). Each sample is therefore
  the exact peak RSS of the interval since the previous sample, however short the spike was.
  A step's peak is the largest sample whose interval overlaps the step's window, so the peak
  is never under-estimated; it can be over-estimated by the neighbouring step's peak inside
  one interval at the step's boundaries (20 ms by default; longer while a C extension holds
  the GIL, since the thread then wakes late).
* ``vmrss_sampling`` (``/proc`` readable but ``clear_refs`` not writable): the thread samples
  the current RSS, ``VmRSS``; spikes shorter than the interval can be missed.
* ``getrusage`` (no ``/proc``, e.g. macOS): only the process's peak so far
  (``ru_maxrss``) is known; a step's figure is the process peak at its end (an upper bound).

Side effect: resetting ``VmHWM`` also lowers what ``getrusage(RUSAGE_SELF).ru_maxrss`` and the
parent's ``wait4`` report for this process, so a profiled process's overall peak is the largest
sample (:meth:`MemorySampler.process_peak_bytes`), which this module reports.
"""

from __future__ import annotations

import resource
import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "DEFAULT_INTERVAL_SECONDS",
    "MemorySampler",
    "PUBLISH_NOTE",
    "build_profile",
    "current_sampler",
    "ensure_sampler",
    "metadata_entries",
    "stage_of_step",
]

#: Sampling interval of the memory thread, seconds.
DEFAULT_INTERVAL_SECONDS = 0.02

_STATUS = Path("/proc/self/status")
_CLEAR_REFS = Path("/proc/self/clear_refs")
_MEGABYTE = 1024 * 1024

#: Step key -> stage of the benchmark report (issue 5). Gate steps are recognised by prefix.
STEP_STAGES = {
    "raw_records": "load",
    "private__strong_rules": "rule_mining",
    "sac_ir_split": "sac_ir_split",
    "private__sensitive_attribute_clusters": "clustering",
    "sac_groups": "grouping",
    "private__sac_permuted": "grouping",
    "ir_rating": "sid_creation",
    # plain Rating
    "rating_records": "rating_records",
    "rating_sids": "sid_creation",
    # (k, ℓ) model
    "private__generalization_hierarchies": "hierarchies",
    "kl_anonymization": "kl_anonymization",
}
#: Prefixes of the asset-check (gate) steps of the built-in models (:func:`stage_of_step` also recognises those of
#: every registered model).
GATE_STEP_PREFIXES = ("candidate__release_candidate_", "candidate__rating_release_candidate_", "candidate__kl_release_candidate_")


def generated_step_stages() -> dict[str, str]:
    """Step key -> stage of the steps generated for every registered model (``assets/publish.py``): its candidate
    (``assembly``), its gate step (``gates``), its publish step (``publish``) and its audit (``audit``)."""
    from pipeline.models import PUBLICATION_MODELS

    stages: dict[str, str] = {}
    for model in PUBLICATION_MODELS.values():
        stages[model.candidate_asset] = "assembly"
        stages[f"{model.candidate_asset}_gates"] = "gates"  # every gate of the candidate in one step (checks/gates.py)
        stages[model.publish_step] = "publish"
        stages[f"audit__{model.publish_asset}_disclosure"] = "audit"
    return stages


#: Why the manifest's profile has no ``publish`` stage.
PUBLISH_NOTE = (
    "the publish step writes this manifest, so its own time and peak are not in it: they are in the Dagster "
    "metadata of the release asset (profile_seconds_publish, profile_peak_rss_mb_publish) and in the "
    "sidecar written by `msa-release run --profile` (--profile-output)"
)


def stage_of_step(step_key: str) -> str:
    """The report stage of a Dagster step key (``load``, ``rule_mining``, …, ``gates``).

    Gate steps (asset checks on the candidate) are all ``gates``; an unknown step is its own
    stage, named by its key without the ``private__`` / ``candidate__`` prefix.
    """
    if step_key in STEP_STAGES:
        return STEP_STAGES[step_key]
    generated = generated_step_stages()
    if step_key in generated:
        return generated[step_key]
    from pipeline.models import PUBLICATION_MODELS

    gate_prefixes = (*GATE_STEP_PREFIXES, *(f"candidate__{m.candidate_asset}_" for m in PUBLICATION_MODELS.values()))
    if step_key.startswith(gate_prefixes):
        return "gates"
    for prefix in ("private__", "candidate__", "audit__"):
        if step_key.startswith(prefix):
            return step_key[len(prefix) :]
    return step_key


def _read_status_kilobytes(field: str) -> int | None:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def _ru_maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)  # bytes on macOS, KiB on Linux


def _probe_method() -> str:
    if _read_status_kilobytes("VmHWM") is None:
        return "getrusage"
    try:
        with _CLEAR_REFS.open("w") as handle:
            handle.write("5")
    except OSError:
        return "vmrss_sampling"
    return "vmhwm_reset"


class MemorySampler:
    """Background thread recording the process's peak RSS per time interval.

    Parameters
    ----------
    interval
        Seconds between samples (> 0).

    Attributes
    ----------
    method
        ``"vmhwm_reset"``, ``"vmrss_sampling"`` or ``"getrusage"`` (see the module docstring).
    samples
        ``(start, end, peak_bytes)`` per interval: wall-clock times (``time.time()``, seconds
        since the epoch, as Dagster's event timestamps) and the peak RSS in bytes seen in it.
    """

    def __init__(self, interval: float = DEFAULT_INTERVAL_SECONDS):
        if not interval > 0:
            raise ValueError(f"interval must be > 0 seconds, got {interval!r}")
        self.interval = float(interval)
        self.method = _probe_method()
        self.samples: list[tuple[float, float, int]] = []
        self.started_at: float | None = None
        self.stopped_at: float | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last = 0.0

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _peak_now(self) -> int:
        if self.method == "vmhwm_reset":
            kilobytes = _read_status_kilobytes("VmHWM")
            try:
                with _CLEAR_REFS.open("w") as handle:
                    handle.write("5")
            except OSError:
                pass
            return (kilobytes or 0) * 1024
        if self.method == "vmrss_sampling":
            return (_read_status_kilobytes("VmRSS") or 0) * 1024
        return _ru_maxrss_bytes()

    def sample(self) -> None:
        """Record one sample now (the thread calls this; callable directly, e.g. at a step end)."""
        with self._lock:
            now = time.time()
            peak = self._peak_now()
            self.samples.append((self._last, now, peak))
            self._last = now

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> MemorySampler:
        """Start the thread (the process's peak since its start becomes the first sample)."""
        if self.running:
            return self
        self.started_at = self._last = time.time()
        if self.method == "vmhwm_reset":  # the peak of everything before profiling started
            kilobytes = _read_status_kilobytes("VmHWM") or 0
            self.samples.append((0.0, self._last, kilobytes * 1024))
            self._peak_now()
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="msa-release-memory-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread after a last sample; the samples stay readable."""
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join()
        self._thread = None
        self.sample()
        self.stopped_at = time.time()

    def peak_bytes(self, start: float, end: float) -> int | None:
        """Largest peak RSS (bytes) of the intervals overlapping ``[start, end]``; None if none.

        With ``getrusage`` the figure is the process peak at ``end`` (an upper bound).
        """
        self.sample()
        with self._lock:
            overlapping = [peak for (s, e, peak) in self.samples if e >= start and s <= end]
        return max(overlapping) if overlapping else None

    def process_peak_bytes(self) -> int:
        """Peak RSS (bytes) of the process so far (before profiling started included)."""
        self.sample()
        with self._lock:
            return max((peak for _, _, peak in self.samples), default=0)


_CURRENT: MemorySampler | None = None
_CURRENT_LOCK = threading.Lock()


def ensure_sampler(interval: float = DEFAULT_INTERVAL_SECONDS) -> tuple[MemorySampler, bool]:
    """The process's running sampler, started now if there is none.

    Returns
    -------
    (sampler, started)
        ``started`` is True when this call started it (the caller stops it).
    """
    global _CURRENT
    with _CURRENT_LOCK:
        if _CURRENT is not None and _CURRENT.running:
            return _CURRENT, False
        _CURRENT = MemorySampler(interval).start()
        return _CURRENT, True


def current_sampler() -> MemorySampler | None:
    """The sampler started last in this process (running or stopped), or None."""
    return _CURRENT


def _megabytes(value: int | None) -> float | None:
    return None if value is None else round(value / _MEGABYTE, 1)


def build_profile(
    step_windows: Mapping[str, tuple[float, float]],
    sampler: MemorySampler | None,
) -> dict:
    """Per-step and per-stage wall time and peak RSS of a run.

    Parameters
    ----------
    step_windows
        Step key -> ``(start, end)`` wall-clock times in seconds since the epoch (Dagster's
        ``STEP_START`` and ``STEP_SUCCESS`` event timestamps).
    sampler
        The memory sampler of the process that ran the steps; None: times only.

    Returns
    -------
    dict
        ``{"method", "sample_interval_seconds", "process_peak_rss_mb", "steps": {step:
        {"stage", "seconds", "peak_rss_mb"}}, "stages": {stage: {"seconds", "peak_rss_mb",
        "steps"}}}``; seconds rounded to 1 ms, memory in MiB (1 MB = 2^20 bytes) rounded to
        0.1. A stage's seconds are the sum of its steps' (the gates run one after another),
        its peak the largest of its steps'. ``peak_rss_mb`` is None without a sampler.
    """
    steps: dict[str, dict] = {}
    for step, (start, end) in sorted(step_windows.items(), key=lambda item: item[1][0]):
        peak = sampler.peak_bytes(start, end) if sampler is not None else None
        steps[step] = {"stage": stage_of_step(step), "seconds": round(end - start, 3), "peak_rss_mb": _megabytes(peak)}
    stages: dict[str, dict] = {}
    for step, figures in steps.items():
        stage = stages.setdefault(figures["stage"], {"seconds": 0.0, "peak_rss_mb": None, "steps": []})
        stage["seconds"] = round(stage["seconds"] + figures["seconds"], 3)
        stage["steps"].append(step)
        if figures["peak_rss_mb"] is not None:
            stage["peak_rss_mb"] = max(stage["peak_rss_mb"] or 0.0, figures["peak_rss_mb"])
    return {
        "method": sampler.method if sampler is not None else "none",
        "sample_interval_seconds": sampler.interval if sampler is not None else None,
        "process_peak_rss_mb": _megabytes(sampler.process_peak_bytes()) if sampler is not None else None,
        "steps": steps,
        "stages": stages,
    }


def metadata_entries(profile: Mapping) -> dict[str, float]:
    """Numeric Dagster metadata with stable names: ``profile_seconds_<stage>``,
    ``profile_peak_rss_mb_<stage>`` and ``profile_peak_rss_mb_process``."""
    entries: dict[str, float] = {}
    for stage, figures in profile.get("stages", {}).items():
        entries[f"profile_seconds_{stage}"] = float(figures["seconds"])
        if figures.get("peak_rss_mb") is not None:
            entries[f"profile_peak_rss_mb_{stage}"] = float(figures["peak_rss_mb"])
    if profile.get("process_peak_rss_mb") is not None:
        entries["profile_peak_rss_mb_process"] = float(profile["process_peak_rss_mb"])
    return entries
