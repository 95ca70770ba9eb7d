"""``python -m scaffold``: the same as the ``scaffold`` command."""

from scaffold.cli.main import main

main()
