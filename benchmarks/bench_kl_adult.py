"""Benchmark: the (k, ℓ) blocked method on all of UCI Adult (issue target: < 60 s on 2 cores,
no O(n²) memory). Run with ``make bench``; exits 1 when a target is missed. Not a unit test:
timings on shared machines are noisy, so they are measured here and never asserted in tests/."""

import resource
import sys
import time

from pipeline.core.hierarchies import load_hierarchies
from pipeline.core.kl_anonymity import kl_anonymize
from pipeline.io.loading import load_records
from pipeline.resources import ReleaseSettings

SECONDS_TARGET = 60.0
MEMORY_TARGET_MEGABYTES = 1500.0


def main() -> int:
    settings = ReleaseSettings()
    loaded = load_records(
        settings.input_path,
        quasi_identifiers=settings.quasi_identifiers,
        sensitive_attributes=settings.sensitive_attributes,
        column_names=settings.column_names,
        csv_header=False,
    )
    hierarchies = load_hierarchies("data/adult/hierarchies", settings.quasi_identifiers)
    status = 0
    for k, ell in ((3, 3), (5, 3), (10, 5)):
        started = time.perf_counter()
        result = kl_anonymize(
            loaded.records, settings.quasi_identifiers, settings.sensitive_attributes, hierarchies, k=k, ell=ell
        )
        seconds = time.perf_counter() - started
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        ok = seconds < SECONDS_TARGET and peak < MEMORY_TARGET_MEGABYTES
        status |= not ok
        print(
            f"k={k} ell={ell}: {len(loaded.records)} records, {seconds:.1f} s (target < {SECONDS_TARGET:.0f}), "
            f"peak RSS {peak:.0f} MB (target < {MEMORY_TARGET_MEGABYTES:.0f}), {len(result.clusters)} clusters, "
            f"cost {result.total_cost:.0f}  {'OK' if ok else 'MISSED'}"
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
