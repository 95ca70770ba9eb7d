"""What a sandboxed process sees of the file system, as data, and the bwrap argv for it.

A :class:`View` is a list of rules, each for one absolute path: ``deny`` (hidden: an
empty read-only tmpfs for a folder, ``/dev/null`` for a file), ``scratch`` (an empty
writable tmpfs that lives as long as the sandbox, e.g. ``/tmp``), ``ro`` or ``rw`` (the
host path bound at the same place, read-only or writable), or ``map`` (another host
path bound there read-only). The most specific rule wins: a rule for ``/a/b`` beats
one for ``/a`` whatever their order. The root is always the host's, read-only, so reads
are refused only where a rule denies them (deny-then-allow) and writes are allowed only
where a rule says ``rw``.

bubblewrap stacks mounts in argument order, so :func:`mount_args` emits the rules
shallow-first: a deeper mount lands on top of a shallower one and the most specific
rule is the one in force. Pure: the caller says which paths exist and are folders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

Access = Literal["deny", "scratch", "ro", "rw", "map"]

__all__ = ["Access", "Rule", "View", "mount_args"]


@dataclass(frozen=True, slots=True)
class Rule:
    path: PurePosixPath
    access: Access
    # ``map`` only: the host folder bound (read-only) at ``path``.
    source: PurePosixPath | None = None


class View:
    """Rules by path; a later rule for the same path replaces the earlier one."""

    def __init__(self) -> None:
        self._rules: dict[PurePosixPath, Rule] = {}

    def _put(self, access: Access, paths: tuple[object, ...], source: object = None) -> View:
        src = PurePosixPath(str(source)) if source is not None else None
        for path in paths:
            p = PurePosixPath(str(path))
            if not p.is_absolute():
                raise ValueError(f"sandbox paths are absolute: {p}")
            self._rules[p] = Rule(p, access, src)
        return self

    def deny(self, *paths: object) -> View:
        return self._put("deny", paths)

    def scratch(self, *paths: object) -> View:
        return self._put("scratch", paths)

    def ro(self, *paths: object) -> View:
        return self._put("ro", paths)

    def rw(self, *paths: object) -> View:
        return self._put("rw", paths)

    def map(self, path: object, source: object) -> View:
        return self._put("map", (path,), source)

    @property
    def rules(self) -> list[Rule]:
        return sorted(self._rules.values(), key=lambda r: (len(r.path.parts), str(r.path)))

    def access(self, path: object) -> Access:
        """What the sandbox may do at ``path``: the rule of its nearest ruled ancestor."""
        p = PurePosixPath(str(path))
        for candidate in (p, *p.parents):
            rule = self._rules.get(candidate)
            if rule is not None:
                return rule.access
        return "ro"


def mount_args(
    view: View,
    *,
    exists: Callable[[str], bool],
    is_dir: Callable[[str], bool],
) -> list[str]:
    """bwrap mount options for ``view`` (after ``--ro-bind / /``).

    Rules for paths that do not exist are dropped, and so is a ``deny`` under another
    ``deny`` (nothing to hide there). ``map`` sources must exist. A hidden folder is
    made read-only last, once the mounts inside it have their mount points.
    """
    args: list[str] = []
    read_only: list[str] = []
    for rule in view.rules:
        path = str(rule.path)
        if rule.access == "map":
            assert rule.source is not None
            args += ["--ro-bind", str(rule.source), path]
            continue
        if not exists(path):
            continue
        if rule.access == "deny":
            if rule.path != rule.path.parent and view.access(rule.path.parent) == "deny":
                continue
            if is_dir(path):
                args += ["--tmpfs", path]
                read_only.append(path)
            else:
                args += ["--ro-bind", "/dev/null", path]
        elif rule.access == "scratch":
            args += ["--tmpfs", path]
        elif rule.access == "ro":
            args += ["--ro-bind", path, path]
        else:
            args += ["--bind", path, path]
    for path in read_only:
        args += ["--remount-ro", path]
    return args
