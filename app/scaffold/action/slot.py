"""One slot on a runner: one agent run for one task, on its branch, pushed back.

:func:`parse_slot_request` checks every input before anything runs. :func:`run_slot`
then does for one agent what the orchestrator does: the agent works on
``scaffold/task-<n>`` in a worktree of its own outside the workspace (nothing other
workflow steps left there is committed), with the role's prompt and the ``scaffold``
MCP server, its environment scrubbed of credentials (the checkout's push credentials
were taken out of ``.git/config`` first, :func:`slot_git.take_origin`). When it
signalled, what it changed is committed and pushed to ``origin``. ``signal.json``,
``transcript.jsonl``, ``outcome.json`` and the Claude Code session go to the output
folder.

Exit code: 0 the agent signalled (whatever it said), 1 it crashed, stalled or its work
could not be pushed. Usage errors raise before the agent starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from scaffold.action import slot_git
from scaffold.action.claude_sessions import (
    check_session_id,
    find_session_file,
    restore_session_file,
)
from scaffold.agent.choice import agent_for
from scaffold.agent.process import AgentRunOutcome, AgentSpec, agent_environment, run_agent
from scaffold.agent.stream import SystemInit
from scaffold.backlog.repository import load_backlog
from scaffold.config import RoleAgentConfig, RoleName, ScaffoldConfig, load_config
from scaffold.errors import ScaffoldError, UsageError
from scaffold.ids import normalize_task_id, validate_quest_id
from scaffold.quest.model import AgentRun
from scaffold.roles import Role
from scaffold.runtime.agent_runs import (
    PreparedRun,
    agent_env,
    describe_failure,
    prepare_run,
    result_notes,
    resume_lost,
    run_cost,
    start_problem,
    watch_signal,
    write_run_files,
)
from scaffold.runtime.prompts import PromptData
from scaffold.runtime.run_channel import RunChannel
from scaffold.sandbox.confinement import Confinement
from scaffold.sandbox.settings import resolve_sandbox
from scaffold.signal_back.records import Binding, SignalRecord, latest_signal

SIGNAL_FILE = "signal.json"
OUTCOME_FILE = "outcome.json"
TRANSCRIPT_FILE = "transcript.jsonl"
SESSION_FILE = "session.jsonl"


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class SlotRequest:
    task_id: str
    run: AgentRun
    quest_id: str
    output_dir: Path
    agent_command: tuple[str, ...] | None = None
    stuck_timeout_s: float | None = None
    session_file: Path | None = None


def parse_agent_command(text: str) -> tuple[str, ...]:
    """A JSON array of strings (an argv, never a shell line)."""
    try:
        value = json.loads(text)
    except ValueError:
        raise UsageError(f"agent-command must be a JSON array of strings, got {text!r}") from None
    if (
        not isinstance(value, list)
        or not value
        or not all(isinstance(a, str) for a in value)
        or not value[0]
    ):
        raise UsageError("agent-command must be a non-empty JSON array of strings")
    return tuple(value)


def parse_role(value: str) -> Role:
    try:
        return Role(value.strip().lower())
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise UsageError(f"unknown role {value!r}; expected one of {names}") from None


def parse_run_spec(text: str | None, role: str | None, resume_session: str | None) -> AgentRun:
    """The run to start: the JSON of an AgentRun, with ``role`` and the session filled in."""
    data: dict[str, Any] = {}
    if text and text.strip():
        try:
            loaded = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"run-spec is not JSON: {exc}") from None
        if not isinstance(loaded, dict):
            raise UsageError("run-spec must be a JSON object (an AgentRun)")
        data = loaded
    if role:
        wanted = parse_role(role).value
        given = data.get("role")
        if given is not None and str(given).strip().lower() != wanted:
            raise UsageError(f"role {wanted!r} contradicts the run spec's role {given!r}")
        data["role"] = wanted
    if "role" not in data:
        raise UsageError("no role: pass --role or a run spec with a role")
    if resume_session:
        data["resume_session"] = resume_session
    try:
        run = AgentRun.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "run-spec"
        raise UsageError(f"bad run spec: {where}: {err['msg']}") from None
    if run.resume_session is not None:
        check_session_id(run.resume_session)
    return run


def parse_slot_request(
    *,
    task_id: str,
    role: str | None,
    run_spec: str | None,
    quest_id: str | None,
    resume_session: str | None,
    agent_command: str | None,
    output_dir: Path,
    stuck_timeout_s: float | None = None,
    session_file: Path | None = None,
) -> SlotRequest:
    tid = normalize_task_id(task_id)
    slot_git.task_branch(tid)
    run = parse_run_spec(run_spec, role, resume_session or None)
    quest = validate_quest_id(quest_id) if quest_id else ""
    command = parse_agent_command(agent_command) if agent_command else None
    if stuck_timeout_s is not None and stuck_timeout_s <= 0:
        raise UsageError("the stuck timeout must be positive")
    if session_file is not None and run.resume_session is None:
        raise UsageError("a session file only makes sense with a session to resume")
    return SlotRequest(
        task_id=tid,
        run=run,
        quest_id=quest,
        output_dir=output_dir,
        agent_command=command,
        stuck_timeout_s=stuck_timeout_s,
        session_file=session_file,
    )


# --------------------------------------------------------------------------- outcome


@dataclass
class SlotResult:
    exit_code: int
    branch: str
    signal: SignalRecord | None
    session_id: str | None
    head_sha: str | None
    output_dir: Path
    outcome: dict[str, Any] = field(default_factory=dict)

    @property
    def signal_type(self) -> str:
        return self.signal.signal.signal if self.signal is not None else ""

    def outputs(self) -> dict[str, str]:
        return {
            "signal": self.signal_type,
            "session-id": self.session_id or "",
            "head-sha": self.head_sha or "",
            "output-dir": str(self.output_dir),
        }

    def summary(self) -> str:
        what = (
            f"signalled `{self.signal_type}`"
            if self.signal is not None
            else f"failed: {self.outcome.get('failure') or 'no signal'}"
        )
        role = self.outcome.get("role", "")
        cost = self.outcome.get("cost_usd") or 0.0
        lines = [
            f"### scaffold slot: {self.outcome.get('task_id', '')} ({role})",
            "",
            f"- The agent {what}.",
            f"- Branch `{self.branch}` at `{(self.head_sha or '')[:12]}`"
            + (" pushed." if self.outcome.get("pushed") else " not pushed."),
            f"- Cost ${cost:.4f}, {self.outcome.get('duration_s', 0.0):.1f}s.",
        ]
        return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- running


def _prepare_output_dir(path: Path, workspace: Path) -> Path:
    out = path.absolute()
    if out.resolve().is_relative_to(workspace.resolve()):
        raise UsageError(f"the output folder {out} must be outside the checkout {workspace}")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UsageError(f"the output folder {out} must be absent or empty")
    out.mkdir(parents=True, exist_ok=True)
    return out


def _config(workspace: Path, request: SlotRequest) -> ScaffoldConfig:
    cfg = load_config(workspace)
    agent = cfg.agent
    if request.agent_command is not None:
        # The workflow's own program runs this slot's role, whatever its backend.
        role: RoleName = request.run.role.value
        own = agent.roles.get(role) or RoleAgentConfig()
        roles = {**agent.roles, role: own.model_copy(update={"command": request.agent_command})}
        agent = agent.model_copy(update={"roles": roles})
    if request.stuck_timeout_s is not None:
        agent = agent.model_copy(update={"stuck_timeout_s": request.stuck_timeout_s})
    return cfg.model_copy(update={"agent": agent})


def _prompt_data(workspace: Path, cfg: ScaffoldConfig, task_id: str) -> PromptData:
    title, description, criteria = "", "", tuple[str, ...]()
    with contextlib.suppress(ScaffoldError, OSError):
        task = load_backlog(workspace).get(task_id)
        if task is not None:
            title, description = task.title, task.description or ""
            criteria = tuple(c.text for c in task.acceptance_criteria)
    diagrams = (cfg.diagrams.architecture, cfg.diagrams.data_model, cfg.diagrams.states)
    return PromptData(
        step_id=task_id,
        task_title=title,
        task_description=description,
        acceptance_criteria=criteria,
        diagrams=diagrams,
    )


async def _play(
    channel: RunChannel,
    prepare: Callable[[RunChannel], PreparedRun],
    resumed: str | None,
    stuck_s: float,
    transcript: IO[str],
) -> tuple[AgentRunOutcome, list[str]]:
    """Run the agent in the channel's worktree; its outcome, and why its start was refused."""
    stop = asyncio.Event()
    refused: list[str] = []
    async with channel:
        prepared = prepare(channel)

        def on_event(ev: Any) -> None:
            transcript.write(json.dumps(ev.raw, ensure_ascii=False) + "\n")
            transcript.flush()
            if isinstance(ev, SystemInit):
                problem = start_problem(prepared, resumed, ev)
                if problem:
                    refused.append(problem)
                    stop.set()

        write_run_files(prepared.invocation.files)
        argv, env = channel.wrap(prepared.invocation.argv, agent_env(channel.env, prepared))
        cwd = channel.confinement.cwd
        spec = AgentSpec(
            argv=argv, cwd=cwd, base_env=env, stuck_timeout_s=stuck_s, parse=prepared.parse
        )
        watcher = asyncio.create_task(watch_signal(channel.signalled, stop))
        try:
            return await run_agent(spec, on_event=on_event, stop_requested=stop), refused
        finally:
            watcher.cancel()


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def run_slot(request: SlotRequest, workspace: Path) -> SlotResult:
    """Run the slot to the end; raises :class:`ScaffoldError` only before the agent starts."""
    out = _prepare_output_dir(request.output_dir, workspace)
    cfg = _config(workspace, request)
    origin = slot_git.take_origin(workspace)
    branch = slot_git.prepare_branch(workspace, request.task_id, origin)
    work = Path(tempfile.mkdtemp(prefix=f"scaffold-{request.task_id.lower()}-", dir=out.parent))
    slot_git.add_worktree(workspace, branch, work)
    try:
        return _run_in_worktree(request, workspace, work, out, cfg, origin, branch)
    finally:
        slot_git.remove_worktree(workspace, work)


def _run_in_worktree(
    request: SlotRequest,
    workspace: Path,
    work: Path,
    out: Path,
    cfg: ScaffoldConfig,
    origin: slot_git.Origin,
    branch: str,
) -> SlotResult:
    run = request.run
    signal_dir = out / "signals"
    signal_dir.mkdir()
    # The Action, like the App, starts no agent without a sandbox unless told in writing.
    sandbox = resolve_sandbox(cfg.sandbox, strict=True, hidden=(out,))
    private = Path(tempfile.mkdtemp(prefix="scaffold-slot-"))
    base_env = agent_environment(os.environ, {})
    # Claude Code's session store: the sandbox's private HOME, else the real one.
    session_env = {**base_env, "HOME": str(private / "home")} if sandbox.active else os.environ
    if request.session_file is not None and run.resume_session is not None:
        restore_session_file(request.session_file, run.resume_session, work)
        if sandbox.active:
            restore_session_file(request.session_file, run.resume_session, work, session_env)
    binding = Binding(signal_dir, request.task_id, run.role, request.quest_id, work)
    confinement = Confinement(
        repo=workspace, cwd=work, private=private, worktree=work, extra_hidden=(out,)
    )
    agent = agent_for(cfg.agent, run.role)
    channel = RunChannel(
        sandbox,
        binding,
        confinement,
        python=sys.executable,
        env=base_env,
        model_host=agent.backend.model_host(base_env),
    )

    def prepare(channel: RunChannel) -> PreparedRun:
        data = _prompt_data(work, cfg, request.task_id)
        return prepare_run(
            cfg,
            run,
            data,
            quest_id=request.quest_id,
            signal_dir=signal_dir,
            signal=channel.signal,
            home=private / "home",
            env=base_env,
            sandboxed=channel.sandbox.active,
        )

    with (out / TRANSCRIPT_FILE).open("w", encoding="utf-8") as transcript:
        play = _play(channel, prepare, run.resume_session, cfg.agent.stuck_timeout_s, transcript)
        outcome, refused = asyncio.run(play)

    signal = None if refused else latest_signal(signal_dir)
    failure = (
        None if signal is not None else describe_failure(outcome, refused[0] if refused else None)
    )
    commit: str | None = None
    pushed = False
    if signal is not None:
        summary = getattr(signal.signal, "summary", signal.signal.signal)
        message = f"{request.task_id} {run.role.value}: {summary}"[:200]
        try:
            commit = slot_git.commit_work(work, message)
            slot_git.push_branch(work, origin, branch)
            pushed = True
        except ScaffoldError as exc:
            failure = f"the agent signalled, but its work was not pushed: {exc}"
    head = slot_git.head_sha(work)
    document: dict[str, Any] = {
        "task_id": request.task_id,
        "quest_id": request.quest_id or None,
        "role": run.role.value,
        "kind": run.kind,
        "branch": branch,
        "signalled": signal is not None,
        "signal": signal.signal.signal if signal is not None else None,
        "exit_code": outcome.exit_code,
        "killed_by_signal": outcome.signal,
        "stuck": outcome.stuck,
        "session_id": outcome.session_id or run.resume_session,
        "resumed": run.resume_session,
        "resume_lost": signal is None
        and resume_lost(agent.backend, outcome, run.resume_session is not None),
        "cost_usd": run_cost(cfg, agent, outcome),
        "duration_s": round(outcome.duration_s, 3),
        "failure": failure,
        "notes": result_notes(outcome),
        "commit": commit,
        "head_sha": head,
        "pushed": pushed,
    }
    if signal is not None:
        _write_json(out / SIGNAL_FILE, signal.model_dump(mode="json"))
    _write_json(out / OUTCOME_FILE, document)
    session_id = document["session_id"]
    if session_id:
        with contextlib.suppress(UsageError, OSError):
            found = find_session_file(session_id, session_env)
            if found is not None:
                shutil.copyfile(found, out / SESSION_FILE)
    code = 0 if signal is not None and pushed else 1
    return SlotResult(code, branch, signal, session_id, head, out, document)
