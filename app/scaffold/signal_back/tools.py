"""The tools of one agent run: ``signal-back`` and the role's planning tool, bound and checked.

``signal-back`` is the agent's one way to report. A bad payload, a foreign ``stepId`` or a
signal the role may not send comes back as a tool error the agent can read and correct.
ChaosWhisperer also gets ``write-requirements`` and PathSeeker ``create-tasks``; other
roles are neither offered nor served them. :class:`RunTools` serves one run's calls one
at a time; a retried ``signal-back`` (the same arguments as the last accepted one, e.g.
after the answer was lost) is answered again without a second write.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
from collections.abc import Mapping
from typing import Any, get_args

from mcp import types
from mcp.server import Server, ServerRequestContext

from scaffold import __version__
from scaffold.errors import InvalidIdError, SignalError
from scaffold.ids import normalize_task_id
from scaffold.roles import ALLOWED_SIGNALS, Role
from scaffold.signal_back import SERVER_NAME, plan, requirements
from scaffold.signal_back.planning import (
    CREATE_TASKS_TOOL,
    REQUIREMENTS_TOOL,
    TOOL_ROLES,
    PlanningTool,
    ToolReply,
    input_schema,
)
from scaffold.signal_back.records import Binding, SignalWriter
from scaffold.signals import SIGNAL_TYPES, AnySignal, NeedsRoleFollowup, parse_signal

__all__ = ["SERVER_NAME", "TOOL_NAME", "RunTools", "build_server"]

TOOL_NAME = "signal-back"
_log = logging.getLogger(__name__)


_FIELD_HELP = {
    "summary": "complete: what was accomplished.",
    "progress": "partially-complete: what was done so far.",
    "continuationPoint": "partially-complete: exactly where the next session should pick up.",
    "question": "needs-user-input: the question only a person can answer.",
    "context": "needs-user-input / needs-role-followup: what the reader needs to know.",
    "reason": "needs-role-followup: why the other role must act first.",
    "resume": "needs-role-followup: true = resume this session after the target role is done.",
}
_TARGET_ROLES = list(get_args(NeedsRoleFollowup.model_fields["targetRole"].annotation))
# Each signal's fields after ``signal``, as its model declares them.
_FIELDS = {
    get_args(m.model_fields["signal"].annotation)[0]: list(m.model_fields)[1:]
    for m in get_args(AnySignal)
}


def tool_input_schema(binding: Binding) -> dict[str, Any]:
    """A flat object schema (the Messages API refuses a top-level ``oneOf``).

    Which fields each signal needs is stated in the descriptions and enforced by
    :func:`parse_signal`, whose refusal names the field.
    """
    allowed = [s for s in SIGNAL_TYPES if s in ALLOWED_SIGNALS[binding.role]]
    props: dict[str, Any] = {
        "signal": {"type": "string", "enum": allowed, "description": "Which signal this is."},
        "stepId": {
            "type": "string",
            "description": f"The step you are working on: {binding.step_id!r}.",
        },
    }
    for name, text in _FIELD_HELP.items():
        props[name] = {"type": "boolean" if name == "resume" else "string", "description": text}
    props["targetRole"] = {
        "type": "string",
        "enum": _TARGET_ROLES,
        "description": "needs-role-followup: the role that must act next.",
    }
    return {
        "type": "object",
        "properties": props,
        "required": ["signal", "stepId"],
        "additionalProperties": False,
    }


def tool_description(binding: Binding) -> str:
    allowed = [s for s in SIGNAL_TYPES if s in ALLOWED_SIGNALS[binding.role]]
    lines = [
        f"Report the outcome of step {binding.step_id!r} to the scaffold orchestrator, "
        "then stop working. Call it exactly once when you are done or blocked.",
        f"As {binding.role.display} you may send: {', '.join(allowed)}.",
    ]
    lines += [f"- {s}: {', '.join(_FIELDS[s])}" for s in allowed]
    return "\n".join(lines)


def _same_step(sent: str, bound: str) -> bool:
    if sent == bound:
        return True
    try:
        return normalize_task_id(sent) == normalize_task_id(bound)
    except InvalidIdError:
        return False


def _acknowledgement(sig: AnySignal) -> str:
    head = f"signal received: {sig.signal}. Stop working now"
    if sig.signal == "complete":
        return head + "."
    if sig.signal == "partially-complete":
        return head + "; a new session continues from your continuation point."
    if sig.signal == "needs-user-input":
        return head + "; this session resumes with the person's answer."
    assert isinstance(sig, NeedsRoleFollowup)
    after = "; this session resumes afterwards." if sig.resume else "."
    return head + f"; {sig.target.display} acts next{after}"


def handle_signal(writer: SignalWriter, arguments: Mapping[str, Any] | None) -> ToolReply:
    """Check one ``signal-back`` call and store it if it is acceptable (no MCP types here)."""
    binding = writer.binding
    retry = "Fix it and call signal-back again."
    try:
        sig = parse_signal(dict(arguments or {}), role=binding.role)
    except SignalError as exc:
        return ToolReply(f"signal refused: {exc}. {retry}", True)
    if not _same_step(sig.stepId, binding.step_id):
        text = (
            f"signal refused: stepId: {sig.stepId!r} is not your step; you are working on "
            f"{binding.step_id!r}. Call signal-back again with stepId {binding.step_id!r}."
        )
        return ToolReply(text, True)
    try:
        record = writer.write(sig)
    except OSError as exc:
        _log.error("could not store signal in %s: %s", binding.signal_dir, exc)
        text = (
            f"signal NOT recorded (storage error: {exc.strerror or exc}). Call signal-back again."
        )
        return ToolReply(text, True)
    _log.info("accepted signal %s #%d for %s", sig.signal, record.seq, binding.step_id)
    return ToolReply(_acknowledgement(sig), False, record)


def handle_call(
    binding: Binding,
    writer: SignalWriter,
    planning: Mapping[str, PlanningTool],
    name: str,
    arguments: Mapping[str, Any] | None,
) -> ToolReply:
    """Route one tool call: ``signal-back``, the role's planning tool, or a refusal."""
    if name == TOOL_NAME:
        return handle_signal(writer, arguments)
    if (tool := planning.get(name)) is not None:
        reply = tool.handle(arguments)
        if not reply.is_error:
            _log.info("accepted %s for %s", name, binding.step_id)
        return reply
    if (owner := TOOL_ROLES.get(name)) is not None:
        text = (
            f"tool {name!r} is only for {owner.display}; you are {binding.role.display}. "
            f"Nothing was done. Report with {TOOL_NAME}."
        )
        return ToolReply(text, True)
    if not planning:
        return ToolReply(f"unknown tool {name!r}; the only tool is {TOOL_NAME}", True)
    names = ", ".join([TOOL_NAME, *planning])
    return ToolReply(f"unknown tool {name!r}; your tools are {names}", True)


def planning_tools(binding: Binding) -> dict[str, PlanningTool]:
    """The planning tool of the binding's role, by name: ChaosWhisperer and PathSeeker have one."""
    if binding.role is Role.CHAOSWHISPERER:
        write = functools.partial(requirements.write_requirements_tool, binding.signal_dir)
        schema = input_schema(requirements.RequirementsInput)
        tool = PlanningTool(REQUIREMENTS_TOOL, requirements.DESCRIPTION, schema, write)
    elif binding.role is Role.PATHSEEKER:
        create = functools.partial(
            plan.create_tasks_tool, binding.signal_dir, binding.repo_root, quest_id=binding.quest_id
        )
        tool = PlanningTool(
            CREATE_TASKS_TOOL, plan.DESCRIPTION, input_schema(plan.PlanInput), create
        )
    else:
        return {}
    return {tool.name: tool}


def _digest(arguments: Mapping[str, Any] | None) -> str:
    canonical = json.dumps(dict(arguments or {}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class RunTools:
    """One run's tools; ``signalled`` is set once a signal is on disk."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding
        self.writer = SignalWriter(binding)
        self.planning = planning_tools(binding)
        self.signalled = asyncio.Event()
        self._lock = asyncio.Lock()
        self._last: tuple[str, ToolReply] | None = None  # the last accepted signal-back

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolReply:
        """Answer one call; an accepted signal is durable before this returns."""
        # One call at a time: the durable write and the planning tools are not reentrant.
        async with self._lock:
            digest = _digest(arguments) if name == TOOL_NAME else None
            if digest is not None and self._last is not None and self._last[0] == digest:
                return self._last[1]  # a retry of the accepted call: answered, not rewritten
            outcome = await asyncio.to_thread(
                handle_call, self.binding, self.writer, self.planning, name, arguments
            )
            if outcome.record is not None and digest is not None:
                self._last = (digest, outcome)
        if outcome.record is not None:
            self.signalled.set()
        return outcome


def build_server(tools: RunTools) -> Server[Any]:
    """The ``mcp`` SDK's server answering ``tools/list`` and ``tools/call`` with ``tools``."""
    binding = tools.binding
    signal_back = (TOOL_NAME, tool_description(binding), tool_input_schema(binding))
    planning = [(t.name, t.description, t.input_schema) for t in tools.planning.values()]
    listed = [
        types.Tool(name=name, description=text, input_schema=schema)
        for name, text, schema in [signal_back, *planning]
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        outcome = await tools.call(params.name, params.arguments)
        content = [types.TextContent(type="text", text=outcome.text)]
        return types.CallToolResult(content=content, is_error=outcome.is_error)

    return Server(
        SERVER_NAME, version=__version__, on_list_tools=list_tools, on_call_tool=call_tool
    )
