"""DiagramCheck on a repository: read the diff from git, apply the rules, report.

The imperative shell around :mod:`scaffold.diagramcheck.rules`. It resolves
the two commits, diffs the head against their merge base (what a pull request
shows), reads the blobs it needs in batches (``git cat-file --batch``), and hands
plain text to the rules.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from scaffold.diagramcheck import git_diff, python_reader
from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.findings import Report
from scaffold.diagramcheck.milestones import BACKLOG_DIRS, BacklogEntry, backlog_kind, read_entry
from scaffold.diagramcheck.paths import module_name
from scaffold.diagramcheck.rules.judge import invalid_sources, judge, requirements
from scaffold.diagramcheck.rules.model import DiagramFile, DiffInput, Side, SourceChange, is_python
from scaffold.diagramcheck.settings import (
    CONFIG_FILE,
    DEFAULTS,
    DiagramSettings,
    diagram_paths,
    read_settings,
)
from scaffold.git.changes import FileChange

_READ = (".py", ".pyi", ".md", ".markdown", ".mmd", ".mermaid")
_SKIP_MODES = (git_diff.SYMLINK_MODE, git_diff.SUBMODULE_MODE)


def config_at(repo: Path, commit: str) -> DiagramSettings:
    """``diagrams`` of ``.github/scaffold.yml`` as committed in ``commit``; defaults if absent."""
    [data] = git_diff.read_blobs(repo, [f"{commit}:{CONFIG_FILE}"])
    if data is None:
        return DEFAULTS
    where = f"{CONFIG_FILE} (at {commit[:12]})"
    return read_settings(git_diff.decode_text(data) or "", where)


def _read_changes(repo: Path, raw: Sequence[FileChange]) -> list[SourceChange]:
    """The changes the rules read (Python, Markdown, Mermaid), with the text of each side."""

    def wanted(blob: str | None, mode: str) -> str | None:
        return blob if blob and mode not in _SKIP_MODES else None

    chosen = [c for c in raw if c.path.endswith(_READ) or c.source_path.endswith(_READ)]
    sides = [(wanted(c.old_blob, c.old_mode), wanted(c.new_blob, c.new_mode)) for c in chosen]
    unique = list(dict.fromkeys(b for pair in sides for b in pair if b))
    blobs = dict(zip(unique, git_diff.read_blobs(repo, unique), strict=True))
    out: list[SourceChange] = []
    for c, (old, new) in zip(chosen, sides, strict=True):
        old_data = blobs[old] if old else None
        new_data = blobs[new] if new else None
        old_text, new_text = git_diff.decode_text(old_data), git_diff.decode_text(new_data)
        out.append(
            SourceChange(
                status=c.status if c.status in "ACDMR" else "M",
                path=c.path,
                old_path=c.old_path,
                old_text=old_text,
                new_text=new_text,
                old_binary=old_data is not None and old_text is None,
                new_binary=new_data is not None and new_text is None,
            )
        )
    return out


def _module_lookup(
    repo: Path,
    trees: dict[Side, dict[str, str]],
    packages: dict[Side, frozenset[str]],
    roots: Sequence[str],
) -> Callable[[Side, str], pm.ModuleInfo | None]:
    """A module of the repository by dotted name on one side, read and parsed when asked
    for (every file of that side is named on the first question)."""
    names: dict[Side, dict[str, str]] = {}

    def lookup(side: Side, module: str) -> pm.ModuleInfo | None:
        if side not in names:
            names[side] = {}
            for path in trees[side]:
                if (name := module_name(path, roots, packages[side])) is not None:
                    names[side].setdefault(name, path)
        found = names[side].get(module)
        if found is None:
            return None
        text = git_diff.decode_text(git_diff.read_blobs(repo, [trees[side][found]])[0])
        return python_reader.read_module(text) if text is not None else None

    return lookup


def _backlog_at(
    repo: Path, commit: str
) -> tuple[tuple[BacklogEntry, ...], tuple[BacklogEntry, ...]]:
    prefixes = [f"{d}/{sub}" for d in BACKLOG_DIRS for sub in ("tasks", "completed", "milestones")]
    files = git_diff.list_tree(repo, commit, prefixes)
    data = git_diff.read_blobs(repo, [sha for _, sha in files])
    tasks: list[BacklogEntry] = []
    milestones: list[BacklogEntry] = []
    for (path, _), blob in zip(files, data, strict=True):
        kind = backlog_kind(path)
        entry = read_entry(path, git_diff.decode_text(blob)) if kind else None
        if entry is None:
            continue
        (milestones if kind == "milestone" else tasks).append(entry)
    return tuple(tasks), tuple(milestones)


def analyze_commits(
    repo: Path, base_sha: str, head_sha: str, config: DiagramSettings | None = None
) -> Report:
    """DiagramCheck between two resolved commits (full ids)."""
    mb = git_diff.merge_base(repo, base_sha, head_sha)
    raw = git_diff.diff_commits(repo, mb, head_sha)
    changed = frozenset(c.path for c in raw if c.status != "D")
    trees: dict[Side, dict[str, str]] = {"old": {}, "new": {}}
    if any(is_python(c.path) or is_python(c.source_path) for c in raw):
        for side, commit in zip(trees, (mb, head_sha), strict=True):
            tree = git_diff.list_tree(repo, commit, ())
            trees[side] = {p: sha for p, sha in tree if is_python(p)}
    cfg = config if config is not None else config_at(repo, head_sha)
    paths = diagram_paths(cfg)
    texts = git_diff.read_blobs(repo, [f"{head_sha}:{p}" for p in paths])
    diagrams = {
        p: DiagramFile(p, git_diff.decode_text(data), changed=p in changed)
        for p, data in zip(paths, texts, strict=True)
    }
    changes = _read_changes(repo, raw)
    tasks_changed = any(backlog_kind(c.path) == "task" for c in raw if c.status != "D")
    head_tasks, head_milestones = _backlog_at(repo, head_sha) if tasks_changed else ((), ())
    packages: dict[Side, frozenset[str]] = {
        side: frozenset(p for p in files if p == "__init__.py" or p.endswith("/__init__.py"))
        for side, files in trees.items()
    }
    data = DiffInput(
        changes=tuple(changes),
        diagrams=diagrams,
        packages_old=packages["old"],
        packages_new=packages["new"],
        head_tasks=head_tasks,
        head_milestones=head_milestones,
        python_old=frozenset(trees["old"]),
        python_new=frozenset(trees["new"]),
        lookup=_module_lookup(repo, trees, packages, cfg.source_roots),
    )
    reqs, warnings = requirements(data, cfg)
    findings = [*judge(reqs, data), *invalid_sources(changes, cfg), *warnings]
    findings.sort(key=lambda f: (0 if f.blocking else 1, f.diagram, f.source, f.line, f.name))
    checked = {r.diagram for r in reqs} | {p for p, d in diagrams.items() if d.changed}
    return Report(
        base=base_sha,
        head=head_sha,
        merge_base=mb,
        findings=tuple(findings),
        diagrams_checked=tuple(p for p in paths if p in checked),
    )


def analyze(
    repo: Path,
    base: str,
    head: str = "HEAD",
    config: DiagramSettings | None = None,
) -> Report:
    """DiagramCheck of ``head`` against ``base`` (their merge base, like a pull request).

    ``config`` defaults to ``diagrams`` of ``.github/scaffold.yml`` as committed
    at ``head`` (built-in defaults when the file is absent). Raises
    :class:`~scaffold.errors.UsageError` for a revision that names no commit and
    :class:`~scaffold.errors.ConfigError` for a broken configuration.
    """
    base_sha = git_diff.resolve_commit(repo, base)
    head_sha = git_diff.resolve_commit(repo, head)
    return analyze_commits(repo, base_sha, head_sha, config)
