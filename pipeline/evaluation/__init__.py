"""Research and measurement tooling (framework-free: no Dagster, no Great Expectations).

``experiments``: the P1 §6 sweeps; ``kl_quality``: (k, ℓ) quality against ARX; ``profiling``: per-stage time and
memory of a run; ``synthetic``: synthetic tables of any size for the scale benchmark.
"""
