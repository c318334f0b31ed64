"""The ``msa-release`` command group (the commands register themselves on it, one module each)."""

from __future__ import annotations

import click


@click.group()
def main() -> None:
    """Publish microdata with several sensitive attributes (strong-rule mixed model, Rating
    baseline, (k, ℓ)-anonymity)."""
