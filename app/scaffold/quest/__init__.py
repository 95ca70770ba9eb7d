"""The quest file: the model of one quest, and its crash-safe local store.

model    Quest, TaskRecord and the records they hold (pydantic, frozen)
store    QuestStore and its one QuestWriter: a journal line per commit, snapshots
journal  the store's files read back: snapshot, journal scan and replay, history
"""
