"""How long a task will hold its slot, learned from the tasks that already finished.

The scheduler ranks ready tasks by the estimate-weighted critical path
(:mod:`scaffold.core.scheduler`). Nobody writes estimates into Backlog.md, so without
this module every task weighs 1 and the rule falls back to the longest chain by
count. This module is the pure half of learning them: it fits a small, robust model
to past tasks (plain data in, plain data out; no I/O, no clock, no randomness) and
predicts a duration for a task from what can be seen before it starts. The runtime
adapter (:mod:`scaffold.runtime.estimates`) gathers the past tasks from the
repository's quest journals and Backlog.md files.

What a task looks like before it runs (:class:`TaskFeatures`): the length of its
description and acceptance criteria, how many files it names, and its labels. These
fold into one *size* (``1 + chars / 400 + files``); the model is

    duration(task) = sum over roles r of unit[r] * size ** b, times label factors

* ``b`` (how duration grows with size) is the Theil-Sen slope of log duration on log
  size (the median of pairwise slopes: an outlier moves it little), shrunk toward
  the prior ``0.5`` with ``n / (n + strength)`` and clamped to ``[0, 2]``.
* ``unit[r]`` is the winsorised mean (values clipped to the 10th..90th percentile,
  then averaged) of each past task's time in role ``r`` divided by ``size ** b``; a
  role a task never ran in counts as 0 there, so a role that runs in one task out of
  three (Spiritmender fixing a failed check) weighs a third. The non-agent time
  (worktree, Ward, DiagramCheck, merge) is one more "role", ``scaffold``.
* A label seen on ``n`` past tasks scales by ``exp(w * median log residual)`` with
  ``w = n / (n + strength)``: scarce evidence stays near 1. A task with several known
  labels takes the mean of their log factors.

Everything is order-independent (samples are sorted before any float sum) and
deterministic. With no usable sample :func:`fit` returns ``None``: the caller then
passes no estimate, exactly as before this module existed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "CHARS_PER_SIZE",
    "DurationModel",
    "Priors",
    "TaskFeatures",
    "TaskSample",
    "count_paths",
    "fit",
]

# Characters of description and acceptance criteria worth one "file" of size.
CHARS_PER_SIZE = 400.0
# The role name under which time no agent spent (worktree, Ward, merge) is counted.
SCAFFOLD_ROLE = "scaffold"

# A path-like token: has a slash or a file extension of 1..8 letters (``app/x.py``,
# ``README.md``); a sentence's full stop or a version number (``1.2``) is not.
_PATH = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w-]+(?:/[\w.-]+|\.[A-Za-z][A-Za-z0-9]{0,7})(?![\w/-])"
)


def count_paths(text: str) -> int:
    """How many distinct file paths ``text`` names (a rough, deterministic count)."""
    found = {m.group(0).rstrip(".") for m in _PATH.finditer(text)}
    return len({p for p in found if "/" in p or "." in p})


@dataclass(frozen=True)
class TaskFeatures:
    """What is known about a task before it starts."""

    text_chars: int = 0
    files: int = 0
    labels: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "text_chars", max(0, int(self.text_chars)))
        object.__setattr__(self, "files", max(0, int(self.files)))
        labels = sorted({lab.strip().lower() for lab in self.labels if lab.strip()})
        object.__setattr__(self, "labels", tuple(labels))

    @property
    def size(self) -> float:
        return 1.0 + self.text_chars / CHARS_PER_SIZE + self.files


@dataclass(frozen=True)
class TaskSample:
    """One finished task: its features and the seconds it held a slot, per role."""

    features: TaskFeatures
    seconds_by_role: Mapping[str, float] = field(default_factory=dict)

    def __post_init__(self) -> None:
        clean = {
            role: float(s)
            for role, s in sorted(self.seconds_by_role.items())
            if math.isfinite(float(s)) and float(s) > 0
        }
        object.__setattr__(self, "seconds_by_role", MappingProxyType(clean))

    @property
    def total(self) -> float:
        return math.fsum(self.seconds_by_role.values())


@dataclass(frozen=True)
class Priors:
    """Where the model sits when the history is thin."""

    size_exponent: float = 0.5
    # Pseudo-samples behind each prior: the data's own figure takes over as n grows.
    strength: float = 4.0
    winsor: float = 0.1


@dataclass(frozen=True)
class DurationModel:
    exponent: float
    unit_by_role: Mapping[str, float]
    label_log_factor: Mapping[str, float]
    samples: int

    def estimate(self, features: TaskFeatures) -> float:
        """Predicted seconds in a slot (always > 0)."""
        scale = math.pow(features.size, self.exponent)
        base = math.fsum(self.unit_by_role.values()) * scale
        logs = [
            self.label_log_factor[lab] for lab in features.labels if lab in self.label_log_factor
        ]
        if logs:
            base *= math.exp(math.fsum(logs) / len(logs))
        return max(base, 1e-9)

    def role_estimate(self, role: str, features: TaskFeatures) -> float:
        """Predicted seconds of one role (0 for a role never seen)."""
        return self.unit_by_role.get(role, 0.0) * math.pow(features.size, self.exponent)


def _median(values: Sequence[float]) -> float:
    s = sorted(values)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile of an already sorted, non-empty sequence."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    frac = pos - lo
    return sorted_values[lo] * (1 - frac) + sorted_values[hi] * frac


def _winsorized_mean(values: Sequence[float], cut: float) -> float:
    s = sorted(values)
    lo, hi = _quantile(s, cut), _quantile(s, 1 - cut)
    return math.fsum(min(max(v, lo), hi) for v in s) / len(s)


def _theil_sen(points: Sequence[tuple[float, float]], limit: int = 200) -> float | None:
    """Median pairwise slope; ``None`` when every x is the same. Uses at most
    ``limit`` points (evenly spaced in sorted order) to stay cheap."""
    pts = sorted(points)
    if len(pts) > limit:
        step = len(pts) / limit
        pts = [pts[int(i * step)] for i in range(limit)]
    slopes = [
        (y2 - y1) / (x2 - x1)
        for i, (x1, y1) in enumerate(pts)
        for x2, y2 in pts[i + 1 :]
        if x2 - x1 > 1e-9
    ]
    return _median(slopes) if slopes else None


def fit(samples: Iterable[TaskSample], priors: Priors = Priors()) -> DurationModel | None:
    """The model of the module docstring; ``None`` without a sample that took time."""
    usable = sorted(
        (s for s in samples if s.total > 0),
        key=lambda s: (
            s.features.size,
            s.total,
            s.features.labels,
            tuple(s.seconds_by_role.items()),
        ),
    )
    n = len(usable)
    if n == 0:
        return None
    weight = n / (n + priors.strength)

    slope = _theil_sen([(math.log(s.features.size), math.log(s.total)) for s in usable])
    exponent = priors.size_exponent
    if slope is not None:
        exponent = weight * slope + (1 - weight) * priors.size_exponent
    exponent = min(max(exponent, 0.0), 2.0)

    scales = [math.pow(s.features.size, exponent) for s in usable]
    roles = sorted({role for s in usable for role in s.seconds_by_role})
    unit_by_role = {
        role: _winsorized_mean(
            [s.seconds_by_role.get(role, 0.0) / sc for s, sc in zip(usable, scales, strict=True)],
            priors.winsor,
        )
        for role in roles
    }
    base = DurationModel(exponent, MappingProxyType(unit_by_role), MappingProxyType({}), n)

    residuals: dict[str, list[float]] = {}
    for s in usable:
        r = math.log(s.total / base.estimate(s.features))
        for lab in s.features.labels:
            residuals.setdefault(lab, []).append(r)
    label_log_factor = {
        lab: len(rs) / (len(rs) + priors.strength) * _median(rs)
        for lab, rs in sorted(residuals.items())
    }
    return DurationModel(
        exponent, MappingProxyType(unit_by_role), MappingProxyType(label_log_factor), n
    )
