"""What the scripted agent prints: stream-json events shaped like Claude Code's, with the
fields scaffold reads."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

MCP_SERVER = "scaffold"
MCP_TOOL = "signal-back"
SIGNAL_TOOL = f"mcp__{MCP_SERVER}__{MCP_TOOL}"
MODEL = "scripted"
_TOOLS = ["Bash", "Edit", "Read", "Write"]


class Stream:
    """Prints stream-json events shaped like Claude Code's (``json``/``text``: the result only)."""

    def __init__(self, out: IO[str], session_id: str, output_format: str = "stream-json") -> None:
        self.out = out
        self.output_format = output_format
        self.session_id = session_id
        self.turns = 1
        self.last_text = ""
        self._tool = 0

    def emit(self, event: Mapping[str, Any]) -> None:
        if self.output_format == "stream-json":
            self.raw(json.dumps(event, separators=(",", ":")))
        elif event.get("type") == "result":  # json: the result object; text: its text
            text = event.get("result", "") if self.output_format == "text" else event
            self.raw(text if isinstance(text, str) else json.dumps(text))

    def raw(self, line: str) -> None:
        self.out.write(line + "\n")
        self.out.flush()

    def init(self, cwd: Path, servers: Mapping[str, str]) -> None:
        tools = _TOOLS + ([SIGNAL_TOOL] if servers.get(MCP_SERVER) == "connected" else [])
        self.emit(
            {
                "type": "system",
                "subtype": "init",
                "cwd": str(cwd),
                "session_id": self.session_id,
                "tools": tools,
                "mcp_servers": [{"name": n, "status": s} for n, s in servers.items()],
                "model": MODEL,
            }
        )

    def _assistant(self, block: dict[str, Any]) -> dict[str, Any]:
        return {
            "type": "assistant",
            "message": {
                "role": "assistant",
                "model": MODEL,
                "content": [block],
                "usage": {"input_tokens": 0, "output_tokens": 0},
            },
            "session_id": self.session_id,
        }

    def text(self, text: str) -> None:
        self.last_text = text
        self.emit(self._assistant({"type": "text", "text": text}))

    def long_line(self, n_bytes: int) -> None:
        """One valid assistant text event exactly ``n_bytes`` long (when it can be)."""
        event = self._assistant({"type": "text", "text": ""})
        skeleton = len(json.dumps(event, separators=(",", ":")))
        event["message"]["content"][0]["text"] = "x" * max(0, n_bytes - skeleton)
        self.emit(event)

    def tool(self, name: str, tool_input: dict[str, Any], result: str, is_error: bool) -> None:
        """A tool_use block, then the user turn carrying its tool_result."""
        self._tool += 1
        self.turns += 1
        tool_id = f"toolu_scripted{self._tool:04d}"
        block = {"type": "tool_use", "id": tool_id, "name": name, "input": tool_input}
        self.emit(self._assistant(block))
        tool_result: dict[str, Any] = {
            "tool_use_id": tool_id,
            "type": "tool_result",
            "content": result,
        }
        if is_error:
            tool_result["is_error"] = True
        content = {"role": "user", "content": [tool_result]}
        self.emit({"type": "user", "message": content, "session_id": self.session_id})

    def result(self, *, cost: float, started: float, is_error: bool, text: str) -> None:
        self.emit(
            {
                "type": "result",
                "subtype": "error_during_execution" if is_error else "success",
                "is_error": is_error,
                "duration_ms": int((time.monotonic() - started) * 1000),
                "num_turns": self.turns,
                "result": text,
                "session_id": self.session_id,
                "total_cost_usd": cost,
                "usage": {"input_tokens": 0, "output_tokens": 0},
                "permission_denials": [],
            }
        )
