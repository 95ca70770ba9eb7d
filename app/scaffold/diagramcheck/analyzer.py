"""DiagramCheck on a repository: read the diff from git, apply the rules, report.

The imperative shell around :mod:`scaffold.diagramcheck.rules`. It resolves
the two commits, diffs the head against their merge base (what a pull request
shows), reads every blob it needs through one ``git cat-file --batch`` process,
and hands plain text to the rules.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from scaffold.diagramcheck import git_diff, python_reader
from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.cache import PARSER_VERSION, ParseCache, cache_file
from scaffold.diagramcheck.findings import Finding, Report
from scaffold.diagramcheck.milestones import BACKLOG_DIRS, BacklogEntry, backlog_kind, read_entry
from scaffold.diagramcheck.paths import matches_any, module_name, normalize_path, under_roots
from scaffold.diagramcheck.rules import (
    DiagramFile,
    DiffInput,
    Side,
    SourceChange,
    invalid_sources,
    judge,
    read_diagram,
    requirements,
)
from scaffold.diagramcheck.settings import CONFIG_FILE, DEFAULTS, DiagramSettings, read_settings
from scaffold.git.runner import run_git

_READ_SUFFIXES = (".py", ".pyi", ".md", ".markdown", ".mmd", ".mermaid")
_SKIP_MODES = (git_diff.SYMLINK_MODE, git_diff.SUBMODULE_MODE)


def diagram_paths(cfg: DiagramSettings) -> tuple[str, ...]:
    """The configured diagram files, normalized, without duplicates."""
    return tuple(
        dict.fromkeys(
            normalize_path(p) for p in (cfg.architecture, cfg.data_model, cfg.states, cfg.roadmap)
        )
    )


def config_at(reader: git_diff.BlobReader, commit: str) -> DiagramSettings:
    """``diagrams`` of ``.github/scaffold.yml`` as committed in ``commit``; defaults if absent.

    Only the ``diagrams`` section is read, without pydantic (the YAML reader loads
    only when the file exists).
    """
    data = reader.read(f"{commit}:{CONFIG_FILE}")
    if data is None:
        return DEFAULTS
    text = git_diff.decode_text(data)
    where = f"{CONFIG_FILE} (at {commit[:12]})"
    return read_settings(text or "", where)


def _python_tree(repo: Path, commit: str) -> dict[str, str]:
    """``path -> blob id`` of every ``.py``/``.pyi`` file of ``commit`` (one ``ls-tree``)."""
    out = run_git(["ls-tree", "-r", "-z", "--full-tree", commit], repo)
    found: dict[str, str] = {}
    for record in out.stdout.split("\0"):
        meta, _, path = record.partition("\t")
        if not path.endswith((".py", ".pyi")):
            continue
        mode, kind, sha = meta.split(" ")
        if kind == "blob" and mode not in _SKIP_MODES:
            found[path] = sha
    return found


def _python_trees(repo: Path, old: str, new: str) -> dict[Side, dict[str, str]]:
    return {"old": _python_tree(repo, old), "new": _python_tree(repo, new)}


def _git_dir_and_trees(repo: Path, old: str, new: str) -> tuple[Path | None, str, str]:
    """The repository's git directory and the tree ids of two commits (one ``rev-parse``)."""
    out = run_git(
        ["rev-parse", "--git-common-dir", f"{old}^{{tree}}", f"{new}^{{tree}}"], repo, check=False
    )
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) != 3:
        return None, "", ""
    path = Path(lines[0])
    return (path if path.is_absolute() else repo / path), lines[1], lines[2]


def _resolve_both(
    repo: Path, base: str, head: str
) -> tuple[str, str, tuple[Path, dict[str, str]], str | None] | None:
    """Both commits, the git directory, the commits' trees and their merge base, from one
    ``rev-parse`` (:func:`~scaffold.diagramcheck.git_diff.rev_parse_args`); ``None`` when that is not
    plainly so (then each is resolved on its own, with its own error). The merge base is
    ``None`` when ``rev-parse`` does not name exactly one (no common history, or several:
    ``git merge-base`` then decides)."""
    git_diff.check_ref(base)
    git_diff.check_ref(head)
    out = run_git(git_diff.rev_parse_args(base, head), repo, check=False)
    found = git_diff.parse_rev_parse(out.stdout, out.returncode, str(repo))
    if found is None:
        return None
    trees = {found.base: found.base_tree, found.head: found.head_tree}
    return found.base, found.head, (Path(found.git_dir), trees), found.merge_base


def _settings_key(cfg: DiagramSettings) -> str:
    return repr([getattr(cfg, f) for f in _SETTING_FIELDS])


def _wanted(change: git_diff.RawChange) -> bool:
    return change.path.endswith(_READ_SUFFIXES) or change.source_path.endswith(_READ_SUFFIXES)


def _is_py(path: str) -> bool:
    return path.endswith((".py", ".pyi"))


def _left_out(path: str, cfg: DiagramSettings) -> bool:
    return matches_any(path, cfg.ignore) or under_roots(path, cfg.source_roots) is None


def _read_changes(
    reader: git_diff.BlobReader,
    raw: Sequence[git_diff.RawChange],
    cache: ParseCache,
    cfg: DiagramSettings,
) -> list[SourceChange]:
    """The changes the rules read: Python as parsed modules (cached by blob), the rest as text.

    Python the settings leave out (``ignore`` globs, outside the source roots: tests,
    scripts...) is neither read nor parsed; the rules skip it anyway.
    """
    chosen = [c for c in raw if _wanted(c)]
    names: list[str] = []
    py_names: list[str] = []
    infos: dict[str, pm.ModuleInfo | None] = {}
    for c in chosen:
        for blob, mode, path in (
            (c.old_blob, c.old_mode, c.source_path),
            (c.new_blob, c.new_mode, c.path),
        ):
            if not blob or mode in _SKIP_MODES:
                continue
            if not _is_py(path):
                names.append(blob)
            elif not _left_out(path, cfg):
                if (info := cache.get(blob)) is not None:
                    infos[blob] = info
                else:
                    py_names.append(blob)
    fresh = list(dict.fromkeys(b for b in py_names if b not in infos))
    for blob, data in zip(fresh, reader.read_many(fresh), strict=True):
        text = git_diff.decode_text(data) if data is not None else None
        infos[blob] = python_reader.read_module(text) if text is not None else None
        if (found := infos[blob]) is not None:
            cache.put(blob, found)
    unique = list(dict.fromkeys(names))
    blobs = dict(zip(unique, reader.read_many(unique), strict=True))
    texts = {b: git_diff.decode_text(d) if d is not None else None for b, d in blobs.items()}
    out: list[SourceChange] = []
    for c in chosen:
        old_ok = bool(c.old_blob) and c.old_mode not in _SKIP_MODES
        new_ok = bool(c.new_blob) and c.new_mode not in _SKIP_MODES
        old_py = old_ok and _is_py(c.source_path) and (c.old_blob or "") in infos
        new_py = new_ok and _is_py(c.path) and (c.new_blob or "") in infos
        old_info = infos.get(c.old_blob or "") if old_py else None
        new_info = infos.get(c.new_blob or "") if new_py else None
        old_text = texts.get(c.old_blob or "") if old_ok and not old_py else None
        new_text = texts.get(c.new_blob or "") if new_ok and not new_py else None
        old_data = blobs.get(c.old_blob or "") if old_ok and not old_py else None
        new_data = blobs.get(c.new_blob or "") if new_ok and not new_py else None
        out.append(
            SourceChange(
                status=c.status if c.status in "ACDMR" else "M",
                path=c.path,
                old_path=c.old_path,
                old_text=old_text,
                new_text=new_text,
                # A Python blob parsed as None is binary or not UTF-8.
                old_binary=(old_py and old_info is None)
                or (old_data is not None and old_text is None),
                new_binary=(new_py and new_info is None)
                or (new_data is not None and new_text is None),
                old_info=old_info,
                new_info=new_info,
            )
        )
    return out


class _Modules:
    """The repository's modules on both sides of the diff, parsed on demand (and cached)."""

    def __init__(
        self,
        reader: git_diff.BlobReader,
        cache: ParseCache,
        trees: dict[Side, dict[str, str]],
        roots: Sequence[str],
    ) -> None:
        self._reader = reader
        self._cache = cache
        self._trees = trees
        self._roots = roots
        self._names: dict[Side, dict[str, str]] = {}

    def packages(self, side: Side) -> frozenset[str]:
        return frozenset(
            p for p in self._trees[side] if p == "__init__.py" or p.endswith("/__init__.py")
        )

    def _by_name(self, side: Side) -> dict[str, str]:
        names = self._names.get(side)
        if names is None:
            packages = self.packages(side)
            names = {}
            for path in self._trees[side]:
                if path.endswith(".py"):
                    name = module_name(path, self._roots, packages)
                    if name is not None:
                        names.setdefault(name, path)
            self._names[side] = names
        return names

    def lookup(self, side: Side, module: str) -> pm.ModuleInfo | None:
        path = self._by_name(side).get(module)
        if path is None:
            return None
        blob = self._trees[side][path]
        info = self._cache.get(blob)
        if info is None:
            data = self._reader.read(blob)
            text = git_diff.decode_text(data) if data is not None else None
            if text is None:
                return None
            info = python_reader.read_module(text)
            self._cache.put(blob, info)
        return info


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


def _inputs_key(
    cfg: DiagramSettings,
    raw: Sequence[git_diff.RawChange],
    trees: dict[Side, dict[str, str]],
) -> str:
    """A digest of everything :func:`requirements` reads (for a diff without task changes):
    the settings, every change with its blob ids, and the Python files of both sides."""
    h = hashlib.sha1(usedforsecurity=False)
    h.update(repr((PARSER_VERSION, _settings_key(cfg))).encode())
    for c in raw:
        fields = (c.status, c.path, c.old_path, c.old_blob, c.new_blob, c.old_mode, c.new_mode)
        h.update(repr((*fields, c.similarity)).encode("utf-8", "surrogateescape"))
    for side in ("old", "new"):
        h.update(side.encode())
        for path, blob in sorted(trees[side].items()):
            h.update(f"{path}\0{blob}\n".encode("utf-8", "surrogateescape"))
    return h.hexdigest()


_SETTING_FIELDS = (
    "architecture",
    "data_model",
    "states",
    "roadmap",
    "source_roots",
    "ignore",
    "data_model_sources",
    "state_enum_suffixes",
)


def _read_diagrams(
    reader: git_diff.BlobReader, head_sha: str, paths: Sequence[str]
) -> tuple[dict[str, str | None], dict[str, str]]:
    """The text of the configured diagrams at the head, and their blob ids."""
    texts: dict[str, str | None] = {}
    ids: dict[str, str] = {}
    names = [f"{head_sha}:{p}" for p in paths]
    for path, found in zip(paths, reader.read_many_ids(names), strict=True):
        text = git_diff.decode_text(found[1]) if found is not None else None
        texts[path] = text
        if found is not None and text is not None:
            ids[path] = found[0]
    return texts, ids


def _index_diagrams(
    diagrams: dict[str, DiagramFile],
    ids: dict[str, str],
    needed: set[str],
    cache: ParseCache,
) -> None:
    """Read the diagrams the change asks something of (or changes), from the cache when
    this very blob was read before."""
    for path in needed & ids.keys():
        key = f"mermaid:{path}:{ids[path]}"
        found = cache.get_diagram(key)
        if found is None:
            found = read_diagram(diagrams[path])
            cache.put_diagram(key, found)
        diagrams[path] = replace(diagrams[path], index=found)


def analyze_commits(
    repo: Path,
    base_sha: str,
    head_sha: str,
    config: DiagramSettings | None = None,
    resolved: tuple[Path, dict[str, str]] | None = None,
    known_merge_base: str | None = None,
) -> Report:
    """DiagramCheck between two resolved commits (full ids).

    ``resolved``: the git directory and the trees of commits already asked of git;
    ``known_merge_base``: their merge base, when already asked of git.

    What the diff requires, and the findings, are cached by a digest of the inputs
    (settings, blob ids, the Python files of both sides, the diagrams' blobs): checking
    the same change again (a re-run, the App and the Action on one head) reads no
    Python at all. After a push the digest differs, and only the blobs the push added
    are parsed.
    """
    mb = known_merge_base or git_diff.merge_base(repo, base_sha, head_sha)
    git_dir: Path | None
    if resolved is not None and mb in resolved[1] and head_sha in resolved[1]:
        git_dir, old_tree, new_tree = resolved[0], resolved[1][mb], resolved[1][head_sha]
    else:
        git_dir, old_tree, new_tree = _git_dir_and_trees(repo, mb, head_sha)
    cache = ParseCache(cache_file(git_dir) if git_dir is not None else None)
    with git_diff.BlobReader(repo) as reader:
        cfg = config if config is not None else config_at(reader, head_sha)
        paths = diagram_paths(cfg)
        diagram_texts, diagram_ids = _read_diagrams(reader, head_sha, paths)
        # The report is a function of the settings, the two trees and the diagrams'
        # blobs: the very same check again (a re-run, the App and the Action on one
        # head) is one lookup, with no diff and no Python read.
        report_key = (
            f"report:{_settings_key(cfg)}:{old_tree}:{new_tree}:{sorted(diagram_ids.items())}"
            if old_tree and new_tree
            else None
        )
        done = cache.get_report(report_key) if report_key is not None else None
        if done is not None:
            return Report(
                base=base_sha,
                head=head_sha,
                merge_base=mb,
                findings=tuple(done[0]),
                diagrams_checked=tuple(done[1]),
            )
        raw = git_diff.diff_commits(repo, mb, head_sha)
        changed = frozenset(c.path for c in raw if c.status != "D")
        diagrams = {p: DiagramFile(p, t, changed=p in changed) for p, t in diagram_texts.items()}
        has_python = any(_is_py(c.path) or _is_py(c.source_path) for c in raw)
        tasks_changed = any(backlog_kind(c.path) == "task" for c in raw if c.status != "D")
        trees = _python_trees(repo, mb, head_sha) if has_python else {"old": {}, "new": {}}
        inputs = None if tasks_changed else _inputs_key(cfg, raw, trees)
        key = f"requirements:{inputs}" if inputs is not None else None
        known = cache.get_result(key) if key is not None else None
        # With the requirements known, only Markdown and Mermaid files are read (to
        # report broken Mermaid in them).
        changes = _read_changes(
            reader, [c for c in raw if known is None or not _is_py(c.path)], cache, cfg
        )
        if known is not None:
            reqs, warnings = known
            data = DiffInput(changes=tuple(changes), diagrams=diagrams, changed_paths=changed)
        else:
            head_tasks: tuple[BacklogEntry, ...] = ()
            head_milestones: tuple[BacklogEntry, ...] = ()
            if tasks_changed:
                head_tasks, head_milestones = _backlog_at(repo, reader, head_sha)
            modules = _Modules(reader, cache, trees, cfg.source_roots)
            data = DiffInput(
                changes=tuple(changes),
                diagrams=diagrams,
                packages_old=modules.packages("old"),
                packages_new=modules.packages("new"),
                head_tasks=head_tasks,
                head_milestones=head_milestones,
                changed_paths=changed,
                python_old=frozenset(trees["old"]),
                python_new=frozenset(trees["new"]),
                lookup=modules.lookup if has_python else None,
            )
            reqs, warnings = requirements(data, cfg)
            if key is not None:
                cache.put_result(key, (reqs, warnings))
    needed = {r.diagram for r in reqs} | {p for p, d in diagrams.items() if d.changed}
    _index_diagrams(diagrams, diagram_ids, needed, cache)
    data = replace(data, diagrams=diagrams)
    findings = [*judge(reqs, data), *invalid_sources(changes, cfg), *warnings]
    findings.sort(key=_order)
    checked = {r.diagram for r in reqs} | {p for p, d in diagrams.items() if d.changed}
    report = Report(
        base=base_sha,
        head=head_sha,
        merge_base=mb,
        findings=tuple(findings),
        diagrams_checked=tuple(p for p in paths if p in checked),
    )
    if report_key is not None:
        cache.put_report(report_key, (list(report.findings), list(report.diagrams_checked)))
    cache.save()
    return report


def _order(f: Finding) -> tuple[int, str, str, int, str]:
    return (0 if f.blocking else 1, f.diagram, f.source, f.line, f.name)


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
    both = _resolve_both(repo, base, head)
    if both is None:
        base_sha = git_diff.resolve_commit(repo, base)
        head_sha = git_diff.resolve_commit(repo, head)
        return analyze_commits(repo, base_sha, head_sha, config)
    return analyze_commits(
        repo, both[0], both[1], config, resolved=both[2], known_merge_base=both[3]
    )
