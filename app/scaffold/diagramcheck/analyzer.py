"""DiagramCheck on a repository: read the diff from git, apply the rules, report.

The imperative shell around :mod:`scaffold.diagramcheck.rules`. It resolves
the two commits, diffs the head against their merge base (what a pull request
shows), reads every blob it needs through one ``git cat-file --batch`` process,
and hands plain text to the rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from scaffold.config import CONFIG_PATH, DiagramsConfig, parse_config
from scaffold.diagramcheck import git_diff
from scaffold.diagramcheck.findings import Finding, Report
from scaffold.diagramcheck.milestones import BACKLOG_DIRS, BacklogEntry, backlog_kind, read_entry
from scaffold.diagramcheck.paths import normalize_path
from scaffold.diagramcheck.rules import (
    DiagramFile,
    DiffInput,
    SourceChange,
    invalid_sources,
    judge,
    requirements,
)
from scaffold.git.runner import run_git

_READ_SUFFIXES = (".py", ".pyi", ".md", ".markdown", ".mmd", ".mermaid")
_SKIP_MODES = (git_diff.SYMLINK_MODE, git_diff.SUBMODULE_MODE)


def diagram_paths(cfg: DiagramsConfig) -> tuple[str, ...]:
    """The configured diagram files, normalized, without duplicates."""
    return tuple(
        dict.fromkeys(
            normalize_path(p) for p in (cfg.architecture, cfg.data_model, cfg.states, cfg.roadmap)
        )
    )


def config_at(reader: git_diff.BlobReader, commit: str) -> DiagramsConfig:
    """``diagrams`` of ``.github/scaffold.yml`` as committed in ``commit``; defaults if absent."""
    data = reader.read(f"{commit}:{CONFIG_PATH.as_posix()}")
    if data is None:
        return DiagramsConfig()
    text = git_diff.decode_text(data)
    where = f"{CONFIG_PATH.as_posix()} (at {commit[:12]})"
    if text is None:
        return parse_config("", where).diagrams
    return parse_config(text, where).diagrams


def _packages(repo: Path, commit: str) -> frozenset[str]:
    out = run_git(["ls-tree", "-r", "-z", "--name-only", "--full-tree", commit], repo)
    return frozenset(
        p for p in out.stdout.split("\0") if p == "__init__.py" or p.endswith("/__init__.py")
    )


def _wanted(change: git_diff.RawChange) -> bool:
    return change.path.endswith(_READ_SUFFIXES) or change.source_path.endswith(_READ_SUFFIXES)


def _read_changes(
    reader: git_diff.BlobReader, raw: Sequence[git_diff.RawChange]
) -> list[SourceChange]:
    chosen = [c for c in raw if _wanted(c)]
    names: list[str] = []
    for c in chosen:
        if c.old_blob and c.old_mode not in _SKIP_MODES:
            names.append(c.old_blob)
        if c.new_blob and c.new_mode not in _SKIP_MODES:
            names.append(c.new_blob)
    unique = list(dict.fromkeys(names))
    blobs = dict(zip(unique, reader.read_many(unique), strict=True))
    out: list[SourceChange] = []
    for c in chosen:
        old_data = blobs.get(c.old_blob) if c.old_blob and c.old_mode not in _SKIP_MODES else None
        new_data = blobs.get(c.new_blob) if c.new_blob and c.new_mode not in _SKIP_MODES else None
        old_text = git_diff.decode_text(old_data) if old_data is not None else None
        new_text = git_diff.decode_text(new_data) if new_data is not None else None
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


def _backlog_at(
    repo: Path, reader: git_diff.BlobReader, commit: str
) -> tuple[tuple[BacklogEntry, ...], tuple[BacklogEntry, ...]]:
    prefixes = [f"{d}/{sub}" for d in BACKLOG_DIRS for sub in ("tasks", "completed", "milestones")]
    files = git_diff.list_tree(repo, commit, prefixes)
    data = reader.read_many([sha for _, sha in files])
    tasks: list[BacklogEntry] = []
    milestones: list[BacklogEntry] = []
    for (path, _), blob in zip(files, data, strict=True):
        text = git_diff.decode_text(blob) if blob is not None else None
        kind = backlog_kind(path)
        entry = read_entry(path, text) if text is not None and kind else None
        if entry is None:
            continue
        (milestones if kind == "milestone" else tasks).append(entry)
    return tuple(tasks), tuple(milestones)


def analyze_commits(
    repo: Path,
    base_sha: str,
    head_sha: str,
    config: DiagramsConfig | None = None,
) -> Report:
    """DiagramCheck between two resolved commits (full ids)."""
    mb = git_diff.merge_base(repo, base_sha, head_sha)
    with git_diff.BlobReader(repo) as reader:
        cfg = config if config is not None else config_at(reader, head_sha)
        raw = git_diff.diff_commits(repo, mb, head_sha)
        changed = frozenset(c.path for c in raw if c.status != "D")
        changes = _read_changes(reader, raw)
        paths = diagram_paths(cfg)
        diagram_blobs = reader.read_many([f"{head_sha}:{p}" for p in paths])
        diagrams: dict[str, DiagramFile] = {}
        for path, blob in zip(paths, diagram_blobs, strict=True):
            text = git_diff.decode_text(blob) if blob is not None else None
            diagrams[path] = DiagramFile(path, text, path in changed)
        has_python = any(c.path.endswith(".py") or c.source_path.endswith(".py") for c in changes)
        tasks_changed = any(backlog_kind(c.path) == "task" for c in changes)
        head_tasks: tuple[BacklogEntry, ...] = ()
        head_milestones: tuple[BacklogEntry, ...] = ()
        if tasks_changed:
            head_tasks, head_milestones = _backlog_at(repo, reader, head_sha)
    data = DiffInput(
        changes=tuple(changes),
        diagrams=diagrams,
        packages_old=_packages(repo, mb) if has_python else frozenset(),
        packages_new=_packages(repo, head_sha) if has_python else frozenset(),
        head_tasks=head_tasks,
        head_milestones=head_milestones,
        changed_paths=changed,
    )
    reqs, warnings = requirements(data, cfg)
    findings = [*judge(reqs, data), *invalid_sources(changes, cfg), *warnings]
    findings.sort(key=_order)
    checked = {r.diagram for r in reqs} | {p for p, d in diagrams.items() if d.changed}
    return Report(
        base=base_sha,
        head=head_sha,
        merge_base=mb,
        findings=tuple(findings),
        diagrams_checked=tuple(p for p in paths if p in checked),
    )


def _order(f: Finding) -> tuple[int, str, str, int, str]:
    return (0 if f.blocking else 1, f.diagram, f.source, f.line, f.name)


def analyze(
    repo: Path,
    base: str,
    head: str = "HEAD",
    config: DiagramsConfig | None = None,
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
