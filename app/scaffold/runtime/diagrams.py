"""``scaffold diagram-check``: the diagram rules on the real diff between two commits."""

from __future__ import annotations

from pathlib import Path

from scaffold.config import ScaffoldConfig
from scaffold.git.changes import parse_name_status_z
from scaffold.git.diagram_rules import DiagramPaths, DiagramVerdict, check_diagrams
from scaffold.git.runner import run_git


def diagram_paths(config: ScaffoldConfig) -> DiagramPaths:
    d = config.diagrams
    return DiagramPaths(
        architecture=d.architecture, data_model=d.data_model, states=d.states, roadmap=d.roadmap
    )


def run_diagram_check(repo: Path, config: ScaffoldConfig, base: str, head: str) -> DiagramVerdict:
    out = run_git(["diff", "--name-status", "-z", "-M", f"{base}...{head}", "--"], cwd=repo)
    return check_diagrams(parse_name_status_z(out.stdout), diagram_paths(config))
