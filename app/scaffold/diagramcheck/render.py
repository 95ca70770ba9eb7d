"""A DiagramCheck report as text, JSON, GitHub workflow commands, Markdown or annotations.

All pure functions of a :class:`~scaffold.diagramcheck.findings.Report`: the
command line prints them, the GitHub App posts :func:`render_markdown` as a
check summary or comment and :func:`check_annotations` as check-run annotations.
"""

from __future__ import annotations

import json
from typing import Literal, TypedDict

from scaffold.diagramcheck.findings import Finding, Report

# GitHub caps: 65,535 characters per annotation message and per check summary.
_MAX_MESSAGE = 60_000
_MAX_TITLE = 255
_MAX_DRAFT_LINES = 40


class CheckAnnotation(TypedDict):
    """One check-run annotation, as GitHub's ``output.annotations`` takes it."""

    path: str
    start_line: int
    end_line: int
    annotation_level: Literal["failure", "warning", "notice"]
    title: str
    message: str


def _title(f: Finding) -> str:
    where = f.diagram or "DiagramCheck"
    return f"DiagramCheck: {f.kind} ({where})"[:_MAX_TITLE]


def render_text(report: Report) -> str:
    """For a person at a terminal: one line per finding, with the draft under it."""
    span = f"{report.merge_base[:12]}..{report.head[:12]}"
    if not report.findings:
        checked = ", ".join(report.diagrams_checked) or "no diagram was needed"
        return f"DiagramCheck passed ({span}): diagrams are in sync with the code ({checked})\n"
    failures = len(report.failures)
    lines = [
        f"DiagramCheck blocked ({span}): {failures} problem(s)"
        if failures
        else f"DiagramCheck passed ({span}) with {len(report.warnings)} warning(s)"
    ]
    for f in report.findings:
        tag = "error" if f.blocking else "warning"
        lines.append(f"{f.source}:{f.line}: {tag}: [{f.kind}] {f.message}")
        if len(f.draft) > 1:
            lines += [f"        {d}" for d in f.draft[:_MAX_DRAFT_LINES]]
    return "\n".join(lines) + "\n"


def render_json(report: Report) -> str:
    """The stable JSON document (see :meth:`Report.to_json`)."""
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


def escape_data(value: str) -> str:
    """Escape a workflow command's message: ``%``, CR and LF."""
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    """Escape a workflow command property: as a message, plus ``:`` and ``,``."""
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def workflow_command(
    command: str, message: str, properties: dict[str, str | int] | None = None
) -> str:
    """``::command k=v,k=v::message`` with GitHub's escaping rules applied."""
    props = ",".join(
        f"{key}={escape_property(str(value))}" for key, value in (properties or {}).items()
    )
    head = f"::{command} {props}" if props else f"::{command}"
    return f"{head}::{escape_data(message)}"


def render_github(report: Report) -> str:
    """GitHub Actions workflow commands: one ``::error`` (or ``::warning``) per finding."""
    lines: list[str] = []
    for f in report.findings:
        message = f.message
        if len(f.draft) > 1:
            message += "\n" + "\n".join(f.draft[:_MAX_DRAFT_LINES])
        lines.append(
            workflow_command(
                "error" if f.blocking else "warning",
                message,
                {"file": f.source, "line": max(f.line, 1), "title": _title(f)},
            )
        )
    if not report.blocking:
        lines.append("DiagramCheck passed: diagrams are in sync with the code")
    return "\n".join(lines) + "\n"


def _md_code(text: str) -> str:
    """Inline code that survives backticks in ``text``."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def render_markdown(report: Report) -> str:
    """A check summary or PR comment: a checklist of what is missing, or a pass line."""
    span = f"{report.merge_base[:12]}..{report.head[:12]}"
    warnings = [f"- {_md_code(f.source)}: {f.message}" for f in report.warnings]
    if not report.blocking:
        checked = ", ".join(_md_code(d) for d in report.diagrams_checked)
        body = [
            "### ✅ DiagramCheck passed",
            "",
            f"The diagrams are in sync with the code ({span})."
            + (f" Checked: {checked}." if checked else " No diagram was affected."),
        ]
        return "\n".join(body + (["", "Warnings:", *warnings] if warnings else [])) + "\n"
    body = [
        "### ❌ DiagramCheck: the diagrams lag the code",
        "",
        f"{len(report.failures)} item(s) to fix in this change ({span}):",
        "",
    ]
    by_diagram: dict[str, list[Finding]] = {}
    for f in report.failures:
        by_diagram.setdefault(f.diagram, []).append(f)
    for diagram, items in by_diagram.items():
        body += [f"**{_md_code(diagram)}**", ""]
        body += [f"- [ ] {f.message} — {_md_code(f'{f.source}:{f.line}')}" for f in items]
        drafts = [line for f in items for line in f.draft]
        if drafts:
            body += [
                "",
                "<details><summary>Draft Mermaid lines</summary>",
                "",
                "```mermaid",
                *drafts[: _MAX_DRAFT_LINES * 4],
                "```",
                "",
                "</details>",
            ]
        body.append("")
    if warnings:
        body += ["Warnings:", *warnings, ""]
    body.append(
        "Update the diagrams, or run `scaffold diagrams generate` for drafts of the "
        "architecture, data model and state diagrams."
    )
    text = "\n".join(body) + "\n"
    return text if len(text) <= _MAX_MESSAGE else text[:_MAX_MESSAGE] + "\n…(truncated)\n"


def check_annotations(report: Report) -> list[CheckAnnotation]:
    """Check-run annotations, one per finding, on the source line that needs the diagram."""
    out: list[CheckAnnotation] = []
    for f in report.findings:
        line = max(f.line, 1)
        message = f.message
        if f.draft:
            message += "\n\n" + "\n".join(f.draft[:_MAX_DRAFT_LINES])
        out.append(
            CheckAnnotation(
                path=f.source or f.diagram,
                start_line=line,
                end_line=line,
                annotation_level="failure" if f.blocking else "warning",
                title=_title(f),
                message=message[:_MAX_MESSAGE],
            )
        )
    return out


def render(report: Report, fmt: str) -> str:
    """``text``, ``json``, ``github`` or ``markdown``."""
    renderers = {"json": render_json, "github": render_github, "markdown": render_markdown}
    return renderers.get(fmt, render_text)(report)
