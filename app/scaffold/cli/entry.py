"""The ``scaffold`` executable: ``diagram-check`` (run in CI on every push) and ``serve``
start without importing the full CLI (the orchestrator, the agent tooling); everything
else goes to :func:`scaffold.cli.main.main`.
"""

from __future__ import annotations

import importlib
import sys

# Leading words -> the module and the click command that runs them alone.
_LIGHT = {
    ("diagram-check",): ("scaffold.cli.diagram_cmds", "diagram_check"),
    ("serve",): ("scaffold.cli.serve_cmd", "serve"),
    ("action", "diagram-check"): ("scaffold.cli.action_cmds", "action"),
}


def main() -> None:
    args = sys.argv[1:]
    for words, (module, name) in _LIGHT.items():
        if tuple(args[: len(words)]) == words:
            import click

            from scaffold.errors import ScaffoldError

            command: click.Command = getattr(importlib.import_module(module), name)
            try:
                command.main(args[1:], prog_name=f"scaffold {args[0]}")
            except ScaffoldError as exc:
                click.echo(f"scaffold: {exc}", err=True)
                sys.exit(exc.exit_code)
            return
    from scaffold.cli.main import main as full

    full()
