"""The tools of one agent run as scaffold serves them: bound, serialised, idempotent.

:class:`RunTools` holds a run's :class:`~scaffold.agent.signal_server.Binding`, its
:class:`~scaffold.agent.signal_server.SignalWriter` and its planning tools, and answers
``tools/list`` and ``tools/call`` for whichever transport carries them (the unix-socket
relay of :mod:`scaffold.agent.signal_relay`, the Streamable HTTP endpoint of
:mod:`scaffold.agent.signal_http`). Every call is checked by the same
:func:`~scaffold.agent.signal_server.handle_call` the stdio server uses.

A retried ``signal-back`` (the same arguments as the last accepted one, e.g. after the
answer was lost on the way back) is answered again without a second write: an agent
that did not hear its acknowledgement and asks again gets it, and the run still holds
one signal.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from scaffold.agent.planning_tools import planning_tools
from scaffold.agent.signal_server import (
    TOOL_NAME,
    Binding,
    SignalWriter,
    ToolOutcome,
    handle_call,
    tool_description,
    tool_input_schema,
)

__all__ = ["RunTools", "tool_specs"]


def tool_specs(binding: Binding) -> list[dict[str, Any]]:
    """The tools of this run: ``signal-back`` and the role's planning tool, if any."""
    specs = [
        {
            "name": TOOL_NAME,
            "description": tool_description(binding),
            "inputSchema": tool_input_schema(binding),
        }
    ]
    for tool in planning_tools(
        binding.role, binding.signal_dir, binding.repo_root, binding.quest_id
    ):
        specs.append(
            {"name": tool.name, "description": tool.description, "inputSchema": tool.input_schema}
        )
    return specs


def _digest(arguments: Mapping[str, Any] | None) -> str:
    canonical = json.dumps(dict(arguments or {}), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class RunTools:
    """One run's tools; ``signalled`` is set once a signal is on disk."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding
        self.writer = SignalWriter(binding)
        self.planning = {
            t.name: t
            for t in planning_tools(
                binding.role, binding.signal_dir, binding.repo_root, binding.quest_id
            )
        }
        self.specs = tool_specs(binding)
        self.signalled = asyncio.Event()
        self._lock = asyncio.Lock()
        self._last: tuple[str, ToolOutcome] | None = None  # the last accepted signal-back

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> ToolOutcome:
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
