"""``python -m toolnexus_temporal.cli``: the ``tnx`` command."""

from toolnexus_temporal.cli.app import main

main()
