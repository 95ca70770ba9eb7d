"""signal-back: how an agent reports to scaffold, over MCP Streamable HTTP on the run's socket.

records       Binding, and the signal-<seq>.json files: written durably, read back
tools         signal-back and the planning tools of one run (RunTools), as an MCP server
planning      what the planning tools share: problems, durable files, input schemas
requirements  write-requirements: ChaosWhisperer's requirements, and their reader
plan          create-tasks: PathSeeker's plan, created in the backlog once, and its reader
endpoint      SignalEndpoint: the run's tools served by the mcp SDK, behind a per-run secret
client        the agent's side: the mcp SDK's Streamable HTTP client
cli           scaffold signal-server: one binding's tools served by hand
"""

from typing import Any

# What an agent's config names (the server: its tools reach the model as
# ``mcp__scaffold__<tool>``; the path it is served at). Here, not beside the server, so
# writing a config loads no mcp SDK: that loads with the first run's endpoint.
SERVER_NAME = "scaffold"
MCP_PATH = "/mcp"


def mcp_config(url: str, secret: str) -> dict[str, Any]:
    """The ``--mcp-config`` of a run whose tools are served at ``url`` with ``secret``.

    ``alwaysLoad`` makes Claude Code connect before the first turn, so the tool is never
    "not available" under load.
    """
    entry = {
        "type": "http",
        "url": url,
        "headers": {"Authorization": f"Bearer {secret}"},
        "alwaysLoad": True,
    }
    return {"mcpServers": {SERVER_NAME: entry}}
