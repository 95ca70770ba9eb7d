"""Git adapters: the repository's branches, task worktrees, hand-off commits, merges.

``workspace.Workspace`` is the one entry point; ``repository``, ``worktrees``,
``commits`` and ``merges`` each hold one concept of it, ``index_file`` scaffold's saved
indexes, ``runner`` the one way git is started. Everything drives the real ``git``
executable through argv lists (never a shell), so behaviour matches what a person sees
with the same git on the same repository. Importing this package has no side effects.
"""
