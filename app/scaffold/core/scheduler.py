"""Which tasks to start now: a pure list scheduler over the quest's task graph.

scaffold runs at most N agents at once (``slots``, default 3). Whenever a slot is
free the runtime asks :func:`schedule` which tasks to start; this module answers
from plain data (no I/O, no clock) so the rule can be tested exhaustively and
benchmarked (``bench/bench_scheduler.py``).

A task is *ready* when it is eligible (its status and lifecycle allow a start,
e.g. status "To Do" and lifecycle Idle), is neither done nor running, and every
dependency is a task of the input that is done. A dependency id missing from the
input means "not ready": scaffold never guesses that an unknown task is finished.
Tasks on a dependency cycle are therefore never ready, and nothing here recurses,
so a cycle (or a chain of thousands of tasks) cannot hang or overflow the stack.

Ready tasks are ordered by, in turn:

1. Effective priority: ``high`` before ``medium`` before ``low``. ``None`` and any
   unknown value count as ``medium`` (Backlog.md leaves priority optional, and an
   unset priority is "normal", not "last"); the comparison ignores case, as the
   Backlog.md CLI does. A task inherits the highest priority of the not-done tasks
   that wait on it, transitively: the prerequisite of a ``high`` task is ``high``
   work, otherwise marking a task ``high`` would not make it finish any sooner.
2. Critical path, longest first: the number of tasks in the longest chain of
   not-done tasks that starts at the task and follows "is depended on by" edges (the
   task itself included). Starting the task that holds up the longest chain first is
   the classic list-scheduling rule (HLFET / "bottom level") and keeps the makespan
   near its lower bound.
3. Number of not-done tasks that depend on it directly, most first: among equally
   long chains, the task that unblocks more work keeps more slots busy.
4. Numeric task id (:func:`scaffold.ids.task_sort_key`), then the id itself, so the
   order is total and does not depend on the order of the input.

Both figures come from one pass over the strongly connected components of the not-done
graph (sinks first); a cycle counts all its members, and only ranks the tasks upstream of it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from scaffold.core.graph import strongly_connected
from scaffold.errors import BacklogError
from scaffold.ids import normalize_task_id, task_sort_key

DEFAULT_SLOTS = 3

# Lower rank starts first. Unknown or missing priority ranks as medium.
PRIORITY_RANK: Mapping[str, int] = MappingProxyType({"high": 0, "medium": 1, "low": 2})
_DEFAULT_RANK = PRIORITY_RANK["medium"]


@dataclass(frozen=True)
class SchedTask:
    """What the scheduler needs to know about one task; ids are normalised (``TASK-2``)
    here, so an invalid one raises InvalidIdError once. ``eligible``: its own state
    allows a start (status To Do, lifecycle Idle)."""

    id: str
    dependencies: tuple[str, ...] = ()
    priority: str | None = None
    done: bool = False
    eligible: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "id", normalize_task_id(self.id))
        deps = tuple(normalize_task_id(d) for d in self.dependencies)
        object.__setattr__(self, "dependencies", deps)


def priority_rank(priority: str | None) -> int:
    """0 for high, 1 for medium, missing or unknown, 2 for low (case-insensitive)."""
    return PRIORITY_RANK.get((priority or "").strip().lower(), _DEFAULT_RANK)


def critical_path_lengths(tasks: Iterable[SchedTask]) -> dict[str, int]:
    """Number of tasks in the longest chain of not-done tasks starting at each task (done: 0)."""
    return _Graph.build(tasks).analyse()[0]


def effective_priority_ranks(tasks: Iterable[SchedTask]) -> dict[str, int]:
    """Rank (see :func:`priority_rank`) after inheriting from dependants (rule 1 above)."""
    return _Graph.build(tasks).analyse()[1]


def ready_tasks(tasks: Iterable[SchedTask], running: Collection[str] = ()) -> list[str]:
    """Ids of the ready tasks (see the module docstring), in numeric id order."""
    graph = _Graph.build(tasks)
    return sorted(graph.ready(_normalize_running(running)), key=_id_key)


def rank_ready(tasks: Iterable[SchedTask], running: Collection[str] = ()) -> list[str]:
    """Every ready task, best first; :func:`schedule` takes a prefix of this."""
    graph = _Graph.build(tasks)
    ready = graph.ready(_normalize_running(running))
    if not ready:
        return []
    cp, ranks = graph.analyse()

    def key(task_id: str) -> tuple[int, int, int, tuple[int, ...], str]:
        fan_out = len(graph.dependants[task_id])
        return (ranks[task_id], -cp[task_id], -fan_out, *_id_key(task_id))

    return sorted(ready, key=key)


def schedule(
    tasks: Iterable[SchedTask],
    running: Collection[str] = (),
    slots: int = DEFAULT_SLOTS,
) -> list[str]:
    """Ids of the tasks to start now, best first, at most the number of free slots.

    ``running`` holds the ids currently occupying a slot (tasks absent from
    ``tasks`` still count). Free slots are ``slots - len(running)``, never
    negative; ``slots <= 0`` therefore starts nothing.
    """
    running_ids = _normalize_running(running)
    free = slots - len(running_ids)
    if free <= 0:
        return []
    return rank_ready(tasks, running_ids)[:free]


def _normalize_running(running: Collection[str]) -> frozenset[str]:
    return frozenset(normalize_task_id(r) for r in running)


def _id_key(task_id: str) -> tuple[tuple[int, ...], str]:
    return (task_sort_key(task_id), task_id)


@dataclass(frozen=True)
class _Graph:
    """The input indexed once: tasks by id, and dependants of each not-done task."""

    by_id: Mapping[str, SchedTask]
    # Edges among not-done tasks only: dependency -> tasks that depend on it.
    dependants: Mapping[str, Sequence[str]]

    @classmethod
    def build(cls, tasks: Iterable[SchedTask]) -> _Graph:
        by_id: dict[str, SchedTask] = {}
        for task in tasks:
            if task.id in by_id:
                raise BacklogError("task graph", f"duplicate task id {task.id}")
            by_id[task.id] = task
        dependants: dict[str, list[str]] = {tid: [] for tid, t in by_id.items() if not t.done}
        for task in by_id.values():
            if task.done:
                continue
            # dict.fromkeys: drop repeated dependencies, keep a stable order.
            for dep in dict.fromkeys(task.dependencies):
                if dep in dependants:
                    dependants[dep].append(task.id)
        return cls(by_id=by_id, dependants=dependants)

    def ready(self, running: frozenset[str]) -> list[str]:
        by_id = self.by_id
        out: list[str] = []
        for task in by_id.values():
            if task.done or not task.eligible or task.id in running:
                continue
            if all(dep in by_id and by_id[dep].done for dep in task.dependencies):
                out.append(task.id)
        return out

    def analyse(self) -> tuple[dict[str, int], dict[str, int]]:
        """Critical-path length and inherited priority rank of every task, in one pass."""
        lengths: dict[str, int] = {}
        ranks: dict[str, int] = {}
        for tid, task in self.by_id.items():
            if task.done:
                lengths[tid] = 0
                ranks[tid] = priority_rank(task.priority)
        # Strongly connected components of the not-done graph come out sinks first.
        succ = self.dependants
        for component in strongly_connected(succ, lambda node: succ[node]):
            members = set(component)
            after = [n for m in component for n in self.dependants[m] if n not in members]
            length = len(component) + max((lengths[n] for n in after), default=0)
            rank = min(
                [priority_rank(self.by_id[m].priority) for m in component]
                + [ranks[n] for n in after]
            )
            for m in component:
                lengths[m] = length
                ranks[m] = rank
        return lengths, ranks


def fair_shares(slots: int, wants: Mapping[str, int]) -> dict[str, int]:
    """Max-min fair split of ``slots`` among quests wanting ``wants[q]`` slots each.

    Every quest gets what it wants when all fit; otherwise the slots are dealt round
    by round, one to each quest still wanting, so a quest that wants little is
    satisfied and the rest split what is left evenly (the earlier key breaks a tie for
    the last odd slot). A quest that wants nothing (parked on a person) gets nothing.
    """
    share = dict.fromkeys(wants, 0)
    left = max(0, slots)
    hungry = [q for q, w in wants.items() if w > 0]
    while left > 0 and hungry:
        for q in list(hungry):
            if left == 0:
                break
            share[q] += 1
            left -= 1
            if share[q] >= wants[q]:
                hungry.remove(q)
    return share
