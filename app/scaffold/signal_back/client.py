"""An agent's side of ``signal-back``: the ``mcp`` SDK's Streamable HTTP client.

What the scripted stand-in agent and the tests use to reach a run's endpoint with the
``url`` and ``headers`` of its ``--mcp-config`` entry.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

__all__ = ["call_tool", "connect"]


@asynccontextmanager
async def connect(entry: Mapping[str, Any]) -> AsyncIterator[Client]:
    """An initialised client of the ``{"type": "http", "url", "headers"}`` server ``entry``."""
    headers = {str(k): str(v) for k, v in (entry.get("headers") or {}).items()}
    timeout = httpx2.Timeout(30.0, read=300.0)
    async with httpx2.AsyncClient(headers=headers, timeout=timeout) as http:
        transport = streamable_http_client(str(entry["url"]), http_client=http)
        async with Client(transport, mode="legacy", cache=None) as client:
            yield client


async def call_tool(client: Client, name: str, arguments: Mapping[str, Any]) -> tuple[str, bool]:
    """The tool's text and whether it is an error."""
    result = await client.call_tool(name, dict(arguments), read_timeout_seconds=120)
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    return "\n".join(texts), bool(result.is_error)
