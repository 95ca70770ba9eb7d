"""Git adapters: task worktrees and merges, Ward runs, DiagramCheck rules.

Everything here drives the real ``git`` executable through argv lists (never a
shell), so behaviour matches what a person sees with the same git on the same
repository. Importing this package has no side effects.
"""
