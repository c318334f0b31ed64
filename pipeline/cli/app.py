"""The ``msa-release`` command group (the commands register themselves on it, one module each)."""

from __future__ import annotations

import click

#: ``-h`` is ``--help`` on the group and on every command (the commands' contexts inherit it).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


@click.group(context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="msa-release", prog_name="msa-release", message="%(prog)s %(version)s")
@click.pass_context
def main(context: click.Context) -> None:
    """Publish microdata with several sensitive attributes (strong-rule mixed model, Rating
    baseline, (k, ℓ)-anonymity)."""
    from pipeline.vocabulary import COMMAND_LINE, speaking

    # messages name options (--ell), not run-config keys (ell), for as long as the command runs
    context.with_resource(speaking(COMMAND_LINE))
