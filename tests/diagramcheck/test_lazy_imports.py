"""``scaffold diagram-check`` starts light: no aiohttp, mcp, pydantic or orchestrator."""

from __future__ import annotations

import pytest
from dcrepo import Repo, modules_loaded

HEAVY = ("aiohttp", "mcp", "pydantic", "scaffold.runtime", "scaffold.github", "scaffold.agent")


def _loaded(repo: Repo, *args: str) -> set[str]:
    """Top-level names of the modules ``scaffold <args>`` imported (``scaffold.<part>``
    for scaffold's own)."""
    return {
        ".".join(m.split(".")[:2]) if m.startswith("scaffold.") else m.split(".")[0]
        for m in modules_loaded(repo.root, *args)
    }


@pytest.mark.parametrize("with_config", [False, True])
def test_diagram_check_loads_no_heavy_module(repo: Repo, with_config: bool) -> None:
    if with_config:
        repo.write(".github/scaffold.yml", "diagrams:\n  ignore: ['gen/**']\nslots: 2\n")
    repo.write("app/pkg/mod.py", "from dataclasses import dataclass\n")
    repo.commit("module")
    loaded = _loaded(repo, "diagram-check", "--base", "HEAD~1")
    assert "scaffold.diagramcheck" in loaded
    assert not loaded & set(HEAVY)


def test_the_actions_diagram_check_loads_no_heavy_module(repo: Repo) -> None:
    repo.write("app/pkg/mod.py", "X = 1\n")
    repo.commit("module")
    loaded = _loaded(repo, "action", "diagram-check", "--base", "HEAD~1", "--format", "text")
    assert "scaffold.action" in loaded
    assert not loaded & set(HEAVY)
