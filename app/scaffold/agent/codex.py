"""The Codex backend: ``codex exec --json``, a ``CODEX_HOME`` per step, and its events.

Codex reads everything from ``$CODEX_HOME/config.toml``, which scaffold writes for each
run into the step's private HOME (so ``codex exec resume`` finds the thread's rollout
there): a custom model provider at ``OPENAI_BASE_URL`` with ``OPENAI_API_KEY`` (the
CLI itself ignores ``OPENAI_BASE_URL``), bounded retries and idle timeout, no plugins,
analytics or endless reconnects (zero outside traffic), the role's sandbox, and
scaffold's ``signal-back`` server over Streamable HTTP, ``required`` (a run whose server
fails exits 1 before its first turn) with its tools approved (``exec`` never asks). The
role's instructions are ``developer_instructions``; the prompt is the run's data.

Codex has no turn limit and reports tokens, not dollars: :class:`CodexParser` counts
model turns and passes ``max_turns`` as a :class:`ResultEvent` with
``turn_limit_passed``, and makes a resumed run's usage its own (the CLI's is the
thread's running total).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import astuple
from pathlib import Path
from typing import ClassVar

from scaffold.agent.backend import Backend, Invocation, RunRequest
from scaffold.agent.stream import (
    AssistantMessage,
    Event,
    JsonObject,
    LineParser,
    McpServer,
    ResultEvent,
    StreamLineError,
    SystemInit,
    Unknown,
    Usage,
    load_line,
    token_usage,
)
from scaffold.roles import Role
from scaffold.signal_back import SERVER_NAME

__all__ = ["CODEX_DIR", "Codex", "CodexParser", "codex_config", "thread_usage"]

# CODEX_HOME inside the step's private HOME.
CODEX_DIR = ".codex"
# The variable that carries the signal endpoint's bearer secret to the CLI.
SIGNAL_TOKEN_ENV = "SCAFFOLD_SIGNAL_TOKEN"  # noqa: S105 (a name, not a secret)
DEFAULT_BASE_URL = "https://api.openai.com/v1"

# Without scaffold's sandbox, codex's own: builders run commands and write in their
# worktree, planners only read.
ROLE_SANDBOX: Mapping[Role, str] = {
    Role.CHAOSWHISPERER: "read-only",
    Role.PATHSEEKER: "read-only",
    Role.CODEWEAVER: "workspace-write",
    Role.SIEGEMASTER: "workspace-write",
    Role.LAWBRINGER: "workspace-write",
    Role.SPIRITMENDER: "workspace-write",
}

# Items that are the model calling a tool (the rest: its text, reasoning, warnings).
_TOOL_ITEMS = frozenset({"command_execution", "mcp_tool_call", "file_change", "web_search"})


def _toml_str(value: str) -> str:
    """A TOML basic string (JSON's escapes, plus the control characters JSON leaves raw)."""
    quoted = json.dumps(value, ensure_ascii=False)
    return "".join(c if c != "\x7f" else "\\u007f" for c in quoted)


def codex_config(req: RunRequest, base_url: str) -> str:
    """The run's ``config.toml``."""
    # Inside scaffold's sandbox, codex's own (bubblewrap in a user namespace) cannot be
    # made, and is not needed: the role's files and network are confined already.
    sandbox = "danger-full-access" if req.sandboxed else ROLE_SANDBOX[req.role]
    lines = [
        f"model = {_toml_str(req.model or Codex.default_model)}",
        'model_provider = "scaffold"',
        'approval_policy = "never"',
        f"sandbox_mode = {_toml_str(sandbox)}",
        f"developer_instructions = {_toml_str(req.instructions)}",
        "",
        "[model_providers.scaffold]",
        'name = "scaffold"',
        f"base_url = {_toml_str(base_url)}",
        'wire_api = "responses"',
        f"env_key = {_toml_str(Codex.credentials[0])}",
        "request_max_retries = 2",
        "stream_max_retries = 2",
        "stream_idle_timeout_ms = 300000",
        "",
        "[features]",
        "plugins = false",
        "unbounded_connection_retries = false",
        "",
        "[analytics]",
        "enabled = false",
        "",
        f"[mcp_servers.{SERVER_NAME}]",
        f"url = {_toml_str(req.signal_url)}",
        f"bearer_token_env_var = {_toml_str(SIGNAL_TOKEN_ENV)}",
        "required = true",
        "startup_timeout_sec = 60",
        'default_tools_approval_mode = "approve"',
        "",
        # Commands the model runs get no key, token or secret (codex's own filter on
        # names), nor the model's key or the signal's by name.
        "[shell_environment_policy]",
        "ignore_default_excludes = false",
        f"exclude = [{', '.join(_toml_str(n) for n in (*Codex.credentials, SIGNAL_TOKEN_ENV))}]",
        "",
    ]
    return "\n".join(lines)


class Codex(Backend):
    """The OpenAI Codex CLI (``codex exec``)."""

    name = "codex"
    program = "codex"
    default_model = "gpt-5.5"
    base_url_env = "OPENAI_BASE_URL"
    default_host = ("api.openai.com", 443)
    # `required = true` ends the run (exit 1, before any event) when scaffold's server
    # cannot be reached, so a run that prints `thread.started` has it connected: the
    # parser reports it so in the SystemInit it makes of that line.
    reports_mcp_status = True
    resume_lost_markers = ("no rollout found for thread id",)
    credentials: ClassVar[tuple[str, ...]] = ("OPENAI_API_KEY", "CODEX_API_KEY")

    def invocation(self, command: Sequence[str], req: RunRequest) -> Invocation:
        home = req.home / CODEX_DIR
        base_url = req.env.get(self.base_url_env, "").strip() or DEFAULT_BASE_URL
        head = [*command, "exec"]
        if req.resume_session:
            head.append("resume")
        argv = [*head, "--json", "--skip-git-repo-check"]
        if req.model:
            argv += ["-m", req.model]
        argv.append("--")
        if req.resume_session:
            argv.append(req.resume_session)
        argv.append(req.prompt)
        env = {"CODEX_HOME": str(home), SIGNAL_TOKEN_ENV: req.signal_secret}
        files = {home / "config.toml": codex_config(req, base_url)}
        tmp = Path(req.env.get("TMPDIR") or "/tmp")  # noqa: S108
        if not req.sandboxed and home.is_relative_to(tmp):
            # Codex refuses to put its helpers under the temporary folder (and then
            # cannot write files): give the run one of its own, beside CODEX_HOME. (A
            # sandbox has its own TMPDIR, beside the private HOME.)
            own_tmp = req.home / ".tmp"
            env.update({"TMPDIR": str(own_tmp), "TMP": str(own_tmp), "TEMP": str(own_tmp)})
            files[own_tmp / ".keep"] = ""
        return Invocation(argv, env, files)

    def parser(self, req: RunRequest) -> LineParser:
        rollouts = req.home / CODEX_DIR / "sessions"
        before = thread_usage(rollouts, req.resume_session) if req.resume_session else None
        return CodexParser(req.max_turns, before, rollouts)


# --- the rollout: a thread's running token total ----------------------------------


def thread_usage(sessions: Path, thread_id: str | None) -> Usage | None:
    """The thread's token total so far, from the last ``token_count`` of its rollout
    (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-...-<thread>.jsonl``)."""
    found = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl")) if thread_id else []
    if not found:
        return None
    path = found[-1]
    total: Usage | None = None
    try:
        with path.open("rb") as lines:
            for line in lines:
                if b'"token_count"' not in line:
                    continue
                try:
                    payload = json.loads(line).get("payload") or {}
                except ValueError:
                    continue
                info = payload.get("info") if isinstance(payload, dict) else None
                if isinstance(info, dict):
                    total = _usage(info.get("total_token_usage")) or total
    except OSError:
        return None
    return total


def _usage(raw: object) -> Usage | None:
    """Codex's usage: ``input_tokens`` includes the cached ones; reasoning is output."""
    return token_usage(raw, "cached_input_tokens")


def _minus(total: Usage, before: Usage | None) -> Usage:
    if before is None:
        return total
    return Usage(*(max(0, a - b) for a, b in zip(astuple(total), astuple(before), strict=True)))


# --- the event stream -------------------------------------------------------------


class CodexParser:
    """One run's ``codex exec --json`` lines as scaffold's events.

    A model turn is a response of the model: it begins with the first new item after
    the tool calls of the previous one have all finished. (Calls codex runs one after
    the other count as a turn each: the count errs on the side of stopping.) When the
    turns reach ``max_turns`` and the last one's calls are done, the model would be asked
    again: that is a turn too many, and the parser says so.
    """

    def __init__(
        self,
        max_turns: int | None,
        before: Usage | None = None,
        sessions: Path | None = None,
    ) -> None:
        self.max_turns = max_turns
        self.before = before
        self.sessions = sessions
        self.thread_id: str | None = None
        self.turns = 0
        self._seen: set[str] = set()
        self._running: set[str] = set()
        self._new_turn = True
        self._limited = False

    def __call__(self, line: bytes, line_no: int) -> Event:
        data, kind = load_line(line, line_no)
        if kind == "thread.started":
            return self._started(data, line_no)
        if kind in ("item.started", "item.updated", "item.completed"):
            item = data.get("item")
            if type(item) is not dict or type(item.get("type")) is not str:
                raise StreamLineError(line_no, f"{kind} without an item")
            return self._item(kind, item, data)
        if kind == "turn.completed":
            total = _usage(data.get("usage")) or Usage()
            return self._result(data, "success", usage=_minus(total, self.before))
        if kind == "turn.failed":
            error = data.get("error")
            message = error.get("message") if isinstance(error, dict) else None
            return self._result(data, "error_during_execution", str(message or "turn failed"))
        # turn.started, and `error` lines: warnings and retry notices, not failures.
        return Unknown(type=kind, subtype=None, session_id=self.thread_id, raw=data)

    def _started(self, data: JsonObject, line_no: int) -> SystemInit:
        thread = data.get("thread_id")
        if type(thread) is not str:
            raise StreamLineError(line_no, "thread.started without a thread_id")
        self.thread_id = thread
        return SystemInit(thread, (McpServer(SERVER_NAME, "connected"),), raw=data)

    def _item(self, kind: str, item: JsonObject, data: JsonObject) -> Event:
        """Counts the model's turns; only its text is an event of its own (tool calls
        and their results are kept for the transcript)."""
        item_id = str(item.get("id", ""))
        item_type = item["type"]
        if item_id not in self._seen and item_type not in ("error", "todo_list"):
            self._seen.add(item_id)
            if self._new_turn:
                self.turns += 1
                self._new_turn = False
        if item_type in _TOOL_ITEMS and kind == "item.started":
            self._running.add(item_id)
        elif item_type in _TOOL_ITEMS and kind == "item.completed":
            self._running.discard(item_id)
            if not self._running:
                self._new_turn = True
                if (
                    self.max_turns is not None
                    and not self._limited
                    and self.turns >= self.max_turns
                ):
                    return self._limit(data)
        elif item_type == "agent_message" and kind == "item.completed":
            text = {"type": "text", "text": str(item.get("text", ""))}
            return AssistantMessage(self.thread_id, (text,), data)
        return Unknown(type=f"item/{item_type}", subtype=None, session_id=self.thread_id, raw=data)

    def _limit(self, data: JsonObject) -> ResultEvent:
        """The turn limit passed: the run's usage so far is in its rollout."""
        self._limited = True
        total = thread_usage(self.sessions, self.thread_id) if self.sessions else None
        usage = _minus(total, self.before) if total is not None else None
        message = f"stopped by scaffold after {self.turns} turns (agent.max_turns)"
        return self._result(data, "error_max_turns", message, usage)

    def _result(
        self, data: JsonObject, subtype: str, result: str | None = None, usage: Usage | None = None
    ) -> ResultEvent:
        return ResultEvent(
            subtype=subtype,
            is_error=subtype != "success",
            num_turns=self.turns,
            session_id=self.thread_id,
            result=result,
            raw=data,
            usage=usage,
            turn_limit_passed=subtype == "error_max_turns",
        )
