"""Reading input tables (framework-free: no Dagster, no Great Expectations).

``loading``: CSV and Parquet input as categorical text with the missing-value policy and clear errors;
``tables``: helpers that turn stored frames (clusters, hierarchies, S_max) back into the core's types.
"""
