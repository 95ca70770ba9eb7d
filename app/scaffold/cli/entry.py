"""The ``scaffold`` executable: ``diagram-check`` and ``serve`` straight away, anything
else via the full CLI.

``scaffold diagram-check`` runs in CI on every push, so it must not pay for the
orchestrator, the App server or the agent tooling it never uses: this entry point
hands it (and the Action's ``action diagram-check`` step) to its own module alone
(same options, same exit codes), and everything else, ``--help`` included, to
:func:`scaffold.cli.main.main`. ``scaffold serve`` likewise goes to its own command
alone, so the App server starts with only what ingest needs imported (see
:mod:`scaffold.cli.serve_cmd`).
"""

from __future__ import annotations

import sys


def main() -> None:
    if sys.argv[1:3] == ["action", "diagram-check"]:
        from scaffold.cli.action_cmds import action

        action.main(sys.argv[2:], prog_name="scaffold action")
        return
    if len(sys.argv) > 1 and sys.argv[1] == "diagram-check":
        import click

        from scaffold.cli.diagram_cmds import diagram_check
        from scaffold.errors import ScaffoldError

        try:
            diagram_check.main(
                sys.argv[2:], prog_name="scaffold diagram-check", standalone_mode=False
            )
        except ScaffoldError as exc:
            click.echo(f"scaffold: {exc}", err=True)
            sys.exit(exc.exit_code)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.ClickException as exc:
            exc.show()
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        return
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        from scaffold.cli.serve_cmd import serve

        serve.main(sys.argv[2:], prog_name="scaffold serve")
        return
    from scaffold.cli.main import main as full

    full()
