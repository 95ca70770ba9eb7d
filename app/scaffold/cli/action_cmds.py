"""``scaffold action <mode>``: the GitHub Action's steps, reading the runner's environment.

A usage or configuration error is printed as a ``::error::`` workflow command and exits
2. diagram-check: 0 in sync (or nothing to check), 1 blocking. slot: 0 the agent
signalled and its branch was pushed, 1 it crashed, stalled or its work was not pushed.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from scaffold.action.diagram_check import run_diagram_check
from scaffold.action.env import SLOT_OUTPUT_DIR, ActionEnv, action_env, load_event
from scaffold.action.outputs import append_summary, write_outputs
from scaffold.diagramcheck.render import workflow_command
from scaffold.errors import ScaffoldError, UsageError
from scaffold.git.runner import repo_toplevel

# `diagram-check` runs on every push: only its own modules are imported at the top. The
# slot and event steps load the agent, orchestrator and server code when they run.


def _guarded(step: Callable[..., int]) -> Callable[..., NoReturn]:
    """The step's return value is its exit code; an error is a ``::error::`` line."""

    @functools.wraps(step)
    def run(*args: Any, **kwargs: Any) -> NoReturn:
        try:
            code = step(*args, **kwargs)
        except ScaffoldError as exc:
            click.echo(workflow_command("error", f"scaffold: {exc}", {"title": "scaffold action"}))
            sys.exit(exc.exit_code if exc.exit_code in (1, 2) else 1)
        sys.exit(code)

    return run


def _workspace(env: ActionEnv, repo_path: str | None) -> Path:
    start = Path(repo_path) if repo_path else env.workspace or Path.cwd()
    if not start.is_dir():
        raise UsageError(f"the workspace {start} is not a folder")
    return repo_toplevel(start)


_repo_option = click.option(
    "--repo",
    "repo_path",
    type=click.Path(file_okay=False),
    default=None,
    help="The checkout (default: $GITHUB_WORKSPACE, else the current directory).",
)


@click.group(name="action")
def action() -> None:
    """The steps of scaffold's GitHub Action (action.yml)."""


@action.command(name="diagram-check")
@_repo_option
@click.option("--base", default=None, help="Override the base commit the event names.")
@click.option("--head", default=None, help="Override the head commit the event names.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["github", "text", "json", "markdown"]),
    default="github",
    show_default=True,
    help="What goes to the log (github: ::error annotations).",
)
@click.option(
    "--report",
    "report_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Where the JSON report goes (default: $RUNNER_TEMP/scaffold-diagram-check/report.json).",
)
@_guarded
def diagram_check(
    repo_path: str | None, base: str | None, head: str | None, fmt: str, report_path: str | None
) -> int:
    """DiagramCheck of the pull request or push that triggered the workflow."""
    env = action_env()
    return run_diagram_check(
        env,
        load_event(env.event_path),
        _workspace(env, repo_path),
        base=base or None,
        head=head or None,
        fmt=fmt,
        report_path=Path(report_path).absolute() if report_path else None,
        echo=lambda text: click.echo(text, nl=False),
    )


@action.command(name="slot")
@_repo_option
@click.option("--task-id", required=True, help="The task (TASK-3, task-3 or 3).")
@click.option("--role", default=None, help="The agent role (codeweaver, siegemaster, ...).")
@click.option("--run-spec", default=None, help="The run as JSON (an AgentRun).")
@click.option("--quest-id", default=None, help="The quest the task belongs to.")
@click.option("--resume-session", default=None, help="The agent session to resume.")
@click.option(
    "--session-file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A saved Claude Code session file to put back before resuming.",
)
@click.option(
    "--agent-command",
    default=None,
    help='The agent argv as JSON (default: agent.command of the config, ["claude"]).',
)
@click.option(
    "--stuck-timeout",
    type=float,
    default=None,
    help="Seconds without output before the agent counts as stalled.",
)
@click.option(
    "--output-dir",
    type=click.Path(file_okay=False),
    default=None,
    help=f"Where the run's files go (default: $RUNNER_TEMP/{SLOT_OUTPUT_DIR}).",
)
@_guarded
def slot(
    repo_path: str | None,
    task_id: str,
    role: str | None,
    run_spec: str | None,
    quest_id: str | None,
    resume_session: str | None,
    session_file: str | None,
    agent_command: str | None,
    stuck_timeout: float | None,
    output_dir: str | None,
) -> int:
    """Run one agent for one task on its branch, and push what it did."""
    from scaffold.action.slot import parse_slot_request, run_slot
    from scaffold.cli.serve_cmd import harden_process

    # the slot needs no token of its own (it pushes with the checkout's credentials)
    harden_process()
    env = action_env()
    out = Path(output_dir) if output_dir else env.temp_dir() / SLOT_OUTPUT_DIR
    request = parse_slot_request(
        task_id=task_id,
        role=role or None,
        run_spec=run_spec or None,
        quest_id=quest_id or None,
        resume_session=resume_session or None,
        agent_command=agent_command or None,
        output_dir=out,
        stuck_timeout_s=stuck_timeout,
        session_file=Path(session_file) if session_file else None,
    )
    result = run_slot(request, _workspace(env, repo_path))
    if result.exit_code:
        failure = result.outcome.get("failure") or "the agent did not signal"
        click.echo(
            workflow_command("error", f"scaffold slot: {failure}", {"title": "scaffold slot"})
        )
    else:
        click.echo(f"scaffold slot: {request.task_id} {result.signal_type}, pushed {result.branch}")
    append_summary(env.step_summary, result.summary())
    write_outputs(env.output, result.outputs())
    return result.exit_code


@action.command(name="agent-clis")
@_repo_option
@click.option("--role", default=None, help="Only this role's (default: every role's).")
@_guarded
def agent_clis(repo_path: str | None, role: str | None) -> int:
    """Print the agent CLIs (claude, codex, gemini) the config runs by their own name,
    one per line: the ones the Action installs at their pinned versions."""
    from scaffold.action.slot import parse_role
    from scaffold.agent.choice import agents_in_use
    from scaffold.config import load_config
    from scaffold.roles import Role

    cfg = load_config(_workspace(action_env(), repo_path))
    wanted = {parse_role(role)} if role else set(Role)
    names = {
        a.backend.name
        for a in agents_in_use(cfg.agent)
        if a.role in wanted and a.command == (a.backend.program,)
    }
    for name in sorted(names):
        click.echo(name)
    return 0


@action.command(name="event")
@click.option(
    "--state-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Clones and quest files kept between workflow runs (default $RUNNER_TEMP/scaffold-state).",
)
@_guarded
def event(state_dir: str | None) -> int:
    """Handle the workflow's event the way the App would (label, comment, review, ...).

    Needs GITHUB_TOKEN (the workflow's token) in the environment. The quest runs until
    it waits for a person; a `schedule` or `workflow_dispatch` event reconciles instead.
    The token is taken out of the environment into memory at once, and the process is
    made non-dumpable, so no agent it starts can read it.
    """
    import asyncio
    import json
    import os

    from scaffold.cli.serve_cmd import harden_process
    from scaffold.github.action_event import run_event
    from scaffold.server.logs import configure_json_logging

    secrets = harden_process()
    configure_json_logging("INFO", extra_secrets=list(secrets.values()))
    root = Path(state_dir or Path(os.environ.get("RUNNER_TEMP", ".")) / "scaffold-state")
    outcome = asyncio.run(run_event({**os.environ, **secrets}, root))
    write_outputs(action_env().output, {"handled": json.dumps(outcome["handled"])})
    return 0
