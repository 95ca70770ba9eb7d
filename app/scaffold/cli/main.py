"""The ``scaffold`` command line. Errors become exit codes here and nowhere else.

Exit codes: 0 done; 1 a check failed or work ended in failure; 2 usage or
config error; 3 stopped waiting for a person; 4 safety limit.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click

from scaffold import __version__
from scaffold.cli.action_cmds import action
from scaffold.cli.diagram_cmds import diagram_check, diagrams, repo_option
from scaffold.cli.review_cmd import TAKES_FEEDBACK, read_body, request_changes
from scaffold.cli.serve_cmd import serve
from scaffold.config import CONFIG_PATH, DEFAULT_CONFIG_TEXT, ScaffoldConfig, load_config
from scaffold.errors import ScaffoldError, StoreLocked, UnknownQuestion, UnknownTask, UsageError
from scaffold.ids import normalize_task_id, validate_quest_id, validate_question_id
from scaffold.quest.model import Quest, TaskRecord
from scaffold.runtime import inbox
from scaffold.runtime.preflight import (
    NO_COMMITS,
    agent_programs,
    describe_program,
    find_agent,
    has_commits,
    missing_agent,
    require_agent,
    require_commit,
    require_prices,
    scaffold_command,
)
from scaffold.runtime.report import RunReport
from scaffold.runtime.session import (
    find_repo,
    open_active_quests,
    open_or_create_quest,
    quest_store,
    read_all_quests,
    run_quest,
    run_quests,
    state_branch,
    state_root,
)
from scaffold.runtime.status import render_table, status_report
from scaffold.sandbox.settings import resolve_sandbox
from scaffold.state.document import is_finished


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except ScaffoldError as exc:
            click.echo(f"scaffold: {exc}", err=True)
            sys.exit(exc.exit_code)


@click.group(cls=_Group)
@click.version_option(__version__, prog_name="scaffold")
def cli() -> None:
    """scaffold: a Git-native orchestrator for AI coding agents."""


def _repo(path: str | None) -> Path:
    return find_repo(Path(path) if path else Path.cwd())


@cli.command()
@repo_option
def init(repo_path: str | None) -> None:
    """Write .github/scaffold.yml, docs/diagrams/ and a Backlog.md folder where absent."""
    repo = _repo(repo_path)
    made: list[str] = []
    cfg = repo / CONFIG_PATH
    if not cfg.exists():
        cfg.parent.mkdir(parents=True, exist_ok=True)
        cfg.write_text(DEFAULT_CONFIG_TEXT, encoding="utf-8")
        made.append(str(CONFIG_PATH))
    config = load_config(repo)
    for rel in (
        config.diagrams.architecture,
        config.diagrams.data_model,
        config.diagrams.states,
        config.diagrams.roadmap,
    ):
        path = repo / rel
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            title = path.stem.split("-", 1)[-1].replace("-", " ").title()
            path.write_text(f"# {title}\n\n```mermaid\nflowchart TD\n```\n", encoding="utf-8")
            made.append(rel)
    backlog = repo / "backlog"
    if not backlog.exists():
        for sub in ("tasks", "completed", "drafts", "docs", "decisions", "milestones", "archive"):
            (backlog / sub).mkdir(parents=True, exist_ok=True)
        (backlog / "config.yml").write_text(
            f'project_name: "{repo.name}"\ndefault_status: "To Do"\n'
            'statuses: ["To Do", "In Progress", "Done"]\nlabels: []\n'
            'date_format: yyyy-mm-dd\nauto_commit: false\ntask_prefix: "task"\n',
            encoding="utf-8",
        )
        made.append("backlog/")
    click.echo("created: " + ", ".join(made) if made else "nothing to do: already set up")
    click.echo(_next_steps(repo, config))


def _next_steps(repo: Path, config: ScaffoldConfig) -> str:
    """What a person does after ``init``, with the commands as they can type them."""
    me = scaffold_command()
    steps = []
    if not has_commits(repo):
        steps.append("git add -A && git commit -m 'scaffold init'   # scaffold needs a commit")
    if find_agent(config, repo) is None:
        steps.append(f"install the agent: {missing_agent(config, repo)}")
    create = 'backlog task create "Add the parser" --ac "parses the sample"'
    if shutil.which("backlog") is None:
        create = f"npm install -g backlog.md, then: {create}"
    steps += [
        f"{create}   # or write backlog/tasks/task-1 - Add-the-parser.md yourself "
        "(the README shows a task file)",
        f"{me} doctor     # checks git, the agent, the config and the backlog",
        f'{me} run        # works the backlog; or: {me} quest "what you want"',
        f"{me} status     # every task and what it is doing",
    ]
    return "next steps:\n" + "\n".join(f"  {i}. {s}" for i, s in enumerate(steps, 1))


@cli.command()
@repo_option
@click.option("--quest", "quest_id", default=None, help="Which quest to drive.")
def run(repo_path: str | None, quest_id: str | None) -> None:
    """Work every open quest at once (else the backlog) until nothing is left it can do alone."""
    repo, config = _ready_to_run(repo_path)
    if quest_id is not None:
        writers = [open_or_create_quest(repo, quest_id)]
    else:
        writers = open_active_quests(repo)
    if len(writers) == 1:
        report = asyncio.run(run_quest(repo, config, writers[0]))
    else:
        click.echo(
            f"running {len(writers)} quests at once: {', '.join(w.quest.id for w in writers)}"
        )
        report = asyncio.run(run_quests(repo, config, writers))
    _exit_with(report)


@cli.command()
@repo_option
@click.argument("words", nargs=-1, required=True)
def quest(repo_path: str | None, words: tuple[str, ...]) -> None:
    """Start a quest from a request: ChaosWhisperer, PathSeeker, then the tasks.

    `scaffold quest "REQUEST"` starts one; `scaffold quest show QUEST_ID` prints a quest's
    timeline from the state branch (any clone that fetched it)."""
    if len(words) == 2 and words[0] == "show":
        from scaffold.runtime.timeline import quest_timeline

        click.echo(quest_timeline(_repo(repo_path), validate_quest_id(words[1])))
        return
    if words == ("show",):
        raise UsageError("which quest? scaffold quest show QUEST_ID (scaffold status lists them)")
    if len(words) != 1:
        raise UsageError('quote the request: scaffold quest "what you want"')
    request = words[0]
    if not request.strip():
        raise UsageError("the request is empty")
    repo, config = _ready_to_run(repo_path)
    writer = open_or_create_quest(repo, None, request=request)
    click.echo(f"quest {writer.quest.id} started")
    _exit_with(asyncio.run(run_quest(repo, config, writer)))


def _ready_to_run(repo_path: str | None) -> tuple[Path, ScaffoldConfig]:
    repo = _repo(repo_path)
    config = load_config(repo)
    require_commit(repo)
    require_agent(config, repo)
    return repo, config


def _exit_with(report: RunReport) -> NoReturn:
    click.echo(report.reason)
    sys.exit(report.exit_code)


@cli.command()
@repo_option
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def status(repo_path: str | None, as_json: bool) -> None:
    """Every task and quest with its lifecycle state, role, attempts, session and cost."""
    repo = _repo(repo_path)
    report = status_report(repo)
    if as_json:
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        click.echo(render_table(report))


def _find_question(repo: Path, question_id: str, quest_id: str | None) -> str:
    """The quest waiting on ``question_id`` (ids are per quest: ``--quest`` says which)."""
    waiting = [
        q.id
        for q in read_all_quests(repo)
        if (quest_id is None or q.id == quest_id)
        and any(p.id == question_id for p in q.pending_questions())
    ]
    if not waiting:
        raise UnknownQuestion(question_id)
    if len(waiting) > 1:
        raise UsageError(
            f"{question_id} is pending in {' and '.join(waiting)}: say which with "
            f'--quest, e.g. scaffold answer --quest {waiting[-1]} {question_id} "..."'
        )
    return waiting[0]


def _task_of(repo: Path, task_id: str, states: tuple[str, ...]) -> tuple[Quest, TaskRecord]:
    tid = normalize_task_id(task_id)
    for q in read_all_quests(repo):
        task = q.tasks.get(tid)
        if task is not None:
            if task.outcome == "merged":
                raise UsageError(f"{tid} is Done (its pull request was merged); nothing to do")
            if states and task.state.value not in states:
                raise UsageError(f"{tid} is {task.state.value}, not {' or '.join(states)}")
            return q, task
    raise UnknownTask(tid)


@cli.command()
@repo_option
@click.option("--quest", "quest_id", default=None, help="The quest asking (when ids repeat).")
@click.argument("question_id")
@click.argument("text")
def answer(repo_path: str | None, quest_id: str | None, question_id: str, text: str) -> None:
    """Answer an agent's question; its session resumes with the answer."""
    repo = _repo(repo_path)
    validate_question_id(question_id)
    if quest_id is not None:
        validate_quest_id(quest_id)
    if not text.strip():
        raise UsageError("the answer is empty")
    quest_id = _find_question(repo, question_id, quest_id)
    inbox.post(state_root(repo), inbox.make("answer", quest_id, question_id=question_id, text=text))
    click.echo(f"answer to {question_id} recorded; `scaffold run` resumes the session")


def _task_command(f: Callable[..., None]) -> click.Command:
    """A ``scaffold <verb> [--repo PATH] TASK_ID`` command."""
    return cli.command()(repo_option(click.argument("task_id")(f)))


def _task_message(
    kind: str, repo_path: str | None, task_id: str, states: tuple[str, ...], text: str = ""
) -> None:
    repo = _repo(repo_path)
    quest, task = _task_of(repo, task_id, states)
    inbox.post(state_root(repo), inbox.make(kind, quest.id, task_id=task.id, text=text))  # type: ignore[arg-type]
    click.echo(f"{kind} {task.id} recorded; `scaffold run` carries it out")


@_task_command
def approve(repo_path: str | None, task_id: str) -> None:
    """Approve a task's pull request (local forge): it is merged on the next run."""
    _task_message("approve", repo_path, task_id, ("PR_Created",), "cli")


@_task_command
@click.option("--request-changes", "text", default=None, help="What to change (the review body).")
@click.option(
    "--file",
    "text_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="Read the review body from this file.",
)
@click.option(
    "--comment",
    "comments",
    multiple=True,
    metavar="PATH:LINE:TEXT",
    help="An inline comment on a line of the task's diff (repeatable).",
)
def review(
    repo_path: str | None,
    task_id: str,
    text: str | None,
    text_file: str | None,
    comments: tuple[str, ...],
) -> None:
    """Request changes on a task's pull request: its agent resumes with them."""
    repo = _repo(repo_path)
    body = read_body(text, text_file)
    quest, task = _task_of(repo, task_id, TAKES_FEEDBACK)
    click.echo(request_changes(repo, quest.id, task, body, comments))


@_task_command
@click.option("--reason", default="", help="Why, recorded in the task's notes.")
def reject(repo_path: str | None, task_id: str, reason: str) -> None:
    """Close a task's pull request unmerged: the task goes back to To Do."""
    _task_message("reject", repo_path, task_id, ("PR_Created", "Blocked"), reason)


@_task_command
def retry(repo_path: str | None, task_id: str) -> None:
    """Send a Blocked task back to work (counters reset)."""
    _task_message("retry", repo_path, task_id, ("Blocked", "Idle"))


@cli.command()
@repo_option
@click.option("--reason", default="aborted by a person", help="Recorded as the stop reason.")
def abort(repo_path: str | None, reason: str) -> None:
    """Stop the running quests: no new work starts, running agents are stopped."""
    repo = _repo(repo_path)
    running = [q.id for q in read_all_quests(repo) if _is_running(repo, q.id)]
    if not running:
        # An abort queued now would stop the next run the moment it starts.
        raise UsageError(
            "no scaffold run is active; nothing to abort "
            "(`scaffold reject <task>` drops a task that waits for approval)"
        )
    for quest_id in running:
        inbox.post(state_root(repo), inbox.make("abort", quest_id, text=reason))
    click.echo(f"abort sent to the run of {', '.join(running)}")


def _is_running(repo: Path, quest_id: str) -> bool:
    """A run holds its quest's writer lock for as long as it lives."""
    try:
        quest_store(repo).open_writer(quest_id).close()
    except StoreLocked:
        return True
    return False


@cli.command(
    name="signal-server", context_settings={"ignore_unknown_options": True}, add_help_option=False
)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def signal_server(args: tuple[str, ...]) -> None:
    """Serve one step's signal-back over MCP Streamable HTTP, for an agent run by hand."""
    from scaffold.signal_back.cli import main as serve_signals

    sys.exit(serve_signals(list(args)))


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=None,
    help="Build the demo repository here and keep it.",
)
def demo(directory: str | None) -> None:
    """Run a small project end to end with scripted agents (under a minute)."""
    from scaffold.demo.run import run_demo

    sys.exit(run_demo(Path(directory) if directory else None))


@cli.command()
@repo_option
def doctor(repo_path: str | None) -> None:
    """Check git, the agent binary, the config and the backlog."""
    problems = 0

    def report(ok: bool, what: str, detail: str) -> None:
        nonlocal problems
        problems += 0 if ok else 1
        click.echo(f"{'ok ' if ok else 'BAD'}  {what}: {detail}")

    git = shutil.which("git")
    if git:
        version = subprocess.run([git, "--version"], capture_output=True, text=True, check=False)
        report(True, "git", version.stdout.strip())
    else:
        report(False, "git", "not found on PATH")
    try:
        repo = _repo(repo_path)
        commits = has_commits(repo)
        report(commits, "repository", str(repo) if commits else f"{repo}: {NO_COMMITS}")
    except ScaffoldError as exc:
        report(False, "repository", str(exc))
        sys.exit(1)
    try:
        config = load_config(repo)
        report(
            True,
            "config",
            str(repo / CONFIG_PATH)
            if (repo / CONFIG_PATH).exists()
            else "no .github/scaffold.yml: defaults",
        )
    except ScaffoldError as exc:
        report(False, "config", str(exc))
        sys.exit(2)
    for program in agent_programs(config, repo):
        ok = program.found is not None
        report(ok, f"agent {program.backend.name}", describe_program(program, os.environ))
    try:
        require_prices(config, repo)
    except ScaffoldError as exc:
        report(False, "prices", str(exc))
    try:
        # As the local CLI sees it; the App and the Action refuse where this says "off"
        # unless sandbox.mode is off in writing.
        sandbox = resolve_sandbox(config.sandbox, strict=False)
        report(
            sandbox.active or config.sandbox.mode == "off",
            "sandbox",
            sandbox.describe() if sandbox.active else f"agents run WITHOUT one: {sandbox.reason}",
        )
    except ScaffoldError as exc:
        report(False, "sandbox", str(exc))
    from scaffold.runtime.agent_limit import describe_max_agents

    limited, limit = describe_max_agents(os.environ)
    report(limited, "scaffold serve agents", limit)
    branch = state_branch(repo)
    try:
        docs = branch.read()
        open_ids = sorted(q for q, d in docs.items() if not is_finished(d.quest))
        where = "local" if branch.has_local() else "fetched" if branch.tip() else "not created yet"
        report(
            not branch.problems,
            "state",
            f"{branch.branch} ({where}): {len(docs)} quest(s), open: {', '.join(open_ids) or '-'}"
            if not branch.problems
            else "; ".join(f"{branch.branch}:{p.path}: {p.reason}" for p in branch.problems[:5]),
        )
    except ScaffoldError as exc:
        report(False, "state", str(exc))
    rep = status_report(repo)
    report(
        not rep["errors"],
        "backlog",
        f"{len(rep['tasks'])} task(s)"
        if not rep["errors"]
        else "; ".join(f"{e['path']}: {e['reason']}" for e in rep["errors"][:5]),
    )
    sys.exit(1 if problems else 0)


for command in (serve, diagram_check, diagrams, action):
    cli.add_command(command)


def main() -> None:
    cli(prog_name="scaffold")
