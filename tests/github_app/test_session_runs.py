"""The Actions executor remembers which workflow run's artifact holds each session."""

from __future__ import annotations

from pathlib import Path

from scaffold.github.actions_executor import SessionRuns


def test_sessions_map_to_the_run_that_saved_them(tmp_path: Path) -> None:
    runs = SessionRuns(tmp_path / "github" / "session-runs.json")
    assert runs.run_of("s-1") is None
    assert runs.run_of(None) is None
    runs.remember("s-1", 101)
    runs.remember("s-2", 102)
    runs.remember("s-1", 103)  # resumed and saved again by a later run
    again = SessionRuns(tmp_path / "github" / "session-runs.json")
    assert again.run_of("s-1") == 103
    assert again.run_of("s-2") == 102


def test_a_damaged_map_is_empty_not_an_error(tmp_path: Path) -> None:
    path = tmp_path / "session-runs.json"
    path.write_text("{not json", encoding="utf-8")
    assert SessionRuns(path).run_of("s-1") is None
