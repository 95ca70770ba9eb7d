"""A ``scaffold`` command that runs no agent loads no mcp SDK (half a second of imports
each time a person runs ``status``, ``answer`` or ``review``); an agent run's endpoint
loads it when the run starts."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
import scaffold.cli.main, scaffold.runtime.orchestrator, scaffold.server.app
loaded = sorted(m for m in sys.modules if m == "mcp" or m.startswith("mcp."))
print(",".join(loaded))
"""


def test_the_command_line_loads_no_mcp_sdk_until_a_run_starts() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], check=True, capture_output=True, text=True
    ).stdout.strip()
    assert out == ""
    with_run = PROBE.replace("scaffold.server.app", "scaffold.runtime.run_channel as rc")
    with_run = with_run.replace("loaded =", "import scaffold.signal_back.endpoint\nloaded =")
    out = subprocess.run(
        [sys.executable, "-c", with_run], check=True, capture_output=True, text=True
    ).stdout
    assert "mcp.server" in out  # the probe sees the SDK when it is loaded
