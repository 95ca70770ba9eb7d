"""Output formats: text, JSON, GitHub workflow commands, Markdown, check-run annotations."""

from __future__ import annotations

import json

from scaffold.diagramcheck.findings import Finding, Report
from scaffold.diagramcheck.render import (
    check_annotations,
    escape_data,
    escape_property,
    render_github,
    render_json,
    render_markdown,
    render_text,
    workflow_command,
)

SHA_A, SHA_B, SHA_M = "a" * 40, "b" * 40, "c" * 40


def _report(*findings: Finding) -> Report:
    return Report(SHA_A, SHA_B, SHA_M, tuple(findings), ("docs/diagrams/02-architecture.md",))


FAIL = Finding(
    "module-added",
    "docs/diagrams/02-architecture.md",
    "app/pkg/a,b:c.py",
    3,
    "pkg.ab",
    "add module `pkg.ab` to docs/diagrams/02-architecture.md\n100% needed\r",
    draft=('    pkg_ab["pkg.ab"]',),
)
WARN = Finding("python-syntax-error", "", "app/x.py", 2, "app/x.py", "cannot parse", "warning")


def test_escaping_rules() -> None:
    assert escape_data("50% a\r\nb") == "50%25 a%0D%0Ab"
    assert escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert workflow_command("error", "m:s,g", {"file": "x:y", "line": 3}) == (
        "::error file=x%3Ay,line=3::m:s,g"
    )
    assert workflow_command("warning", "plain") == "::warning::plain"


def test_github_format() -> None:
    out = render_github(_report(FAIL, WARN)).splitlines()
    assert out[0] == (
        "::error file=app/pkg/a%2Cb%3Ac.py,line=3,"
        "title=DiagramCheck%3A module-added (docs/diagrams/02-architecture.md)"
        "::add module `pkg.ab` to docs/diagrams/02-architecture.md%0A100%25 needed%0D"
    )
    assert out[1].startswith("::warning file=app/x.py,line=2,")
    assert len(out) == 2  # each command is one line, whatever the message holds
    passed = render_github(_report(WARN))
    assert "DiagramCheck passed" in passed


def test_json_schema() -> None:
    doc = json.loads(render_json(_report(FAIL, WARN)))
    assert set(doc) == {"blocking", "findings", "diagrams_checked", "base", "head", "merge_base"}
    assert doc["blocking"] is True
    assert doc["base"] == SHA_A
    assert doc["head"] == SHA_B
    assert set(doc["findings"][0]) == {
        "kind",
        "diagram",
        "source",
        "line",
        "name",
        "message",
        "level",
        "blocking",
        "draft",
    }
    assert doc["findings"][1]["blocking"] is False
    assert json.loads(render_json(_report()))["blocking"] is False


def test_text_format() -> None:
    text = render_text(_report(FAIL))
    assert text.startswith("DiagramCheck blocked (cccccccccccc..bbbbbbbbbbbb): 1 problem(s)")
    assert "app/pkg/a,b:c.py:3: error: [module-added] add module" in text
    assert render_text(_report()).startswith("DiagramCheck passed")


def test_markdown() -> None:
    md = render_markdown(_report(FAIL, WARN))
    assert "DiagramCheck: the diagrams lag the code" in md
    assert "- [ ] add module `pkg.ab`" in md
    assert '```mermaid\n    pkg_ab["pkg.ab"]\n```' in md
    assert "Warnings:" in md
    ok = render_markdown(_report())
    assert "DiagramCheck passed" in ok
    assert "- [ ]" not in ok


def test_annotations() -> None:
    [fail, warn] = check_annotations(_report(FAIL, WARN))
    assert fail == {
        "path": "app/pkg/a,b:c.py",
        "start_line": 3,
        "end_line": 3,
        "annotation_level": "failure",
        "title": "DiagramCheck: module-added (docs/diagrams/02-architecture.md)",
        "message": FAIL.message + '\n\n    pkg_ab["pkg.ab"]',
    }
    assert warn["annotation_level"] == "warning"
    assert check_annotations(_report()) == []
