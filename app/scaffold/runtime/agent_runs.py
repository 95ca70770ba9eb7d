"""One agent run: the invocation scaffold builds, and what its outcome says.

Helpers of the orchestrator and the Action's slot: the role's backend
(:mod:`scaffold.agent.choice`) turns the run into its CLI's command line, environment
and settings files (:mod:`scaffold.agent.backend`); the outcome is read the same way
for every backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from scaffold.agent.backend import Backend, Invocation, RunRequest
from scaffold.agent.choice import BACKENDS, RoleAgent, agent_for, run_price
from scaffold.agent.prices import cost_usd
from scaffold.agent.process import AgentRunOutcome
from scaffold.agent.stream import LineParser, SystemInit
from scaffold.config import ScaffoldConfig
from scaffold.fsutil import write_file
from scaffold.quest.model import AgentRun
from scaffold.runtime.prompts import PromptData, build_prompt, role_instructions, run_context
from scaffold.signal_back import SERVER_NAME

# The model keys of every backend; a run keeps only its own backend's.
MODEL_KEYS = frozenset(name for b in BACKENDS.values() for name in b.credentials)


@dataclass(frozen=True)
class PreparedRun:
    """One run made ready: which agent, what it runs, and how its output is read."""

    agent: RoleAgent
    invocation: Invocation
    parse: LineParser

    @property
    def backend(self) -> Backend:
        return self.agent.backend


def prepare_run(
    cfg: ScaffoldConfig,
    run: AgentRun,
    data: PromptData,
    *,
    quest_id: str,
    signal_dir: Path,
    signal: tuple[str, str, Path],
    home: Path,
    env: Mapping[str, str],
    sandboxed: bool = False,
) -> PreparedRun:
    """The run's agent, argv, environment and files. ``signal`` is the run channel's
    endpoint as the agent reaches it: (url, secret, Claude Code MCP config file);
    ``home`` the step's private folder for the CLI's state; ``sandboxed``: the run is in
    scaffold's sandbox."""
    role = run.role
    agent = agent_for(cfg.agent, role)
    url, secret, config_path = signal
    req = RunRequest(
        role=role,
        prompt=run_context(run, data),
        instructions=role_instructions(role, data.step_id),
        whole_prompt=build_prompt(role, run, data),
        model=agent.model,
        max_turns=agent.max_turns,
        resume_session=run.resume_session,
        signal_url=url,
        signal_secret=secret,
        mcp_config_path=config_path,
        home=home,
        env=env,
        sandboxed=sandboxed,
    )
    inv = agent.backend.invocation(agent.command, req)
    step_env = {
        "SCAFFOLD_QUEST_ID": quest_id,
        "SCAFFOLD_STEP_ID": data.step_id,
        "SCAFFOLD_ROLE": role.value,
        "SCAFFOLD_SIGNAL_DIR": str(signal_dir),
    }
    argv = [*inv.argv, *agent.extra_args]
    full = Invocation(argv, {**step_env, **inv.env}, inv.files)
    return PreparedRun(agent, full, agent.backend.parser(req))


def agent_env(base: Mapping[str, str], prepared: PreparedRun) -> dict[str, str]:
    """The agent's environment: ``base`` without other backends' model keys, plus the
    run's own variables."""
    own = set(prepared.backend.credentials)
    foreign = MODEL_KEYS - own
    env = {k: v for k, v in base.items() if k not in foreign}
    env.update(prepared.invocation.env)
    return env


def write_run_files(files: Mapping[Path, str]) -> None:
    """The files a CLI reads at start (its settings), private to the agent's user."""
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        write_file(path, text.encode("utf-8"), mode=0o600, sync=False)


def init_problem(event: SystemInit) -> str | None:
    """An agent whose ``scaffold`` MCP server is not connected cannot signal: a failed start."""
    for server in event.mcp_servers:
        if server.name == SERVER_NAME:
            if server.status == "connected":
                return None
            return f"failed start: MCP server {SERVER_NAME!r} is {server.status!r}, not connected"
    return f"failed start: MCP server {SERVER_NAME!r} is missing from the agent's init event"


def start_problem(prepared: PreparedRun, resumed: str | None, event: SystemInit) -> str | None:
    """Why a run that just started cannot do its work: its ``signal-back`` server is not
    connected (where the CLI reports it), or its resume came back in another session
    (its conversation lost)."""
    if prepared.backend.reports_mcp_status and (problem := init_problem(event)):
        return problem
    if resumed is None or not prepared.backend.verifies_resume or event.session_id == resumed:
        return None
    return (
        f"failed resume: asked {prepared.backend.name} to resume session {resumed}, "
        f"it started {event.session_id or 'no session'}"
    )


def result_notes(outcome: AgentRunOutcome) -> list[str]:
    """What the result event says that a person should find in the task's history."""
    res = outcome.result
    notes: list[str] = []
    if res is None:
        return notes
    if res.subtype == "error_max_turns":
        notes.append(f"the agent hit --max-turns after {res.num_turns} turns")
    elif res.subtype not in ("success", None):
        notes.append(f"the agent ended with {res.subtype}")
    if res.is_error:
        api = f" (API status {res.api_error_status})" if res.api_error_status else ""
        notes.append(f"the agent's result is an error{api}: {(res.result or '')[:300]}")
    if res.permission_denials:
        names = sorted({str(d.get("tool_name", "?")) for d in res.permission_denials})
        notes.append(f"tools denied to the agent: {', '.join(names)}")
    if outcome.summary.malformed_count:
        notes.append(f"{outcome.summary.malformed_count} malformed stream-json line(s)")
    return notes


def describe_failure(
    outcome: AgentRunOutcome,
    refused_start: str | None = None,
    stuck_timeout_s: float | None = None,
) -> str:
    if refused_start:
        return refused_start
    if outcome.stuck:
        limit = f" ({stuck_timeout_s:g}s, agent.stuck_timeout_s)" if stuck_timeout_s else ""
        return (
            f"stuck: no output for the stuck timeout{limit}; process group killed after "
            f"{outcome.duration_s:.1f}s"
        )
    how = (
        f"exited with code {outcome.exit_code}"
        if outcome.exit_code is not None
        else f"killed by signal {outcome.signal}"
    )
    parts = [how, "without an accepted signal-back"]
    res = outcome.result
    if res is not None and res.is_error:
        status = f", API status {res.api_error_status}" if res.api_error_status else ""
        parts.append(f"(result: {res.subtype}{status})")
    tail = outcome.stderr_tail.strip().splitlines()[-3:]
    if tail:
        parts.append("stderr: " + " | ".join(tail))
    if outcome.summary.malformed_count:
        parts.append(f"{outcome.summary.malformed_count} malformed output line(s)")
    return " ".join(parts)


def resume_lost(backend: Backend, outcome: AgentRunOutcome, resumed: bool) -> bool:
    """The resumed session is gone (the CLI says so): start afresh next time."""
    return resumed and backend.resume_lost(outcome.stderr_tail)


def run_cost(cfg: ScaffoldConfig, agent: RoleAgent, outcome: AgentRunOutcome) -> float:
    """The run's dollars: as the CLI reports them, else its tokens at the model's price."""
    reported = outcome.summary.total_cost_usd
    if reported is not None:
        return reported
    res = outcome.result
    price = run_price(cfg.agent, agent)
    if res is None or res.usage is None or price is None:
        return 0.0
    return cost_usd(res.usage, price)


# Once a signal is on disk, how long the agent may take to exit by itself.
SIGNAL_GRACE_S = 5.0


async def watch_signal(signalled: asyncio.Event, stop: asyncio.Event) -> None:
    """After a signal lands, give the agent a grace period to exit, then stop its group.

    The seed's ``needs-role-followup`` kills the agent; a finished agent that lingers is
    stopped the same way. ``stop`` makes ``run_agent`` return a normal outcome, so the
    session id and cost of the run are kept. The caller cancels this once the agent ended.
    """
    await signalled.wait()
    await asyncio.sleep(SIGNAL_GRACE_S)
    stop.set()
