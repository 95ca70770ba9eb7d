"""The task dependency graph: cycles, dependency order, readiness.

Pure functions over ids and tasks, no file access, so the scheduler can ask
"what may start now?" on any snapshot and get the same answer every time
(every result is in a fixed id order).

Readiness is scaffold's rule, stricter than the tool's ``isReady``: a task is
ready only when it waits in the default status ("To Do") and every dependency
exists, is unambiguous, is outside any cycle, and is Done (last status, or
moved to ``completed/``).
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scaffold.backlog.config import BacklogConfig
from scaffold.backlog.format import BacklogTask
from scaffold.core import graph as core_graph
from scaffold.errors import InvalidIdError
from scaffold.ids import task_sort_key


@functools.lru_cache(maxsize=16384)  # sorting a few hundred ids, every turn of the loop
def id_order(task_id: str) -> tuple[tuple[int, ...], str]:
    """Sort key: numeric (TASK-2 < TASK-2.1 < TASK-10), then the text."""
    try:
        return task_sort_key(task_id), task_id
    except InvalidIdError:
        return (), task_id


def _successors(edges: Mapping[str, Sequence[str]], node: str) -> list[str]:
    return sorted((d for d in set(edges.get(node, ())) if d in edges), key=id_order)


def _cycle_walk(edges: Mapping[str, Sequence[str]], members: Sequence[str]) -> list[str]:
    """Members in edge order, starting from the smallest id; a closed walk when one exists."""
    order = [members[0]]
    left = set(members[1:])
    while nxt := next((d for d in _successors(edges, order[-1]) if d in left), None):
        order.append(nxt)
        left.discard(nxt)
    return order + [m for m in members if m in left]


def find_cycles(edges: Mapping[str, Sequence[str]]) -> list[list[str]]:
    """Each dependency cycle (a strongly connected component, or a self-loop) once.

    Members are listed along the dependency edges starting from the smallest
    id: ``[A, B, C]`` means A depends on B, B on C, C on A.
    """
    components = core_graph.strongly_connected(
        sorted(edges, key=id_order), lambda node: _successors(edges, node)
    )
    cycles = [
        _cycle_walk(edges, sorted(c, key=id_order))
        for c in components
        if len(c) > 1 or c[0] in edges.get(c[0], ())
    ]
    return sorted(cycles, key=lambda c: id_order(c[0]))


def describe_cycle(cycle: Sequence[str]) -> str:
    """``TASK-1 -> TASK-2 -> TASK-1``, the tool's own notation."""
    return " -> ".join([*cycle, cycle[0]])


@dataclass(frozen=True, slots=True)
class Readiness:
    """Whether a task may start now, and if not, every reason why."""

    task_id: str
    ready: bool
    reasons: list[str] = field(default_factory=list)


def is_done(task: BacklogTask, config: BacklogConfig) -> bool:
    return task.folder == "completed" or config.is_done_status(task.status)


def compute_readiness(
    tasks: Iterable[BacklogTask],
    config: BacklogConfig,
    *,
    ambiguous: Iterable[str] = (),
) -> dict[str, Readiness]:
    """Readiness of each task (first task per id), keyed by id in id order.

    ``ambiguous`` are ids used by more than one file: such a task is never
    ready and never satisfies a dependency.
    """
    by_id = {t.id: t for t in reversed(list(tasks))}  # the first task of each id
    doubtful = set(ambiguous)
    edges = {tid: t.dependencies for tid, t in by_id.items()}
    in_cycle: dict[str, str] = {}
    for cycle in find_cycles(edges):
        for member in cycle:
            in_cycle[member] = describe_cycle(cycle)
    result: dict[str, Readiness] = {}
    for tid in sorted(by_id, key=id_order):
        task = by_id[tid]
        reasons: list[str] = []
        if is_done(task, config):
            reasons.append("already done")
        elif not config.is_default_status(task.status):
            reasons.append(f"status is {task.status!r}, not {config.default_status!r}")
        if tid in doubtful:
            reasons.append(f"id {tid} is used by more than one file")
        if tid in in_cycle:
            reasons.append(f"in dependency cycle {in_cycle[tid]}")
        for dep in task.dependencies:
            target = by_id.get(dep)
            if dep == tid:
                continue  # a self-loop is already reported as a cycle
            if target is None:
                reasons.append(f"depends on {dep}, which does not exist")
            elif dep in in_cycle:
                reasons.append(f"depends on {dep}, which is in dependency cycle {in_cycle[dep]}")
            elif dep in doubtful:
                reasons.append(f"depends on {dep}, whose id is used by more than one file")
            elif not is_done(target, config):
                reasons.append(f"waits for {dep} ({target.status})")
        result[tid] = Readiness(tid, not reasons, reasons)
    return result
