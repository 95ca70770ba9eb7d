"""The Gemini CLI backend: ``gemini -p`` with stream-json, kept hermetic by its settings.

Each run gets (measured with ``@google/gemini-cli`` 0.61.0):

- a ``settings.json`` in the step's private folder, the CLI's home (``GEMINI_CLI_HOME``,
  where sessions are stored too, so ``--resume`` finds them): API-key auth (the base
  URL alone selects an auth type ``-p`` refuses), no usage statistics, telemetry or
  update checks, one attempt per model request (scaffold retries runs itself), no web
  tools, ``model.maxSessionTurns`` from ``max_turns``, and scaffold's ``signal-back``
  server over Streamable HTTP with the run's bearer secret;
- ``--allowed-mcp-server-names scaffold`` and ``--skip-trust``, which trusts the folder
  only once the settings are loaded, so a repository's own ``.gemini/settings.json``
  cannot replace scaffold's server; ``-m`` always (without it a router model picks);
- ``yolo`` approval mode for builders, ``default`` (read-only tools) for planners;
- the role's instructions and the run's data as one ``-p`` text: ``GEMINI_SYSTEM_MD``
  would replace the CLI's whole system prompt, which teaches the model its tools. A
  resumed run gets only the run's data.

The ``init`` event has no MCP status, and a server that fails to connect leaves the run
going without the tool, so ``reports_mcp_status`` is False: such a run cannot signal,
and an exit without an accepted signal is a crash, retried.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from scaffold.agent.backend import Backend, Invocation, RunRequest
from scaffold.agent.stream import (
    AssistantMessage,
    Event,
    JsonObject,
    LineParser,
    ResultEvent,
    SystemInit,
    Unknown,
    UserMessage,
    load_line,
    token_usage,
)
from scaffold.roles import Role
from scaffold.signal_back import SERVER_NAME

__all__ = ["APPROVAL_MODES", "Gemini", "GeminiParser", "settings"]

# ``yolo`` declares the shell and edit tools and runs them without a prompt; in
# ``default``, ``-p`` declares only the read-only tools (files, search). scaffold's MCP
# server is trusted in both, as Claude Code's ROLE_TOOLS give every role signal-back.
APPROVAL_MODES: Mapping[Role, str] = {
    Role.CHAOSWHISPERER: "default",
    Role.PATHSEEKER: "default",
    Role.CODEWEAVER: "yolo",
    Role.SIEGEMASTER: "yolo",
    Role.LAWBRINGER: "yolo",
    Role.SPIRITMENDER: "yolo",
}
# Built-in tools no role gets (Claude Code's roles have no web tools either): the web
# is outside the sandbox, and a search grounds on Google's side at a price.
EXCLUDED_TOOLS = ("google_web_search", "web_fetch")

# How long the CLI waits for scaffold's server (discovery and each call), in ms.
MCP_TIMEOUT_MS = 60_000

# An API error's message quotes Google's error body: ``[API Error: {"error":{"code":500,``.
_API_STATUS = re.compile(r'^\[API Error: .*?"code":\s*(\d{3})\b')

# The result's error type when ``model.maxSessionTurns`` was reached (exit 53).
TURN_LIMIT_ERROR = "FatalTurnLimitedError"


def settings(req: RunRequest) -> JsonObject:
    """The run's ``settings.json``."""
    model: JsonObject = {}
    if req.max_turns:
        model["maxSessionTurns"] = req.max_turns
    return {
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {
            "maxAttempts": 1,
            "enableAutoUpdate": False,
            "enableAutoUpdateNotification": False,
            "checkpointing": {"enabled": False},
            # The CLI's session clean-up (on by default) deletes, at start, sessions past
            # 30 days and any it cannot read; the step's sessions are scaffold's to keep
            # (a question may wait longer) and go with the step's private folder.
            "sessionRetention": {"enabled": False},
        },
        "model": model,
        "tools": {"exclude": list(EXCLUDED_TOOLS)},
        "mcpServers": {
            SERVER_NAME: {
                "httpUrl": req.signal_url,
                "headers": {"Authorization": f"Bearer {req.signal_secret}"},
                "trust": True,
                "timeout": MCP_TIMEOUT_MS,
            }
        },
    }


class Gemini(Backend):
    """The Gemini CLI (``gemini -p --output-format stream-json``)."""

    name = "gemini"
    program = "gemini"
    # Flash: the price scaffold's many short runs want, and tool use good enough for
    # them; ``agent.model: gemini-2.5-pro`` for harder work (both are priced).
    default_model = "gemini-2.5-flash"
    base_url_env = "GOOGLE_GEMINI_BASE_URL"
    credentials = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    default_host = ("generativelanguage.googleapis.com", 443)
    # No MCP status in the init event (see the module's notes).
    reports_mcp_status = False
    resume_lost_markers = ("Error resuming session", "Invalid session identifier")

    def invocation(self, command: Sequence[str], req: RunRequest) -> Invocation:
        prompt = req.prompt if req.resume_session else req.whole_prompt
        argv = [*command, "-p", prompt, "--output-format", "stream-json"]
        if req.model:
            argv += ["-m", req.model]
        if req.resume_session:
            argv += ["--resume", req.resume_session]
        argv += ["--approval-mode", APPROVAL_MODES[req.role], "--skip-trust"]
        argv += ["--allowed-mcp-server-names", SERVER_NAME]
        env = {
            "GEMINI_CLI_HOME": str(req.home),
            # One process instead of a relaunched child: ~1 s and ~140 MB less a run.
            "GEMINI_CLI_NO_RELAUNCH": "true",
            "GEMINI_TELEMETRY_ENABLED": "false",
        }
        path = req.home / ".gemini" / "settings.json"
        text = json.dumps(settings(req), indent=2) + "\n"
        return Invocation(argv, env, {path: text})

    def parser(self, req: RunRequest) -> LineParser:
        return GeminiParser(resuming=req.resume_session is not None)


# --- the stream-json events ---------------------------------------------------------


def _str(d: Mapping[str, Any], key: str) -> str | None:
    v = d.get(key)
    return v if type(v) is str else None


class GeminiParser:
    """One run's stream-json lines to scaffold's events, with the session id of the
    ``init`` event (later events do not repeat it).

    A new session is reported once the model has answered in it (the first answer's
    line becomes the init event): a session whose first request failed is nothing
    ``--resume`` accepts, so a failed run is retried afresh. A resumed run reports its
    session at once, so scaffold can check it is the one it asked for.
    """

    def __init__(self, resuming: bool = False) -> None:
        self.session_id: str | None = None
        self._announced = resuming

    def __call__(self, line: bytes, line_no: int = 0) -> Event:
        data, type_ = load_line(line, line_no)
        if type_ == "init":
            self.session_id = _str(data, "session_id")
            return SystemInit(self._known, raw=data)
        answered = type_ == "tool_use" or (type_ == "message" and data.get("role") == "assistant")
        if answered and not self._announced and self.session_id is not None:
            self._announced = True
            return SystemInit(self.session_id, raw=data)
        if type_ == "message":
            block = ({"type": "text", "text": _str(data, "content") or ""},)
            if data.get("role") == "assistant":
                return AssistantMessage(self._known, block, data)
            return UserMessage(self._known, block, data)
        if type_ == "result":
            return self._result(data)
        # Tool calls and results, ``error`` (a warning: loop detected, turns, invalid
        # stream) and anything newer.
        return Unknown(type=type_, subtype=_str(data, "severity"), session_id=self._known, raw=data)

    @property
    def _known(self) -> str | None:
        """The session id, once it may be reported."""
        return self.session_id if self._announced else None

    def _result(self, data: JsonObject) -> ResultEvent:
        error = data.get("error")
        error = error if isinstance(error, dict) else {}
        failed = data.get("status") != "success"
        if not failed:
            subtype = "success"
        elif _str(error, "type") == TURN_LIMIT_ERROR:
            subtype = "error_max_turns"
        else:
            subtype = "error_during_execution"
        message = _str(error, "message")
        status = _API_STATUS.match(message or "") if failed else None
        return ResultEvent(
            subtype=subtype,
            is_error=failed,
            session_id=self._known,
            api_error_status=int(status.group(1)) if status else None,
            result=message if failed else None,
            raw=data,
            # ``input_tokens`` counts the whole prompt, ``cached`` the part of it read
            # from the context cache.
            usage=token_usage(data.get("stats"), "cached"),
        )
