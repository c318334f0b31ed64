"""``msa-release``: the command line. One module per command; ``app`` holds the group, ``common`` what they share.

The console script is ``pipeline.cli:entry_point`` (pyproject.toml; it runs the group ``main``); importing this package registers every command.
"""

from __future__ import annotations

from pipeline.cli import (  # noqa: F401  (register the commands)
    attacks,
    audit,
    experiments,
    hierarchies,
    kl_quality,
    list,
    plan,
    run,
    synthesize,
)
from pipeline.cli.app import entry_point, main
from pipeline.cli.common import build_settings_config, execute_job, prepare_dagster_home

__all__ = ["build_settings_config", "entry_point", "execute_job", "main", "prepare_dagster_home"]
