"""signal-back end to end: a real MCP ``signal-back`` from the scripted agent over HTTP."""

from __future__ import annotations

import json
import sys

from repo_builder import MakeProject, codeweaver_done

# Keeps the MCP servers the agent was given (the scripted agent exports them to commands).
_KEEP_CONFIG = "import os; open('mcp.json', 'w').write(os.environ['SCAFFOLD_MCP_SERVERS'])"


def test_a_task_completes_over_the_runs_http_endpoint(make_project: MakeProject) -> None:
    run = codeweaver_done("TASK-1")  # signals through the MCP server of --mcp-config
    run["actions"].insert(0, {"run": [sys.executable, "-c", _KEEP_CONFIG]})
    project = make_project(
        ["One"],
        [run],
        {"slots": 1, "sandbox": {"mode": "off"}},
    )

    result = project.run()

    assert result.exit_code == 0, result.output
    assert project.task("TASK-1").outcome == "merged"
    assert project.merges_of(1) == 1
    server = json.loads(project.git("show", "main:mcp.json"))["scaffold"]
    assert server["type"] == "http"
    assert server["url"].startswith("http://127.0.0.1:")
    assert server["headers"]["Authorization"].startswith("Bearer ")
