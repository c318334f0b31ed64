"""Executors of sharded releases (issue 17): ``local`` (DuckDB staging + a process pool) and ``spark`` (pyspark)."""
