"""Edit a Backlog.md task file in place, touching only what changes.

The tool re-serialises a whole file on every write and drops frontmatter keys
it does not know. Scaffold instead replaces just the affected frontmatter
lines (``status:``, ``updated_date:``) and the affected body section, so every
other byte survives, including unknown keys and unknown sections. Each
rewrite is checked by re-parsing the frontmatter (every other key must read
back unchanged) and written atomically.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from pathlib import Path

from scaffold.backlog import sections
from scaffold.backlog.config import load_config, status_key
from scaffold.backlog.format import BacklogTask, load_yaml_mapping, parse_task
from scaffold.backlog.frontmatter import key_spans, split_document
from scaffold.backlog.jsyaml import dump_key_value
from scaffold.errors import BacklogError
from scaffold.fsutil import write_file

# Where a missing key goes: after the first of these that is present (the tool's key order).
_INSERT_AFTER: Mapping[str, tuple[str, ...]] = {
    "updated_date": ("created_date", "reporter", "assignee", "status", "title", "id"),
}


def timestamp(now: dt.datetime | None = None) -> str:
    """The tool's date format: UTC ``YYYY-MM-DD HH:MM``."""
    moment = now or dt.datetime.now(dt.UTC)
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
    return moment.strftime("%Y-%m-%d %H:%M")


def set_frontmatter_values(yaml_text: str, values: Mapping[str, str], path: str) -> str:
    """Replace (or insert) the lines of the given top-level keys; verify nothing else moved."""
    spans = key_spans(yaml_text)
    edits: list[tuple[int, int, str]] = []
    for key, value in values.items():
        line = dump_key_value(key, value)
        if key in spans:
            start, end = spans[key]
            edits.append((start, end, line))
            continue
        anchor = next((a for a in _INSERT_AFTER.get(key, ()) if a in spans), None)
        at = spans[anchor][1] if anchor else max((e for _, e in spans.values()), default=0)
        edits.append((at, at, line))
    out = yaml_text
    for start, end, line in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        out = out[:start] + line + out[end:]
    before = load_yaml_mapping(yaml_text, path)
    if load_yaml_mapping(out, path) != {**before, **values}:
        raise BacklogError(path, "frontmatter could not be rewritten safely; file left unchanged")
    return out


def _check_text(value: str, what: str, path: Path) -> str:
    text = value.replace("\r\n", "\n").strip()
    if not text:
        raise BacklogError(path, f"{what} is empty")
    return text


def _context(path: Path) -> tuple[str, str]:
    """Id prefix (from the file name) and backlog folder of a task file."""
    match = re.match(r"^([A-Za-z]+)-", path.name)
    prefix = match.group(1).lower() if match else "task"
    return prefix, "archive" if path.parent.parent.name == "archive" else path.parent.name


def _configured_status(path: Path, status: str) -> str:
    """``status`` as the backlog's ``config.yml`` spells it; an unknown one is an error."""
    wanted = status.strip()
    if not wanted or "\n" in wanted:
        raise BacklogError(path, f"invalid status {status!r}")
    backlog_dir = path.parent.parent
    if backlog_dir.name == "archive":
        backlog_dir = backlog_dir.parent
    config, _ = load_config(backlog_dir)
    spelled = next((s for s in config.statuses if status_key(s) == status_key(wanted)), None)
    if spelled is None:
        known = ", ".join(repr(s) for s in config.statuses)
        raise BacklogError(path, f"unknown status {wanted!r} (config statuses: {known})")
    return spelled


def _edit_section(body: str, key: str, text: str, *, append: bool) -> str:
    """Replace section ``key`` with ``text``, or add ``text`` to it as a new paragraph."""
    span = sections.find_sections(body, strict=True).get(key)
    if span is None:
        return sections.insert_block(body, key, sections.build_block(key, text))
    old = body[span.content_start : span.content_end]
    if span.marked:
        region = f"{old.rstrip()}\n\n{text}\n" if append and old.strip() else f"{text}\n"
        return body[: span.content_start] + region + body[span.content_end :]
    combined = f"{old.strip()}\n\n{text}" if append and old.strip() else text
    return body[: span.start] + sections.build_block(key, combined) + body[span.end :]


def given(text: str | None) -> str | None:
    """``text`` when it holds more than white space, else None: a blank note or summary
    is left out of :func:`update_task` (which refuses one) rather than failing the edit."""
    return text if text is not None and text.strip() else None


def update_task(
    path: Path,
    *,
    status: str | None = None,
    notes: str | None = None,
    summary: str | None = None,
    now: dt.datetime | None = None,
) -> BacklogTask:
    """Set the status, add a paragraph to the Implementation Notes and replace the Final
    Summary (sections are created where the tool would put them), bump ``updated_date``:
    one atomic edit that leaves every other byte as it was."""
    values = {"status": _configured_status(path, status)} if status is not None else {}
    notes_text = _check_text(notes, "implementation notes", path) if notes is not None else None
    summary_text = _check_text(summary, "final summary", path) if summary is not None else None
    where = str(path)
    try:
        original = path.read_bytes()
        raw = original.decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BacklogError(path, f"cannot read: {exc}") from exc
    prefix, folder = _context(path)
    parse_task(raw, path, prefix=prefix, folder=folder)
    doc = split_document(raw, where)
    new_yaml = set_frontmatter_values(doc.yaml, {**values, "updated_date": timestamp(now)}, where)
    body = doc.body
    if notes_text is not None:
        body = _edit_section(body, sections.NOTES, notes_text, append=True)
    if summary_text is not None:
        body = _edit_section(body, sections.FINAL_SUMMARY, summary_text, append=False)
    text = doc.text[: doc.yaml_start] + new_yaml + doc.text[doc.yaml_end : doc.body_start] + body
    content = doc.render(text)
    updated = parse_task(content, path, prefix=prefix, folder=folder)
    try:
        unchanged = path.read_bytes() == original
    except OSError:
        unchanged = False
    if not unchanged:
        # Someone (an agent, the CLI) wrote in between: do not clobber their change.
        raise BacklogError(path, "the file changed while scaffold was editing it; try again")
    try:
        write_file(path, content.encode("utf-8"), mode=path.stat().st_mode & 0o7777)
    except OSError as exc:
        raise BacklogError(path, f"cannot write: {exc.strerror or exc}") from exc
    return updated
