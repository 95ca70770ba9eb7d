"""One agent run: the invocation scaffold builds, and what its outcome says.

Pure helpers; the orchestrator does the I/O. Every agent gets the agent contract (the
README's "The agent contract"); Claude Code also gets the options of :mod:`scaffold.agent.claude`,
with the role's instructions as its system prompt and the run's data as the prompt.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from scaffold.agent import claude
from scaffold.agent.process import AgentRunOutcome
from scaffold.agent.stream import SystemInit
from scaffold.config import ScaffoldConfig
from scaffold.quest.model import AgentRun
from scaffold.runtime.prompts import PromptData, build_prompt, role_instructions, run_context
from scaffold.signal_back.tools import SERVER_NAME


@dataclass(frozen=True)
class Invocation:
    argv: list[str]
    env: dict[str, str]


def build_invocation(
    cfg: ScaffoldConfig,
    run: AgentRun,
    data: PromptData,
    *,
    quest_id: str,
    signal_dir: Path,
    config_path: Path,
) -> Invocation:
    """The agent's argv and environment; ``config_path`` is the run channel's MCP config."""
    role = run.role
    command = list(cfg.agent.command)
    env = {
        "SCAFFOLD_QUEST_ID": quest_id,
        "SCAFFOLD_STEP_ID": data.step_id,
        "SCAFFOLD_ROLE": role.value,
        "SCAFFOLD_SIGNAL_DIR": str(signal_dir),
    }
    is_claude = claude.is_claude(command)
    prompt = run_context(run, data) if is_claude else build_prompt(role, run, data)
    argv = [
        *command,
        "-p",
        prompt,
        "--output-format",
        "stream-json",
        "--verbose",
        "--mcp-config",
        str(config_path),
    ]
    if run.resume_session:
        argv += ["--resume", run.resume_session]
    if is_claude:
        argv += claude.claude_args(
            role,
            role_instructions(role, data.step_id),
            model=cfg.agent.model,
            max_turns=cfg.agent.max_turns,
        )
        env.update(claude.claude_env())
    argv += list(cfg.agent.extra_args)
    return Invocation(argv, env)


def init_problem(event: SystemInit) -> str | None:
    """An agent whose ``scaffold`` MCP server is not connected cannot signal: a failed start."""
    for server in event.mcp_servers:
        if server.name == SERVER_NAME:
            if server.status == "connected":
                return None
            return f"failed start: MCP server {SERVER_NAME!r} is {server.status!r}, not connected"
    return f"failed start: MCP server {SERVER_NAME!r} is missing from the agent's init event"


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


def resume_lost(outcome: AgentRunOutcome, resumed: bool) -> bool:
    """``--resume`` named a session the agent cannot find: start afresh next time."""
    return resumed and claude.resume_was_lost(outcome.stderr_tail)


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
