"""Paths: gitignore-style globs, which files are Python modules, and their dotted names."""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Sequence


def normalize_path(path: str) -> str:
    """``./docs//x.md`` -> ``docs/x.md``: the form git prints paths in."""
    return "/".join(p for p in path.replace("\\", "/").split("/") if p not in (".", ""))


# A glob's parts, wildcards first (``**/`` before ``**`` before ``*``), and their regexes.
_GLOB_PART = re.compile(r"\*\*/|\*\*|\*|\?|[^*?]+")
_GLOB_REGEX = {"**/": "(?:.*/)?", "**": ".*", "*": "[^/]*", "?": "[^/]"}


@functools.lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    pat = normalize_path(pattern.strip())
    body = _GLOB_PART.sub(lambda m: _GLOB_REGEX.get(m[0]) or re.escape(m[0]), pat)
    # Like .gitignore: a pattern without a slash matches a name at any depth.
    prefix = "" if "/" in pat else "(?:.*/)?"
    return re.compile(f"^{prefix}{body}(?:/.*)?$")


def matches_any(path: str, patterns: Sequence[str]) -> bool:
    """Whether ``path`` (repository-relative) matches one of the globs.

    ``**`` spans folders, ``*`` and ``?`` stay within one; a pattern with no
    ``/`` matches a file or folder name anywhere; a folder pattern covers what
    is inside it.
    """
    norm = normalize_path(path)
    return any(_glob_regex(p).match(norm) for p in patterns if p.strip())


def under_roots(path: str, roots: Sequence[str]) -> str | None:
    """``path`` relative to the first root holding it (``""`` roots hold all); else None."""
    norm = normalize_path(path)
    for r in map(normalize_path, roots):
        if not r:
            return norm
        if norm.startswith(r + "/"):
            return norm[len(r) + 1 :]
    return None if roots else norm


def module_name(path: str, roots: Sequence[str], packages: Collection[str]) -> str | None:
    """The dotted import name of a ``.py`` file, or ``None`` outside the source roots.

    With ``roots`` the name is the path below the root. Without, the name
    climbs the folders that hold an ``__init__.py`` (``packages`` is the set of
    those ``__init__.py`` paths), so ``app/pkg/mod.py`` is ``pkg.mod`` when only
    ``app/pkg`` is a package, and a top-level ``src/`` folder is dropped.
    ``pkg/__init__.py`` names the package ``pkg``.
    """
    rel = under_roots(path, roots)
    if rel is None or not rel.endswith(".py"):
        return None
    names = rel[: -len(".py")].split("/")
    if not roots:  # ``rel`` is the whole path
        folders, names = names[:-1], names[-1:]
        while folders and "/".join([*folders, "__init__.py"]) in packages:
            names.insert(0, folders.pop())
        if len(names) == 1 and folders and folders[-1] != "src" and names[0] != "__init__":
            # A plain folder of scripts: keep the folder so names stay distinct.
            names.insert(0, folders[-1])
    if names and names[-1] == "__init__":
        names = names[:-1]
    if not names or not all(n.isidentifier() for n in names):
        return None
    return ".".join(names)
