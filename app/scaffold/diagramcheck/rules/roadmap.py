"""The roadmap diagram: Backlog.md milestones finished or added."""

from __future__ import annotations

from scaffold.diagramcheck.milestones import BacklogEntry, backlog_kind, read_entry
from scaffold.diagramcheck.paths import normalize_path
from scaffold.diagramcheck.rules.model import DiffInput, Requirement, mermaid_id
from scaffold.diagramcheck.settings import DiagramSettings


def milestone_requirements(data: DiffInput, cfg: DiagramSettings) -> list[Requirement]:
    roadmap = normalize_path(cfg.roadmap)
    out: list[Requirement] = []
    reported: set[str] = set()

    def require(kind: str, entry: BacklogEntry, source: str, why: str) -> None:
        key = (entry.id or entry.title or source).lower()
        if key in reported:
            return
        reported.add(key)
        title = entry.title or entry.id or source
        out.append(
            Requirement(
                kind,
                roadmap,
                source,
                1,
                title,
                f"milestone `{title}` ({why})",
                entry.names or (title,),
                match="text",
                draft=(f'    {mermaid_id((entry.id or title).lower())}["{title}"]',),
            )
        )

    changed_tasks: list[tuple[BacklogEntry | None, BacklogEntry]] = []
    for change in data.changes:
        new_kind = backlog_kind(change.path) if change.status != "D" else None
        old_kind = backlog_kind(change.source_path) if change.old_text is not None else None
        if new_kind is None and old_kind is None:
            continue  # not a Backlog.md file: its frontmatter is nobody's milestone
        new = read_entry(change.path, change.new_text)
        old = read_entry(change.source_path, change.old_text)
        if new_kind == "archived-milestone" and old_kind != "archived-milestone" and new:
            require("milestone-completed", new, change.path, "archived")
        elif new_kind == "milestone" and new is not None:
            if new.done and not (old is not None and old.done):
                require("milestone-completed", new, change.path, f"status {new.status}")
            elif old is None and change.status in ("A", "C"):
                require("milestone-added", new, change.path, "new milestone")
        elif new_kind == "task" and new is not None and new.milestone:
            changed_tasks.append((old, new))
    by_name = {n.lower(): m for m in data.head_milestones for n in m.names}
    for old, new in changed_tasks:
        if not new.done or (old is not None and old.done) or new.milestone is None:
            continue
        wanted = new.milestone.lower()
        milestone = by_name.get(wanted)
        keys = {wanted} | ({n.lower() for n in milestone.names} if milestone else set())
        tasks = [t for t in data.head_tasks if t.milestone and t.milestone.lower() in keys]
        if tasks and all(t.done for t in tasks):
            entry = milestone or BacklogEntry(new.path, new.milestone, new.milestone, None, None)
            require("milestone-completed", entry, new.path, f"all {len(tasks)} task(s) are Done")
    return out
