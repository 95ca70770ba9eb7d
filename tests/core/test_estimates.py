"""The learned duration estimator (core/estimates.py) and how the scheduler uses it."""

from __future__ import annotations

import math
import random

import pytest

from scaffold.core.estimates import (
    Priors,
    TaskFeatures,
    TaskSample,
    count_paths,
    fit,
)
from scaffold.core.scheduler import SchedTask, critical_path_lengths, fill_estimates, rank_ready


def sample(
    chars: int, seconds: float, *, files: int = 0, labels: tuple[str, ...] = ()
) -> TaskSample:
    return TaskSample(
        TaskFeatures(text_chars=chars, files=files, labels=labels),
        {"codeweaver": seconds * 0.7, "lawbringer": seconds * 0.3},
    )


def history(n: int = 30, seed: int = 1) -> list[TaskSample]:
    """Durations that grow with size, with a little multiplicative noise."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chars = rng.randint(0, 4000)
        size = TaskFeatures(text_chars=chars).size
        out.append(sample(chars, 600 * size * rng.uniform(0.9, 1.1)))
    return out


# --- no or unusable history ------------------------------------------------------


def test_empty_history_gives_no_model() -> None:
    assert fit([]) is None


def test_samples_that_took_no_time_give_no_model() -> None:
    zero = TaskSample(TaskFeatures(text_chars=10), {"codeweaver": 0.0, "lawbringer": -3.0})
    nan = TaskSample(TaskFeatures(), {"codeweaver": math.nan})
    assert zero.total == 0.0
    assert fit([zero, nan]) is None


# --- what it learns --------------------------------------------------------------


def test_one_sample_predicts_its_own_duration_and_scales_by_the_prior_exponent() -> None:
    model = fit([sample(400, 1000.0)])  # size 2
    assert model is not None
    assert model.samples == 1
    assert model.exponent == Priors().size_exponent  # one size: no slope to measure
    assert model.estimate(TaskFeatures(text_chars=400)) == pytest.approx(1000.0)
    assert model.estimate(TaskFeatures(text_chars=2800)) == pytest.approx(1000.0 * 2)  # (8/2)^0.5


def test_one_role_only() -> None:
    samples = [
        TaskSample(
            TaskFeatures(text_chars=c), {"codeweaver": 300.0 * TaskFeatures(text_chars=c).size}
        )
        for c in (0, 400, 1200, 2000, 4000, 8000)
    ]
    model = fit(samples)
    assert model is not None
    assert list(model.unit_by_role) == ["codeweaver"]
    assert model.role_estimate("lawbringer", TaskFeatures()) == 0.0
    # Six points on an exact line of slope 1, shrunk toward the prior 0.5 with 6/(6+4).
    assert model.exponent == pytest.approx(0.6 * 1.0 + 0.4 * 0.5)
    small, large = (model.estimate(TaskFeatures(text_chars=c)) for c in (0, 4000))
    assert large > small * 3


def test_bigger_tasks_are_estimated_longer() -> None:
    model = fit(history())
    assert model is not None
    assert 0.8 < model.exponent <= 1.1
    estimates = [model.estimate(TaskFeatures(text_chars=c)) for c in (0, 500, 1000, 3000)]
    assert estimates == sorted(estimates)
    assert estimates[-1] / estimates[0] == pytest.approx(8.5, rel=0.25)


def test_files_count_toward_size() -> None:
    assert TaskFeatures(text_chars=800, files=3).size == 1 + 2 + 3
    model = fit(history())
    assert model is not None
    assert model.estimate(TaskFeatures(files=4)) > model.estimate(TaskFeatures(files=0))


def test_outliers_barely_move_the_estimate() -> None:
    clean = fit(history())
    # Two tasks that sat for days (scaffold was down while they were in flight).
    dirty = fit([*history(), sample(100, 900_000.0), sample(3000, 2_000_000.0)])
    assert clean is not None
    assert dirty is not None
    probe = TaskFeatures(text_chars=1000)
    assert dirty.estimate(probe) == pytest.approx(clean.estimate(probe), rel=0.15)


def test_occasional_role_counts_by_how_often_it_runs() -> None:
    base = {"codeweaver": 600.0}
    samples = [
        TaskSample(TaskFeatures(), {**base, "spiritmender": 300.0} if i % 3 == 0 else base)
        for i in range(12)
    ]
    model = fit(samples, Priors(winsor=0.0))
    assert model is not None
    assert model.unit_by_role["spiritmender"] == pytest.approx(100.0)
    assert model.estimate(TaskFeatures()) == pytest.approx(700.0)


def test_labels_scale_and_scarce_labels_stay_near_one() -> None:
    rng = random.Random(3)
    samples = []
    for i in range(40):
        chars = rng.randint(0, 3000)
        size = TaskFeatures(text_chars=chars).size
        slow = i % 2 == 0
        samples.append(
            sample(
                chars,
                500 * size * (2.0 if slow else 1.0),
                labels=("refactor",) if slow else ("docs",),
            )
        )
    samples.append(sample(500, 50_000.0, labels=("rare",)))
    model = fit(samples)
    assert model is not None
    probe = TaskFeatures(text_chars=1000)
    refactor = model.estimate(TaskFeatures(text_chars=1000, labels=("Refactor",)))
    docs = model.estimate(TaskFeatures(text_chars=1000, labels=("docs",)))
    assert refactor / docs == pytest.approx(2.0, rel=0.1)
    # One sample of "rare" only shrinks 1/(1+4) of the way toward its residual.
    rare = model.estimate(TaskFeatures(text_chars=1000, labels=("rare",)))
    assert rare / model.estimate(probe) < math.exp(0.2 * math.log(50_000 / 500 / 2.5)) * 1.01
    # An unknown label changes nothing.
    assert model.estimate(TaskFeatures(text_chars=1000, labels=("new",))) == model.estimate(probe)


def test_fit_is_deterministic_and_ignores_sample_order() -> None:
    samples = history(25, seed=9)
    shuffled = list(samples)
    random.Random(5).shuffle(shuffled)
    a, b = fit(samples), fit(shuffled)
    assert a is not None
    assert b is not None
    assert a == b
    probe = TaskFeatures(text_chars=1234, files=2, labels=("x",))
    assert a.estimate(probe) == b.estimate(probe)


def test_count_paths() -> None:
    text = "Edit app/scaffold/config.py and README.md. Then app/scaffold/config.py again, v1.2 ok."
    assert count_paths(text) == 2
    assert count_paths("Nothing here. Really.") == 0


# --- the scheduler with learned estimates ------------------------------------------


def tasks() -> list[SchedTask]:
    # Two independent chains: 1 -> 2 and 3 -> 4.
    return [
        SchedTask("TASK-1"),
        SchedTask("TASK-2", ("TASK-1",)),
        SchedTask("TASK-3"),
        SchedTask("TASK-4", ("TASK-3",)),
    ]


def test_scheduler_orders_by_learned_estimates() -> None:
    assert rank_ready(tasks()) == ["TASK-1", "TASK-3"]  # a tie: lower id first
    learned = {"TASK-1": 5.0, "TASK-2": 5.0, "TASK-3": 30.0, "TASK-4": 40.0}
    filled = fill_estimates(tasks(), learned)
    assert critical_path_lengths(filled)["TASK-3"] == 70.0
    assert rank_ready(filled) == ["TASK-3", "TASK-1"]


def test_explicit_estimate_wins_over_learned() -> None:
    given = [SchedTask("TASK-1", estimate=100.0), *tasks()[1:]]
    learned = {"TASK-1": 5.0, "TASK-2": 5.0, "TASK-3": 30.0, "TASK-4": 40.0}
    filled = fill_estimates(given, learned)
    assert filled[0].estimate == 100.0
    assert rank_ready(filled) == ["TASK-1", "TASK-3"]


def test_no_learned_estimates_changes_nothing() -> None:
    assert fill_estimates(tasks(), {}) == tasks()
    assert [t.weight for t in tasks()] == [1.0] * 4


def test_a_task_the_model_does_not_know_weighs_the_median_learned_value() -> None:
    learned = {"TASK-1": 10.0, "TASK-2": 20.0, "TASK-3": 90.0}
    filled = fill_estimates(tasks(), learned)
    assert [t.estimate for t in filled] == [10.0, 20.0, 90.0, 20.0]
