"""DiagramCheck: a change whose diagrams lag the code is blocked.

:func:`analyze` reads the real diff between two commits (from their merge
base, like a pull request), compares the old and new Python of every changed
file with :mod:`ast`, and checks that the configured Mermaid diagrams changed
in the same diff and name what was added (and no longer name what was
removed). :mod:`~scaffold.diagramcheck.render` turns the
:class:`Report` into text, JSON, GitHub workflow commands, Markdown or
check-run annotations; :mod:`~scaffold.diagramcheck.generate` drafts the
diagrams from the code.
"""

from __future__ import annotations

from scaffold.diagramcheck.analyzer import analyze, analyze_commits
from scaffold.diagramcheck.findings import Finding, Report
from scaffold.diagramcheck.render import (
    CheckAnnotation,
    check_annotations,
    render_github,
    render_json,
    render_markdown,
    render_text,
)

__all__ = [
    "CheckAnnotation",
    "Finding",
    "Report",
    "analyze",
    "analyze_commits",
    "check_annotations",
    "render_github",
    "render_json",
    "render_markdown",
    "render_text",
]
