"""The ``msa-release`` command group (the commands register themselves on it, one module each)."""

from __future__ import annotations

import click


@click.group()
@click.pass_context
def main(context: click.Context) -> None:
    """Publish microdata with several sensitive attributes (strong-rule mixed model, Rating
    baseline, (k, ℓ)-anonymity)."""
    from pipeline.vocabulary import COMMAND_LINE, speaking

    # messages name options (--ell), not run-config keys (ell), for as long as the command runs
    context.with_resource(speaking(COMMAND_LINE))
