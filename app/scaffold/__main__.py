"""``python -m scaffold``: the same as the ``scaffold`` command."""

from scaffold.cli.entry import main

main()
