"""The state branch (``scaffold/state``): every quest as one file in the repository.

document   one quest's file (``quests/<id>.json``, ``quests/done/``) and its bounds
branch     read and write the branch with git plumbing, compare-and-swap on its ref
publisher  when a run publishes (persons' waits, merges, run ends, a timer)
rebuild    open quests rebuilt from the branch on a new server, runner or clone
"""
