"""The ``scaffold`` executable: the click CLI, each light verb loaded on its own.

``scaffold diagram-check`` runs in CI on every push and ``scaffold serve`` starts the
App server: each runs its own click command without importing the full CLI (the
orchestrator, the agent tooling). Everything else, ``--help`` included, goes to
:func:`scaffold.cli.main.main`.
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
