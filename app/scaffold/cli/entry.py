"""The ``scaffold`` executable: ``diagram-check`` and ``serve`` straight away, anything
else via the full CLI.

``scaffold diagram-check`` runs in CI on every push, so it must not pay for the
orchestrator, the App server or the agent tooling it never uses, nor even for click:
a plain command line (``--repo``, ``--base``, ``--head``, ``--format``, in any order,
``--opt value`` or ``--opt=value``) is read here and run at once.
Anything else (``--help``, a missing ``--base``, an unknown option, a bad ``--format``,
a ``--repo`` that is a file) goes to the click command of
:mod:`scaffold.cli.diagram_cmds`, which prints the usual usage error or help: one
command, one behaviour, the same exit codes. The Action's ``action diagram-check`` step
goes to its own module; ``scaffold serve`` to its own command alone, so the App
server starts with only what ingest needs imported (see :mod:`scaffold.cli.serve_cmd`);
everything else, ``--help`` included, to :func:`scaffold.cli.main.main`.
"""

from __future__ import annotations

import sys

FORMATS = ("text", "json", "github", "markdown")


_OPTIONS = {"--repo": "repo_path", "--base": "base", "--head": "head", "--format": "fmt"}


def plain_diagram_check_args(argv: list[str]) -> dict[str, str | None] | None:
    """``diagram-check``'s options when ``argv`` is a plain, valid command line, else ``None``.

    Plain: only ``--repo``, ``--base`` (required), ``--head`` and ``--format``, each as
    ``--opt value`` or ``--opt=value`` (the last one wins), values that do not start
    with ``-``, a known format, a ``--repo`` that is not a file. ``None`` means "let
    click handle it": click then prints the help or the usage error (exit 2) exactly as
    before. What is taken here is what click would take, with the same meaning; it is
    read by hand because even argparse costs several milliseconds (it loads ``gettext``,
    ``locale`` and ``shutil``) on a command meant to take a few tens.
    """
    found: dict[str, str | None] = {"repo_path": None, "head": "HEAD", "fmt": "text"}
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        key = _OPTIONS.get(name)
        if key is None:
            return None
        if not eq:
            if i + 1 >= len(argv):
                return None
            i += 1
            value = argv[i]
        if value.startswith("-"):
            return None
        found[key] = value
        i += 1
    if "base" not in found or found["fmt"] not in FORMATS:
        return None
    repo = found["repo_path"]
    if repo:
        import os

        # click.Path(file_okay=False): an existing path must be a readable directory.
        if os.path.exists(repo) and not (os.path.isdir(repo) and os.access(repo, os.R_OK)):
            return None
    return found


def run_diagram_check(repo_path: str | None, base: str, head: str, fmt: str) -> int:
    """``scaffold diagram-check`` without click: the report on stdout, the exit code back.

    The same check again (the same commits, format and code) prints what the first one
    printed, from :mod:`~scaffold.diagramcheck.output_cache`, with almost nothing
    imported; any other goes to the analyzer, and its output is kept.
    """
    import os

    from scaffold.diagramcheck import output_cache

    found = None
    if output_cache.enabled():
        from scaffold.diagramcheck.revisions import resolve_quick

        found = resolve_quick(repo_path or os.getcwd(), base, head)
    name = output_cache.key(found, fmt) if found is not None else ""
    stored = output_cache.read(found.git_dir, name) if found is not None else None
    if stored is not None:
        sys.stdout.write(stored[1])
        sys.stdout.flush()
        return stored[0]
    from pathlib import Path

    from scaffold.errors import ScaffoldError

    try:
        from scaffold.diagramcheck.analyzer import analyze_here, analyze_resolved
        from scaffold.diagramcheck.render import render

        if found is not None:
            report = analyze_resolved(found)
        else:
            report = analyze_here(Path(repo_path) if repo_path else Path.cwd(), base, head)
        text = render(report, fmt)
        code = 1 if report.blocking else 0
        if found is not None:
            output_cache.store(found.git_dir, name, code, text)
        sys.stdout.write(text)
        sys.stdout.flush()
    except ScaffoldError as exc:
        sys.stderr.write(f"scaffold: {exc}\n")
        sys.stderr.flush()
        return exc.exit_code
    except (EOFError, KeyboardInterrupt):
        sys.stderr.write("\nAborted!\n")  # what click prints
        return 1
    return code


def main() -> None:
    if sys.argv[1:3] == ["action", "diagram-check"]:
        from scaffold.cli.action_cmds import action

        action.main(sys.argv[2:], prog_name="scaffold action")
        return
    if len(sys.argv) > 1 and sys.argv[1] == "diagram-check":
        plain = plain_diagram_check_args(sys.argv[2:])
        if plain is not None:
            sys.exit(run_diagram_check(**plain))  # type: ignore[arg-type]
        _click_diagram_check(sys.argv[2:])
        return
    if len(sys.argv) > 1 and sys.argv[1] == "serve":
        from scaffold.cli.serve_cmd import serve

        serve.main(sys.argv[2:], prog_name="scaffold serve")
        return
    from scaffold.cli.main import main as full

    full()


def _click_diagram_check(argv: list[str]) -> None:
    """The click command: help and usage errors, printed as click prints them."""
    import click

    from scaffold.cli.diagram_cmds import diagram_check
    from scaffold.errors import ScaffoldError

    try:
        diagram_check.main(argv, prog_name="scaffold diagram-check", standalone_mode=False)
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
