"""The Workspace: everything scaffold does with one repository's git.

:class:`Workspace` puts together the task worktrees (:mod:`scaffold.git.worktrees`),
the commits scaffold makes (:mod:`scaffold.git.commits`) and the merges
(:mod:`scaffold.git.merges`), all on :class:`~scaffold.git.repository.Repository`.
"""

from __future__ import annotations

from scaffold.git.commits import Commits
from scaffold.git.merges import Merges


class Workspace(Commits, Merges):
    """The task worktrees, branches, commits and merges of one repository."""
