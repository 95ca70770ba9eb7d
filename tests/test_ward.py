"""Ward runs real processes: pass, fail, missing program, timeout, output tail."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from scaffold.ward import (
    OUTPUT_TAIL_BYTES,
    WardCommandResult,
    WardResult,
    format_ward_report,
    run_command,
    run_ward,
)

PY = sys.executable


def py(code: str) -> list[str]:
    return [PY, "-c", code]


def gone(pid: int) -> bool:
    """True once ``pid`` has exited (a zombie waiting for its reaper counts as gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pid: int, within_s: float = 10.0) -> bool:
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        if gone(pid):
            return True
        time.sleep(0.05)
    return gone(pid)


def test_all_commands_pass(tmp_path: Path) -> None:
    result = run_ward([py("print('lint ok')"), py("print('tests ok')")], tmp_path, 30)
    assert result.passed
    assert [r.returncode for r in result.results] == [0, 0]
    assert result.results[0].output_tail == "lint ok\n"
    assert result.results[0].argv == [PY, "-c", "print('lint ok')"]
    assert not result.failed


def test_failure_is_reported_and_later_commands_still_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    result = run_ward(
        [
            py("import sys; print('E501 line too long'); sys.exit(3)"),
            py(f"open({str(marker)!r}, 'w').write('x')"),
        ],
        tmp_path,
        30,
    )
    assert not result.passed
    assert result.results[0].returncode == 3
    assert "E501" in result.results[0].output_tail
    assert result.results[1].passed
    assert marker.exists()
    assert result.failed == [result.results[0]]


def test_runs_in_cwd_with_given_env(tmp_path: Path) -> None:
    env = {"PATH": os.environ.get("PATH", ""), "WARD_FLAVOUR": "strict"}
    result = run_ward(
        [py("import os; print(os.getcwd()); print(os.environ.get('WARD_FLAVOUR'))")],
        tmp_path,
        30,
        env=env,
    )
    assert result.results[0].output_tail.splitlines() == [str(tmp_path), "strict"]


def test_stdout_and_stderr_are_interleaved(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "print('out 1', flush=True)\n"
        "print('err 2', file=sys.stderr, flush=True)\n"
        "print('out 3', flush=True)\n"
    )
    result = run_ward([py(code)], tmp_path, 30)
    assert result.results[0].output_tail.splitlines() == ["out 1", "err 2", "out 3"]


def test_missing_executable_is_a_failed_command(tmp_path: Path) -> None:
    result = run_ward(
        [["scaffold-no-such-program-xyz", "--check"], py("print('still runs')")], tmp_path, 30
    )
    missing = result.results[0]
    assert not result.passed
    assert missing.returncode == 127
    assert "not found: scaffold-no-such-program-xyz" in missing.output_tail
    assert result.results[1].passed


def test_not_executable_and_empty_argv_and_missing_cwd(tmp_path: Path) -> None:
    script = tmp_path / "check.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o644)
    result = run_ward([[str(script)], []], tmp_path, 30)
    assert [r.returncode for r in result.results] == [126, 127]
    assert "cannot execute" in result.results[0].output_tail
    assert "empty" in result.results[1].output_tail

    nowhere = run_command(py("print(1)"), tmp_path / "missing", 30)
    assert nowhere.returncode == 127
    assert "working directory not found" in nowhere.output_tail


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    code = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "time.sleep(300)\n"
    )
    result = run_command(py(code), tmp_path, timeout_s=2.0, kill_grace_s=0.5)

    assert result.timed_out
    assert not result.passed
    assert result.returncode < 0
    assert "started" in result.output_tail
    assert "timed out after 2 s" in result.output_tail
    assert wait_gone(int(pidfile.read_text()))


def test_term_ignoring_command_is_killed_after_grace(tmp_path: Path) -> None:
    code = (
        "import signal, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ignoring TERM', flush=True)\n"
        "time.sleep(300)\n"
    )
    result = run_command(py(code), tmp_path, timeout_s=2.0, kill_grace_s=0.2)
    assert result.timed_out
    assert result.returncode == -9


def test_leftover_background_process_does_not_hang_ward(tmp_path: Path) -> None:
    pidfile = tmp_path / "bg.pid"
    code = (
        "import subprocess\n"
        "bg = subprocess.Popen(['sleep', '300'])\n"
        f"open({str(pidfile)!r}, 'w').write(str(bg.pid))\n"
        "print('done')\n"
    )
    result = run_ward([py(code)], tmp_path, timeout_s=120)
    assert result.passed
    assert result.results[0].output_tail == "done\n"
    assert wait_gone(int(pidfile.read_text()))


def test_output_keeps_only_the_tail(tmp_path: Path) -> None:
    code = "for i in range(20000): print(f'line {i:05d} ' + 'x' * 20)\nprint('SUMMARY: 3 failed')"
    result = run_ward([py(code)], tmp_path, 30)
    tail = result.results[0].output_tail
    assert tail.endswith("SUMMARY: 3 failed\n")
    assert tail.startswith("[... ")
    assert len(tail.encode()) < OUTPUT_TAIL_BYTES + 100
    assert "line 00000" not in tail


def test_no_commands_means_passed(tmp_path: Path) -> None:
    assert run_ward([], tmp_path, 30) == WardResult(passed=True, results=[])


def test_report_lists_every_command_and_shows_failures(tmp_path: Path) -> None:
    result = run_ward(
        [py("print('fine')"), py("import sys; print('assert 1 == 2'); sys.exit(1)")],
        tmp_path,
        30,
    )
    report = format_ward_report(result)
    assert report.startswith("Ward FAILED (1 of 2 commands failed).")
    assert "ok in" in report
    assert "FAILED with exit 1" in report
    assert "assert 1 == 2" in report
    assert "fine" not in report.split("###")[-1]  # passing output is not shown
    assert format_ward_report(run_ward([py("print(1)")], tmp_path, 30)).startswith("Ward passed.")


def test_report_is_bounded(tmp_path: Path) -> None:
    big = "E" * OUTPUT_TAIL_BYTES
    result = WardResult(
        passed=False,
        results=[
            WardCommandResult(["ruff", "check"], 1, big + "\nruff tail", 1.0),
            WardCommandResult(["pytest", "-x"], 1, "```\n" + big + "\npytest tail", 2.0),
            WardCommandResult(["mypy"], -15, big, 3.0, timed_out=True),
        ],
    )
    report = format_ward_report(result, max_chars=4000)
    assert len(report) <= 4000
    assert "ruff tail" in report
    assert "pytest tail" in report
    assert "TIMED OUT" in report
    assert report.count("```") % 2 == 0
