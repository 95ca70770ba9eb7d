"""A small blocking MCP client for Streamable HTTP servers that answer with JSON.

What an agent without an MCP SDK does to reach scaffold's ``signal-back`` over HTTP
(the scripted stand-in agent, test helpers): ``initialize``, the ``initialized``
notification, ``tools/list`` / ``tools/call``, and ``DELETE`` of the session at the end.
Standard library only (:mod:`http.client`); one connection per request.
"""

from __future__ import annotations

import contextlib
import http.client
import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

__all__ = ["McpHttpClient", "McpHttpError"]

PROTOCOL_VERSION = "2025-06-18"


class McpHttpError(Exception):
    """The server refused a request (HTTP status) or answered with a JSON-RPC error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class McpHttpClient:
    """``McpHttpClient(url, headers)``; call :meth:`initialize` first."""

    def __init__(self, url: str, headers: Mapping[str, str] | None = None, timeout_s: float = 60.0):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise McpHttpError(f"not an http:// URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or 80
        self.path = parts.path or "/"
        self.headers = dict(headers or {})
        self.timeout_s = timeout_s
        self.session: str | None = None
        self.protocol: str | None = None
        self._next_id = 0

    def _send(self, method: str, body: bytes | None) -> tuple[int, dict[str, str], bytes]:
        headers = {**self.headers, "Accept": "application/json, text/event-stream"}
        if body is not None:
            headers["Content-Type"] = "application/json"
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if self.protocol:
            headers["MCP-Protocol-Version"] = self.protocol
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            conn.request(method, self.path, body=body, headers=headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, {k.lower(): v for k, v in response.getheaders()}, data
        finally:
            conn.close()

    def _post(self, message: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
        status, headers, data = self._send("POST", json.dumps(message).encode())
        if status == 202:
            return None, headers
        if status != 200:
            raise McpHttpError(f"HTTP {status}: {data[:200].decode('utf-8', 'replace')}", status)
        reply = json.loads(data)
        if not isinstance(reply, dict):
            raise McpHttpError("malformed reply")
        if "error" in reply:
            error = reply["error"] if isinstance(reply["error"], dict) else {}
            raise McpHttpError(f"JSON-RPC error {error.get('code')}: {error.get('message')}")
        return reply, headers

    def request(self, method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """One JSON-RPC request; its ``result``."""
        self._next_id += 1
        message = {"jsonrpc": "2.0", "id": self._next_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        reply, headers = self._post(message)
        if reply is None:
            raise McpHttpError(f"no answer to {method}")
        if method == "initialize":
            self.session = headers.get("mcp-session-id")
        result = reply.get("result")
        if not isinstance(result, dict):
            raise McpHttpError("malformed result")
        return result

    def initialize(self, client_name: str = "scaffold-client") -> dict[str, Any]:
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": client_name, "version": "0"},
            },
        )
        self.protocol = str(result.get("protocolVersion") or PROTOCOL_VERSION)
        self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return result

    def list_tools(self) -> list[dict[str, Any]]:
        tools = self.request("tools/list").get("tools")
        return list(tools) if isinstance(tools, list) else []

    def call_tool(self, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
        """The tool's text and whether it is an error."""
        result = self.request("tools/call", {"name": name, "arguments": dict(arguments)})
        content = result.get("content") or []
        texts = [
            c.get("text", "") for c in content if isinstance(c, dict) and c.get("type") == "text"
        ]
        return "\n".join(texts), bool(result.get("isError"))

    def close(self) -> None:
        """End the session (best effort)."""
        if self.session:
            with contextlib.suppress(OSError):
                self._send("DELETE", None)
            self.session = None
