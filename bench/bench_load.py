"""Benchmark: one ``scaffold serve`` serving a whole organisation under load.

One round at R: a fresh GitHub simulator (``tests/ghsim``, in this process) with R
repositories ``acme/r01..rNN`` (each with the test suite's ``repo_files()``, ``main``
protected like ``tests/github_app/test_app_flow.py``: the diagram check and one
approval), one installation covering all of them and ``alice`` with write access to
each; ``scaffold serve`` started as a child process (``app_process``: the command a
person deploys, with the sandbox the host allows) and the project's scripted agent
(``scaffold.demo.scripted``) in place of Claude. Every repository gets the same work:
ChaosWhisperer writes requirements, PathSeeker plans two independent tasks (both run at
once), Codeweaver builds each, Siegemaster and Lawbringer pass. The script has one entry
per (role, step) and no ``attempt``: the scripted agent counts attempts per (step, role)
in one state dir shared by every repository, so entries without ``attempt`` match the
same way in each repository.

Once the App has settled after its start (no API call for a second), ``alice`` opens and
labels (``scaffold``) one issue in every repository, all within about a second. A
reviewer thread polls the simulator every 50 ms and approves each pull request as soon
as it exists (again whenever its head moves after an approval). The round ends when
every quest is done (its two pull requests merged and its quest file ``done``) or at the
deadline; quests not done by then are lost.

Measured per round:

- ack latency of every delivery the simulator posted to scaffold (POST start to the whole
  response read; ``DeliveryRecord.elapsed_s``), next to a do-nothing receiver measured
  side by side: a separate aiohttp process (HMAC-SHA256 with ``compare_digest``,
  ``json.loads``, 202; on uvloop like scaffold) that gets a copy of every delivery at the
  same moment (the simulator's opt-in ``Sender.mirror_url``);
- how long after its POST serve had handled each delivery (its "handled" log record),
  for all deliveries and for people's approvals, and the handler's own time ("ms");
- approval -> merge latency per pull request (the last approval before the merge, to
  the ``pull_request.closed`` delivery of the merge, both as the simulator recorded them);
- duplicates: agent runs beyond one per (repo, quest, role, step) (from the scripted
  agent's invocation log and from the App's run folders), tasks beyond 2 per repository,
  pull requests beyond 2 per repository; lost quests; handler failures (log records at
  ERROR, or saying "a work item raised" / "crashed" / "handler failed");
- deliveries: total, caused by the App's bot, caused by people;
- memory: peak RSS of the serve process itself (VmHWM, and VmRSS sampled every 0.2 s),
  and the peak of its whole process tree (sum of VmRSS, for information);
- CPU of serve and all its descendants, whole life and from the labels until serve is
  idle again, per quest. ``wait4``'s rusage of serve (its own time plus every descendant
  it reaped) misses the sandboxed agents: bubblewrap's pid namespace does not hand their
  time on (a burner under ``bwrap --unshare-all`` adds ~0 to RUSAGE_CHILDREN). So serve's
  tree is the machine's busy time (/proc/stat) less this process, its reaped children
  (the simulator's git commands) and the do-nothing receiver: right on an otherwise idle
  machine (the load average before each round is shown; others' work inflates it). Also
  the CPU of this process (simulator, reviewer, sampler) and of the simulator's git;
- the most agents running at once: agent processes among serve's descendants (sampled),
  and agent runs open at once from the "agent ... started/finished" lines of the serve
  log (a run is "started" once its sandbox is made, before it waits for the server-wide
  agent limit, so this one may exceed the limit).

    .venv/bin/python bench/bench_load.py [--repos 1,20] [--runs 1] [--deadline 300]
        [--quick] [--no-save] [--keep DIR] [--env SCAFFOLD_MAX_AGENTS=4]
        [--serve-args "--log-level info"] [--sandbox-off] [--base ../base]

``--quick`` is ``--repos 1,4``. Results go to stdout and, as JSON, to
``bench/results/load.json`` (``load-quick.json`` with ``--quick``; ``--no-save`` to
skip). R=1 runs first as the baseline. ``--base DIR`` (a checkout of other code, e.g.
``git worktree add ../base <commit>``; not under /tmp, which the sandbox shows agents
empty) runs every round twice, side by side: with
DIR's ``app/`` first on serve's ``PYTHONPATH`` (columns "base"), then with this tree's
(columns "head"). ``--sandbox-off`` makes each repository's config
say ``sandbox: {mode: off}`` (only for a host that refuses bubblewrap; the table says
which sandbox the agents ran in). The simulator and the App harness come from tests/;
type-check with them on the path:

    MYPYPATH=tests:tests/github_app .venv/bin/python -m mypy bench/bench_load.py
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# The simulator and the App harness are test support, not part of the package: this
# script is run, never imported, so it takes them straight from tests/.
for _extra in (REPO / "tests", REPO / "tests" / "github_app"):
    if str(_extra) not in sys.path:
        sys.path.insert(0, str(_extra))

from app_harness import (  # noqa: E402
    PYTHON,
    VALIDATORS,
    AppProcess,
    app_process,
    codeweaver,
    free_port,
    planned,
    repo_files,
    write_script,
)
from results_file import write_result  # noqa: E402

from ghsim import DeliveryRecord, GitHubSimulator  # noqa: E402
from ghsim.fixture import WEBHOOK_SECRET  # noqa: E402

OWNER = "acme"
WRITER = "alice"
LABEL = "scaffold"
TASKS_PER_QUEST = 2
PRS_PER_QUEST = 2
# (role, step) of every agent run one quest needs, once each.
EXPECTED_RUNS = frozenset(
    {
        ("chaoswhisperer", "PLAN"),
        ("pathseeker", "PLAN"),
        *(
            (role, f"TASK-{n}")
            for role in ("codeweaver", "siegemaster", "lawbringer")
            for n in (1, 2)
        ),
    }
)
SAMPLE_S = 0.2
REVIEW_POLL_S = 0.05
REQUIRED_CHECK = "scaffold/diagram-check"
DONE_POLL_S = 0.2
FAILURE_MARKS = ("a work item raised", "crashed", "handler failed")
_AGENT_LINE = re.compile(
    r"^\s*\d+(?:\.\d+)?s\s+(?P<step>\S+): agent (?P<role>\w+) (?P<what>started|finished)"
)
_CLK_TCK = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")

MIRROR_SERVER = r"""
import asyncio, hashlib, hmac, json, os, sys
from aiohttp import web

secret = os.environ["MIRROR_SECRET"].encode()

async def webhook(request):
    body = await request.read()
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected, request.headers.get("X-Hub-Signature-256", "")):
        return web.Response(status=401)
    json.loads(body)
    return web.json_response({"status": "queued"}, status=202)

async def main():
    app = web.Application(client_max_size=25 * 1024 * 1024)
    app.router.add_post("/webhook", webhook)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", int(sys.argv[1])).start()
    await asyncio.Event().wait()

try:
    import uvloop
except ImportError:
    asyncio.run(main())
else:
    uvloop.run(main())
"""


def agent_script() -> list[dict[str, Any]]:
    """The same work for every repository: two independent tasks, every agent passes."""
    return [
        *planned(("a", "Write the greeting", []), ("b", "Write the farewell", [])),
        codeweaver("task-1", {"notes/greeting.txt": "hello\n"}),
        codeweaver("task-2", {"notes/farewell.txt": "goodbye\n"}),
        *VALIDATORS,
    ]


# --------------------------------------------------------------------------- statistics


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (``q`` in 0..100); None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def spread(values: Sequence[float]) -> dict[str, float | None]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p99": percentile(values, 99),
        "max": max(values) if values else None,
    }


# --------------------------------------------------------------------------- /proc


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _stat_fields(pid: int) -> list[str] | None:
    """``/proc/<pid>/stat`` after the command name (field 3 onwards)."""
    text = _read(f"/proc/{pid}/stat")
    if text is None:
        return None
    return text[text.rfind(")") + 2 :].split()


def rss_kb(pid: int) -> int:
    text = _read(f"/proc/{pid}/statm")
    if not text:
        return 0
    return int(text.split()[1]) * _PAGE // 1024


def status_kb(pid: int, key: str) -> int | None:
    """A ``kB`` line of ``/proc/<pid>/status`` (VmRSS, VmHWM)."""
    for line in (_read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return None


def cpu_s(pid: int) -> float | None:
    """utime + stime + cutime + cstime of ``pid`` (itself and its reaped children)."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return sum(int(f) for f in fields[11:15]) / _CLK_TCK


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (a scan of /proc: no ``children`` files here)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        fields = _stat_fields(int(name))
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(name))
    out: list[int] = []
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def is_agent(pid: int) -> bool:
    """A scripted agent's own Python: not bwrap nor the sandbox's bridge wrapping it, whose
    argv name it too, after a ``--``."""
    argv = (_read(f"/proc/{pid}/cmdline") or "").split("\0")
    own = argv[: argv.index("--")] if "--" in argv else argv
    return os.path.basename(own[0]).startswith("python") and "scaffold.demo.scripted" in own


def cpu_of(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def machine_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat's ``cpu`` line: busy is
    user + nice + system + irq + softirq; total adds idle, iowait and steal (guest time
    is already in user)."""
    first = (_read("/proc/stat") or "cpu").splitlines()[0].split()[1:]
    user, nice, system, idle, iowait, irq, softirq, steal = ([int(v) for v in first] + [0] * 8)[:8]
    busy = user + nice + system + irq + softirq
    return busy, busy + idle + iowait + steal


# --------------------------------------------------------------------------- threads


class Sampler(threading.Thread):
    """Every ``SAMPLE_S``: serve's RSS, its tree's RSS, agents running among its tree."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="bench-sampler", daemon=True)
        self.pid = pid
        self.stop_event = threading.Event()
        self.peak_serve_kb = 0
        self.peak_tree_kb = 0
        self.peak_agents = 0
        self.peak_processes = 0
        self.samples = 0

    def run(self) -> None:
        while not self.stop_event.wait(SAMPLE_S):
            self.sample()

    def sample(self) -> None:
        own = rss_kb(self.pid)
        if own == 0:
            return
        tree = descendants(self.pid)
        self.samples += 1
        self.peak_serve_kb = max(self.peak_serve_kb, own)
        self.peak_tree_kb = max(self.peak_tree_kb, own + sum(rss_kb(p) for p in tree))
        self.peak_agents = max(self.peak_agents, sum(is_agent(p) for p in tree))
        self.peak_processes = max(self.peak_processes, len(tree))

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


@dataclass
class PullSeen:
    repo: str
    number: int
    first_seen: float
    approvals: list[tuple[float, str]] = field(default_factory=list)
    merged_seen: float | None = None
    # When the reviewer first saw each head's required check succeed (head -> time).
    checks_green: dict[str, float] = field(default_factory=dict)


class Reviewer(threading.Thread):
    """``alice`` approves every open pull request at its head, as soon as she sees it."""

    def __init__(self, sim: GitHubSimulator, repos: list[str]) -> None:
        super().__init__(name="bench-reviewer", daemon=True)
        self.sim = sim
        self.repos = repos
        self.stop_event = threading.Event()
        self.pulls: dict[tuple[str, int], PullSeen] = {}
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop_event.wait(REVIEW_POLL_S):
            try:
                self.tick()
            except Exception as exc:  # keep reviewing; the report shows it
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def tick(self) -> None:
        with self.sim.lock:
            snapshot = [
                (name, pr.number, pr.head_sha, pr.merged, pr.issue.state)
                for name in self.repos
                for pr in self.sim.repo_state(name).pulls.values()
            ]
            green = {
                (name, run.head_sha)
                for name in self.repos
                for run in self.sim.repo_state(name).check_runs.values()
                if run.name == REQUIRED_CHECK and run.conclusion == "success"
            }
        for name, number, head, merged, state in snapshot:
            now = time.time()
            seen = self.pulls.setdefault((name, number), PullSeen(name, number, now))
            if (name, head) in green:
                seen.checks_green.setdefault(head, now)
            if merged:
                if seen.merged_seen is None:
                    seen.merged_seen = now
                continue
            if state != "open" or (seen.approvals and seen.approvals[-1][1] == head):
                continue
            review_id = self.sim.submit_review(name, number, "APPROVED", by=WRITER)
            approved = self.sim.repo(name).reviews[review_id].commit_id
            seen.approvals.append((time.time(), approved))

    def stop(self) -> None:
        self.stop_event.set()
        self.join(timeout=10)


# --------------------------------------------------------------------------- a round


@dataclass
class RoundSetup:
    repos: int
    deadline_s: float
    root: Path
    env: dict[str, str]
    serve_args: list[str]
    sandbox_off: bool


@dataclass
class Mirror:
    """The do-nothing receiver: where it listens, its process, its CPU once stopped."""

    url: str
    pid: int
    cpu_s: float | None = None


@dataclass(frozen=True)
class CpuMark:
    """CPU seconds so far: the machine's busy time, this process, its reaped children,
    and the do-nothing receiver."""

    busy_s: float
    self_s: float
    children_s: float
    mirror_s: float

    @classmethod
    def take(cls, mirror: Mirror) -> CpuMark:
        return cls(
            machine_ticks()[0] / _CLK_TCK,
            cpu_of(resource.RUSAGE_SELF),
            cpu_of(resource.RUSAGE_CHILDREN),
            cpu_s(mirror.pid) or 0.0,
        )

    def serve_since(self, earlier: CpuMark, reaped: float = 0.0) -> float:
        """What serve's tree spent since ``earlier``: the machine's busy time less this
        process, its reaped children (but ``reaped``, serve's own ``wait4`` figure, when
        serve was reaped meanwhile) and the receiver. Right on an otherwise idle machine;
        it counts the sandboxed processes, which ``wait4`` misses: bubblewrap's pid
        namespace does not hand their time on to serve."""
        return (
            (self.busy_s - earlier.busy_s)
            - (self.self_s - earlier.self_s)
            - (self.children_s - earlier.children_s - reaped)
            - (self.mirror_s - earlier.mirror_s)
        )


@contextlib.contextmanager
def mirror_receiver(root: Path) -> Iterator[Mirror]:
    """The do-nothing receiver in its own process (its CPU filled in once stopped)."""
    port = free_port()
    env = {**os.environ, "MIRROR_SECRET": WEBHOOK_SECRET}
    with open(root / "mirror.log", "wb") as log:
        proc = subprocess.Popen(
            [PYTHON, "-c", MIRROR_SERVER, str(port)], env=env, stdout=log, stderr=log
        )
    mirror = Mirror(f"http://127.0.0.1:{port}/webhook", proc.pid)
    try:
        deadline = time.monotonic() + 20
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the do-nothing receiver did not start ({root / 'mirror.log'})")
            time.sleep(0.05)
        yield mirror
    finally:
        proc.send_signal(signal.SIGTERM)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        mirror.cpu_s = usage.ru_utime + usage.ru_stime


def settle_startup(sim: GitHubSimulator, timeout: float = 90.0) -> float:
    """Wait until the App has listed its installation's repositories and then made no
    API call for a second (its start-up adoption is over); returns the seconds waited."""
    started = time.monotonic()
    deadline = started + timeout
    while not any(path == "/installation/repositories" for _, path, _ in list(sim.requests)):
        if time.monotonic() > deadline:
            return time.monotonic() - started
        time.sleep(0.05)
    count, quiet_since = len(sim.requests), time.monotonic()
    while time.monotonic() - quiet_since < 1.0 and time.monotonic() < deadline:
        time.sleep(0.1)
        if len(sim.requests) != count:
            count, quiet_since = len(sim.requests), time.monotonic()
    return time.monotonic() - started


def quest_file(app: AppProcess, repo: str, quest_id: str) -> dict[str, Any] | None:
    path = app.state / "repos" / repo / ".scaffold" / "quests" / quest_id / "quest.json"
    try:
        quest = json.loads(path.read_text(encoding="utf-8"))["quest"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return quest if isinstance(quest, dict) else None


def merged_count(sim: GitHubSimulator, repo: str) -> int:
    with sim.lock:
        return sum(pr.merged for pr in sim.repo_state(repo).pulls.values())


def metrics_text(app: AppProcess) -> str:
    try:
        with urllib.request.urlopen(app.url + "/metrics", timeout=10) as resp:
            return str(resp.read().decode())
    except OSError:
        return ""


def metric(text: str, name: str, labels: str = "") -> float | None:
    """A sample of the Prometheus text ``text``: ``name{labels} value``."""
    wanted = f"{name}{{{labels}}}" if labels else name
    for line in text.splitlines():
        key, _, value = line.rpartition(" ")
        if key == wanted:
            with contextlib.suppress(ValueError):
                return float(value)
    return None


def wait_idle(app: AppProcess, timeout: float = 30.0) -> None:
    """Until serve has no delivery queued or in flight and no agent running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = metrics_text(app)
        busy = [
            metric(text, n)
            for n in (
                "scaffold_queue_depth",
                "scaffold_webhook_in_flight",
                "scaffold_agents_running",
            )
        ]
        if text and not any(busy):
            return
        time.sleep(0.25)


def stop_serve(app: AppProcess) -> tuple[float, float]:
    """SIGTERM serve and reap it with ``wait4``: (its CPU seconds with every descendant it
    reaped, seconds it took to stop)."""
    started = time.monotonic()
    proc = app.proc
    if proc.poll() is not None:
        return math.nan, 0.0
    proc.send_signal(signal.SIGTERM)
    deadline = started + 60
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.monotonic() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return usage.ru_utime + usage.ru_stime, time.monotonic() - started


def run_round(setup: RoundSetup) -> dict[str, Any]:
    root = setup.root
    root.mkdir(parents=True, exist_ok=True)
    names = [f"{OWNER}/r{i:02d}" for i in range(1, setup.repos + 1)]
    config: dict[str, Any] = {"sandbox": {"mode": "off"}} if setup.sandbox_off else {}
    write_script(root, agent_script())
    result: dict[str, Any] = {"repos": setup.repos, "deadline_s": setup.deadline_s}
    result["loadavg_1m_before"] = os.getloadavg()[0]
    self_before, children_before = cpu_of(resource.RUSAGE_SELF), cpu_of(resource.RUSAGE_CHILDREN)
    ticks_before = machine_ticks()
    with GitHubSimulator(root / "ghsim", webhook_secret=WEBHOOK_SECRET) as sim:
        sim.add_user(WRITER)
        for name in names:
            sim.create_repo(OWNER, name.split("/")[1], dict(repo_files(config)))
            sim.set_permission(name, WRITER, "write")
            sim.protect_branch(name, "main", required_checks=[REQUIRED_CHECK], required_approvals=1)
        sim.install(OWNER, [n.split("/")[1] for n in names])
        with mirror_receiver(root) as mirror:
            sim._sender.mirror_url = mirror.url  # opt-in copy of every delivery
            started = CpuMark.take(mirror)
            with app_process(sim, root, extra_env=setup.env, serve_args=setup.serve_args) as app:
                result.update(drive(sim, app, names, setup, mirror))
            result["serve_tree_cpu_s"] = CpuMark.take(mirror).serve_since(
                started, reaped=result["serve_wait4_cpu_s"]
            )
            sim._sender.mirror_url = None
        result["mirror_cpu_s"] = mirror.cpu_s
        with contextlib.suppress(TimeoutError):
            sim.wait_deliveries(timeout=10)
        result.update(simulator_figures(sim, names))
        result.update(repo_figures(sim, app, names))
        result["violations"] = list(sim.violations)[:5]
    ticks_after = machine_ticks()
    result["bench_cpu_s"] = cpu_of(resource.RUSAGE_SELF) - self_before
    # This process's reaped children: serve (what wait4 saw of it), the do-nothing
    # receiver, and the simulator's git commands.
    children = cpu_of(resource.RUSAGE_CHILDREN) - children_before
    result["sim_git_cpu_s"] = (
        children - result["serve_wait4_cpu_s"] - (result["mirror_cpu_s"] or 0.0)
    )
    busy = ticks_after[0] - ticks_before[0]
    total = ticks_after[1] - ticks_before[1]
    result["machine_busy_pct"] = 100.0 * busy / total if total else None
    records = app.log_records()
    result.update(log_figures(records))
    result.update(handling(list(sim.deliveries), records, sim.bot_login))
    result.update(agent_runs(root / "agent-state" / "invocations.jsonl", app.state))
    return result


def drive(
    sim: GitHubSimulator, app: AppProcess, names: list[str], setup: RoundSetup, mirror: Mirror
) -> dict[str, Any]:
    """Label every repository's issue, approve PRs until every quest is done or the
    deadline, then stop serve; what was measured on the way."""
    out: dict[str, Any] = {"startup_settle_s": settle_startup(sim)}
    pid = app.proc.pid
    sampler = Sampler(pid)
    reviewer = Reviewer(sim, names)
    sampler.start()
    reviewer.start()
    try:
        at_labels = CpuMark.take(mirror)
        labelled_at = time.time()
        issues: dict[str, int] = {}
        for name in names:
            number = sim.open_issue(name, "Greetings", "Add a greeting and a farewell.", by=WRITER)
            sim.label_issue(name, number, LABEL, by=WRITER)
            issues[name] = number
        out["label_spread_s"] = time.time() - labelled_at
        deadline = labelled_at + setup.deadline_s
        done_at: dict[str, float] = {}
        while len(done_at) < len(names) and time.time() < deadline:
            if app.proc.poll() is not None:
                out["serve_exited"] = app.proc.returncode
                break
            for name in names:
                if name in done_at:
                    continue
                quest = quest_file(app, name, f"issue-{issues[name]}")
                if (
                    quest is not None
                    and quest.get("phase") == "done"
                    and merged_count(sim, name) >= PRS_PER_QUEST
                ):
                    done_at[name] = time.time()
            time.sleep(DONE_POLL_S)
        ended = max(done_at.values()) if len(done_at) == len(names) else time.time()
        out["wall_s"] = ended - labelled_at
        out["done"] = len(done_at)
        out["lost"] = len(names) - len(done_at)
        out["lost_repos"] = sorted(set(names) - set(done_at))
        out["label_to_done_s"] = spread([t - labelled_at for t in done_at.values()])
        with contextlib.suppress(TimeoutError):
            sim.wait_deliveries(timeout=30)
        wait_idle(app)
        text = metrics_text(app)
        out["sandbox"] = ",".join(
            f"{mode}:{int(n)}"
            for mode in ("bwrap", "off", "refused")
            if (n := metric(text, "scaffold_sandbox_repositories", f'mode="{mode}"'))
        )
        out["max_agents_cap"] = metric(text, "scaffold_max_agents")
        out["quests_done_metric"] = metric(text, "scaffold_quests", 'state="done"')
        out["serve_rss_hwm_kb"] = status_kb(pid, "VmHWM")
        out["cpu_per_quest_s"] = CpuMark.take(mirror).serve_since(at_labels) / len(names)
    finally:
        reviewer.stop()
        sampler.stop()
        cpu_total, stop_s = stop_serve(app)
    out["serve_wait4_cpu_s"] = cpu_total
    out["stop_s"] = stop_s
    out["serve_rss_sampled_kb"] = sampler.peak_serve_kb
    out["tree_rss_peak_kb"] = sampler.peak_tree_kb
    out["peak_agents_sampled"] = sampler.peak_agents
    out["peak_processes"] = sampler.peak_processes
    out["reviewer_errors"] = reviewer.errors[:5]
    out["_pulls"] = reviewer.pulls
    return out


# --------------------------------------------------------------------------- figures


def _sender(record: DeliveryRecord) -> str:
    sender = record.payload.get("sender")
    return str(sender.get("login", "")) if isinstance(sender, dict) else ""


def simulator_figures(sim: GitHubSimulator, names: list[str]) -> dict[str, Any]:
    """Deliveries and their ack latencies; API calls; approval -> merge per PR."""
    posted = [d for d in list(sim.deliveries) if d.elapsed_s is not None]
    by_app = sum(_sender(d) == sim.bot_login for d in posted)
    failed = [d for d in posted if d.error is not None or d.status_code not in (200, 201, 202, 204)]
    ack = [d.elapsed_s * 1000 for d in posted if d.elapsed_s is not None and d.error is None]
    mirror = [
        d.mirror_elapsed_s * 1000
        for d in posted
        if d.mirror_elapsed_s is not None and d.mirror_error is None
    ]
    merged_at = {
        (
            d.payload["repository"]["full_name"],
            int(d.payload["pull_request"]["number"]),
        ): d.queued_at
        for d in sim.deliveries_of("pull_request", "closed")
        if d.payload.get("pull_request", {}).get("merged")
    }
    errors = Counter(
        (method, re.sub(r"/\d+", "/{n}", re.sub(r"/acme/r\d+", "/acme/{repo}", path)), status)
        for method, path, status in list(sim.requests)
        if status >= 400
    )
    return {
        "deliveries": len(posted),
        "deliveries_by_app": by_app,
        "deliveries_by_people": len(posted) - by_app,
        "deliveries_failed": len(failed),
        "deliveries_failed_first": [
            f"{d.event}.{d.action} -> {d.status_code} {d.error or (d.response_text or '')[:120]}"
            for d in failed[:5]
        ],
        "mirror_failed": sum(d.mirror_status != 202 for d in posted),
        "ack_ms": spread(ack),
        "ack_nothing_ms": spread(mirror),
        # How long each delivery waited in the simulator before its POST (its sender
        # posts one after another, on the loop that also serves the API and git).
        "sim_send_lag_s": spread(
            [d.sent_at - d.queued_at for d in posted if d.sent_at is not None]
        ),
        "api_calls": len(sim.requests),
        "api_errors": sum(errors.values()),
        "api_errors_by_route": [f"{n}x {m} {p} -> {s}" for (m, p, s), n in errors.most_common(10)],
        "_merged_at": merged_at,
    }


def repo_figures(sim: GitHubSimulator, app: AppProcess, names: list[str]) -> dict[str, Any]:
    """Pull requests, tasks and quests per repository."""
    prs: dict[str, int] = {}
    tasks: dict[str, int] = {}
    quests: dict[str, int] = {}
    for name in names:
        repo = sim.repo(name)
        prs[name] = len(repo.pulls)
        on_main = [
            f
            for f in repo.git("ls-tree", "-r", "--name-only", "main", "backlog/tasks").splitlines()
            if f.endswith(".md")
        ]
        quest_dir = app.state / "repos" / name / ".scaffold" / "quests"
        ids = [p.name for p in quest_dir.iterdir() if p.is_dir()] if quest_dir.is_dir() else []
        quests[name] = len(ids)
        in_quests = sum(len((quest_file(app, name, q) or {}).get("tasks") or {}) for q in ids)
        tasks[name] = max(len(on_main), in_quests)
    return {
        "prs_per_repo": prs,
        "tasks_per_repo": tasks,
        "quests_per_repo": quests,
        "dup_prs": sum(max(0, n - PRS_PER_QUEST) for n in prs.values()),
        "dup_tasks": sum(max(0, n - TASKS_PER_QUEST) for n in tasks.values()),
        "dup_quests": sum(max(0, n - 1) for n in quests.values()),
    }


def approval_to_merge(
    pulls: dict[tuple[str, int], PullSeen], merged_at: dict[tuple[str, int], float]
) -> dict[str, Any]:
    """Approval -> merge per pull request, and the same clock started when the approved
    head's required check succeeded if that came after the approval (the merge cannot
    happen while a required check is pending: that wait is the check's, not the App's)."""
    latencies: list[float] = []
    after_checks: list[float] = []
    for key, seen in pulls.items():
        merged = merged_at.get(key, seen.merged_seen)
        if merged is None:
            continue
        before = [(t, head) for t, head in seen.approvals if t <= merged]
        if before:
            approved_at, head = before[-1]
            latencies.append(merged - approved_at)
            ready = max(approved_at, seen.checks_green.get(head, approved_at))
            after_checks.append(max(0.0, merged - ready))
    return {
        "approve_to_merge_s": spread(latencies),
        "ready_to_merge_s": spread(after_checks),
        "prs_seen": len(pulls),
        "prs_merged": sum(1 for k, s in pulls.items() if k in merged_at or s.merged_seen),
        "approvals": sum(len(s.approvals) for s in pulls.values()),
        "reapprovals": sum(max(0, len(s.approvals) - 1) for s in pulls.values()),
    }


def log_figures(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Failures, ignored approvals, warnings, and agents at once from the serve log."""
    failures = [
        r
        for r in records
        if str(r.get("level", "")).lower() in ("error", "critical")
        or any(mark in str(r.get("msg", "")) for mark in FAILURE_MARKS)
    ]
    warnings = Counter(
        str(r.get("msg", ""))[:80] for r in records if str(r.get("level", "")).lower() == "warning"
    )
    running: set[tuple[str, str, str, str]] = set()
    peak = 0
    started = 0
    for r in records:
        match = _AGENT_LINE.match(str(r.get("msg", "")))
        if match is None:
            continue
        key = (str(r.get("repo")), str(r.get("quest")), match["step"], match["role"])
        if match["what"] == "started":
            started += 1
            running.add(key)
            peak = max(peak, len(running))
        else:
            running.discard(key)
    runs_ended = Counter(
        (str(r.get("repo")), str(r.get("quest")))
        for r in records
        if r.get("msg") == "quest run ended"
    )

    def brief(r: dict[str, Any]) -> str:
        keys = ("ts", "level", "msg", "repo", "quest", "delivery", "error", "exc_info")
        return json.dumps({k: r[k] for k in keys if k in r})[:600]

    return {
        "handler_failures": len(failures),
        "handler_failures_first": [brief(r) for r in failures[:5]],
        "approvals_ignored_log": sum(
            str(r.get("msg", "")).startswith("approval ignored") for r in records
        ),
        "reviews_ignored_log": sum(r.get("msg") == "review ignored" for r in records),
        # An approval the quest's task had no use for (e.g. already merging).
        "approvals_unused_log": sum(
            "ignored pr_approved" in str(r.get("msg", "")) for r in records
        ),
        "not_mergeable_log": sum(r.get("msg") == "pull request not mergeable yet" for r in records),
        "warnings_log": [f"{n}x {m}" for m, n in warnings.most_common(8)],
        "agents_started_log": started,
        "peak_agents_log": peak,
        "quest_runs": sum(runs_ended.values()),
        "log_records": len(records),
    }


def _wall(ts: str) -> float | None:
    try:
        return datetime.fromisoformat(ts).timestamp()
    except ValueError:
        return None


def handling(
    deliveries: list[DeliveryRecord], records: list[dict[str, Any]], bot: str
) -> dict[str, Any]:
    """How long after its POST started serve had handled each delivery (its "handled"
    log record), all of them and people's approvals; and the handler's own time."""
    handled: dict[str, float] = {}
    handler_ms: list[float] = []
    for r in records:
        if r.get("msg") == "handled" and isinstance(r.get("delivery"), str):
            at = _wall(str(r.get("ts", "")))
            if at is not None:
                handled.setdefault(r["delivery"], at)
            if isinstance(r.get("ms"), int | float):
                handler_ms.append(float(r["ms"]))
    after: list[float] = []
    approvals: list[float] = []
    for d in deliveries:
        at = handled.get(d.delivery_id)
        if d.sent_at is None or at is None:
            continue
        after.append(at - d.sent_at)
        if d.event == "pull_request_review" and _sender(d) != bot:
            approvals.append(at - d.sent_at)
    return {
        "handled_after_s": spread(after),
        "approval_handled_after_s": spread(approvals),
        "handler_ms": spread(handler_ms),
    }


def _repo_of(cwd: str) -> str | None:
    parts = Path(cwd).parts
    for i, part in enumerate(parts[:-2]):
        if part == "repos" and parts[i + 1] == OWNER:
            return f"{OWNER}/{parts[i + 2]}"
    return None


def agent_runs(invocations: Path, state: Path) -> dict[str, Any]:
    """Agent runs per (repo, quest, role, step): from the scripted agent's log and from
    the App's run folders (``.scaffold/runs/<quest>/<STEP>/<NNN-role>``)."""
    from_log: Counter[tuple[str, str, str, str]] = Counter()
    unmatched = 0
    if invocations.exists():
        for line in invocations.read_text(encoding="utf-8").splitlines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                repo = _repo_of(str(entry.get("cwd", ""))) or "?"
                from_log[(repo, entry.get("quest_id", ""), entry["role"], entry["step"])] += 1
                unmatched += entry.get("run") is None
    from_dirs: Counter[tuple[str, str, str, str]] = Counter()
    for run_dir in (state / "repos").glob(f"{OWNER}/*/.scaffold/runs/*/*/*"):
        if run_dir.is_dir() and "-" in run_dir.name:
            repo = f"{OWNER}/{run_dir.parents[4].name}"
            role = run_dir.name.split("-", 1)[1]
            from_dirs[(repo, run_dir.parents[1].name, role, run_dir.parent.name)] += 1

    def dups(counts: Counter[tuple[str, str, str, str]]) -> int:
        return sum(n - 1 for n in counts.values() if n > 1)

    def unexpected(counts: Counter[tuple[str, str, str, str]]) -> int:
        return sum(
            n for (_, _, role, step), n in counts.items() if (role, step) not in EXPECTED_RUNS
        )

    return {
        "agent_runs": sum(from_log.values()),
        "dup_runs": dups(from_log),
        "dup_runs_dirs": dups(from_dirs),
        "unexpected_runs": unexpected(from_log),
        "unmatched_runs": unmatched,
        "dup_runs_first": [
            f"{n}x {repo} {quest} {role} {step}"
            for (repo, quest, role, step), n in from_log.most_common()
            if n > 1
        ][:8],
    }


# --------------------------------------------------------------------------- report


def finish(result: dict[str, Any]) -> dict[str, Any]:
    """Fold the per-PR data into figures; drop what does not go to JSON."""
    pulls = result.pop("_pulls", {})
    merged_at = result.pop("_merged_at", {})
    result.update(approval_to_merge(pulls, merged_at))
    p99, nothing = result["ack_ms"]["p99"], result["ack_nothing_ms"]["p99"]
    result["ack_p99_ratio"] = p99 / nothing if p99 is not None and nothing else None
    result["wall_per_quest_s"] = result["wall_s"] / result["repos"]
    return result


ROWS: list[tuple[str, str]] = [
    ("quests done", "done"),
    ("lost", "lost"),
    ("sandbox (repos)", "sandbox"),
    ("max agents cap (metrics)", "max_agents_cap"),
    ("wall s (labels -> all done)", "wall_s"),
    ("wall s per quest", "wall_per_quest_s"),
    ("label -> done p50 s", "label_to_done_s.p50"),
    ("label -> done max s", "label_to_done_s.max"),
    ("labels spread s", "label_spread_s"),
    ("start-up settle s", "startup_settle_s"),
    ("deliveries", "deliveries"),
    ("  by the App", "deliveries_by_app"),
    ("  by people", "deliveries_by_people"),
    ("  failed (non-2xx)", "deliveries_failed"),
    ("ack scaffold p50 ms", "ack_ms.p50"),
    ("ack scaffold p99 ms", "ack_ms.p99"),
    ("ack scaffold max ms", "ack_ms.max"),
    ("ack do-nothing p50 ms", "ack_nothing_ms.p50"),
    ("ack do-nothing p99 ms", "ack_nothing_ms.p99"),
    ("ack do-nothing max ms", "ack_nothing_ms.max"),
    ("ack p99 scaffold/do-nothing", "ack_p99_ratio"),
    ("simulator queue -> POST p50 s", "sim_send_lag_s.p50"),
    ("simulator queue -> POST p99 s", "sim_send_lag_s.p99"),
    ("delivery -> handled p50 s", "handled_after_s.p50"),
    ("delivery -> handled p99 s", "handled_after_s.p99"),
    ("delivery -> handled max s", "handled_after_s.max"),
    ("approval -> handled p50 s", "approval_handled_after_s.p50"),
    ("approval -> handled max s", "approval_handled_after_s.max"),
    ("handler time p50 ms", "handler_ms.p50"),
    ("handler time p99 ms", "handler_ms.p99"),
    ("handler time max ms", "handler_ms.max"),
    ("approve -> merge p50 s", "approve_to_merge_s.p50"),
    ("approve -> merge p99 s", "approve_to_merge_s.p99"),
    ("approve -> merge max s", "approve_to_merge_s.max"),
    ("approved+checks green -> merge p50 s", "ready_to_merge_s.p50"),
    ("approved+checks green -> merge max s", "ready_to_merge_s.max"),
    ("PRs merged / seen", "prs_merged/prs_seen"),
    ("approvals (re-approvals)", "approvals/reapprovals"),
    ("approvals ignored: stale (log)", "approvals_ignored_log"),
    ("approvals unused by task (log)", "approvals_unused_log"),
    ("merge refused: not yet (log)", "not_mergeable_log"),
    ("agent runs", "agent_runs"),
    ("dup runs (agent log)", "dup_runs"),
    ("dup runs (run dirs)", "dup_runs_dirs"),
    ("unexpected/unmatched runs", "unexpected_runs/unmatched_runs"),
    ("dup tasks", "dup_tasks"),
    ("dup PRs", "dup_prs"),
    ("dup quests", "dup_quests"),
    ("handler failures", "handler_failures"),
    ("quest runs", "quest_runs"),
    ("API calls", "api_calls"),
    ("API 4xx/5xx", "api_errors"),
    ("serve RSS peak MB (VmHWM)", "serve_rss_hwm_mb"),
    ("serve RSS sampled peak MB", "serve_rss_sampled_mb"),
    ("tree RSS peak MB", "tree_rss_peak_mb"),
    ("serve tree CPU s (whole life)", "serve_tree_cpu_s"),
    ("  of which wait4 saw", "serve_wait4_cpu_s"),
    ("CPU s per quest (labels->idle)", "cpu_per_quest_s"),
    ("bench process CPU s (sim...)", "bench_cpu_s"),
    ("simulator's git CPU s", "sim_git_cpu_s"),
    ("do-nothing receiver CPU s", "mirror_cpu_s"),
    ("machine busy %", "machine_busy_pct"),
    ("load average before", "loadavg_1m_before"),
    ("peak agents running (/proc)", "peak_agents_sampled"),
    ("peak agent runs open (log)", "peak_agents_log"),
    ("peak processes in tree", "peak_processes"),
    ("serve stop s", "stop_s"),
]


def value(result: dict[str, Any], path: str) -> Any:
    if "/" in path:
        return "/".join(_fmt(value(result, p)) for p in path.split("/"))
    if path.endswith("_mb"):
        kb = result.get(path.removesuffix("_mb") + "_kb")
        return kb / 1024 if isinstance(kb, int | float) else None
    node: Any = result
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else None
    return node


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if math.isnan(v):
            return "-"
        return f"{v:.0f}" if abs(v) >= 100 else f"{v:.2f}" if abs(v) >= 1 else f"{v:.3f}"
    return str(v)


def table(results: list[dict[str, Any]]) -> str:
    """One column per round (R=…#run), and a median column per R run more than once."""
    columns: list[tuple[str, list[dict[str, Any]]]] = []
    by_repos: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for r in results:
        by_repos.setdefault((r["repos"], r.get("code", "")), []).append(r)
    for (repos, code), rounds in by_repos.items():
        name = f"R={repos}" + (f" {code}" if code else "")
        for i, r in enumerate(rounds, 1):
            columns.append((name + (f"#{i}" if len(rounds) > 1 else ""), [r]))
        if len(rounds) > 1:
            columns.append((f"{name} med", rounds))
    width = max(len(label) for label, _ in ROWS) + 2
    lines = ["".ljust(width) + "".join(label.rjust(14) for label, _ in columns)]
    for label, path in ROWS:
        cells = []
        for _, rounds in columns:
            values = [value(r, path) for r in rounds]
            if len(rounds) > 1:
                numbers = [v for v in values if isinstance(v, int | float)]
                cell = _fmt(statistics.median(numbers)) if len(numbers) == len(values) else "-"
            else:
                cell = _fmt(values[0])
            cells.append(cell.rjust(14))
        lines.append(label.ljust(width) + "".join(cells))
    return "\n".join(lines)


def notes(results: list[dict[str, Any]]) -> str:
    """What went wrong or looked odd, round by round."""
    out: list[str] = []
    keys = (
        "lost_repos",
        "dup_runs_first",
        "handler_failures_first",
        "deliveries_failed_first",
        "api_errors_by_route",
        "warnings_log",
        "reviewer_errors",
        "violations",
    )
    for i, r in enumerate(results, 1):
        found: list[tuple[str, list[Any]]] = [(k, list(r[k])) for k in keys if r.get(k)]
        if r.get("serve_exited") is not None:
            found.append(("serve_exited", [str(r["serve_exited"])]))
        if not found:
            continue
        out.append(f"-- round {i} (R={r['repos']}):")
        for key, items in found:
            out.append(f"   {key}:")
            out.extend(f"     {item}" for item in items)
    return "\n".join(out)


def git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)
        return done.stdout.rstrip("\n")

    return {
        "head": git("rev-parse", "--short", "HEAD"),
        "dirty": git("status", "--short").splitlines(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repos", default="1,20", help="R per round, comma-separated")
    parser.add_argument("--runs", type=int, default=1, help="rounds per R")
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds per round")
    parser.add_argument("--quick", action="store_true", help="--repos 1,4")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--keep", type=Path, help="keep every round's files under DIR")
    parser.add_argument(
        "--env", action="append", default=[], metavar="KEY=VALUE", help="for serve (repeatable)"
    )
    parser.add_argument("--serve-args", default="", help="more `scaffold serve` arguments")
    parser.add_argument(
        "--sandbox-off", action="store_true", help="repositories say sandbox mode off"
    )
    parser.add_argument(
        "--base",
        type=Path,
        help="another checkout (e.g. a git worktree of the commit before a change): each "
        "round is also run with its app/ first on serve's PYTHONPATH, side by side",
    )
    args = parser.parse_args()
    counts = [1, 4] if args.quick else [int(r) for r in args.repos.split(",") if r.strip()]
    env = {key: val for key, _, val in (item.partition("=") for item in args.env)}
    serve_args = shlex.split(args.serve_args)
    work = args.keep or Path(tempfile.mkdtemp(prefix="bench-load-"))
    work.mkdir(parents=True, exist_ok=True)
    code = git_state()  # the code measured: as it is when the rounds start
    results: list[dict[str, Any]] = []
    try:
        codes: list[tuple[str, dict[str, str]]] = [("", env)]
        if args.base is not None:
            base_env = {**env, "PYTHONPATH": str((args.base / "app").resolve())}
            codes = [("base", base_env), ("head", env)]
        for repos in counts:
            for run in range(1, args.runs + 1):
                for code_name, code_env in codes:
                    print(f"round R={repos} run {run} {code_name}...", file=sys.stderr, flush=True)
                    setup = RoundSetup(
                        repos=repos,
                        deadline_s=args.deadline,
                        root=work / f"R{repos}-run{run}{'-' + code_name if code_name else ''}",
                        env=code_env,
                        serve_args=serve_args,
                        sandbox_off=args.sandbox_off,
                    )
                    result = finish(run_round(setup))
                    result["run"] = run
                    result["code"] = code_name
                    results.append(result)
                    print(
                        f"  done {result['done']}/{repos} in {result['wall_s']:.1f}s",
                        file=sys.stderr,
                        flush=True,
                    )
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    print(table(results))
    extra = notes(results)
    if extra:
        print("\n" + extra)
    if args.sandbox_off:
        print("\nnote: every repository said sandbox mode off (--sandbox-off)")
    if not args.no_save:
        out = write_result(
            "load-quick" if args.quick else "load",
            {
                "config": {
                    "repos": counts,
                    "runs": args.runs,
                    "deadline_s": args.deadline,
                    "env": env,
                    "serve_args": serve_args,
                    "sandbox_off": args.sandbox_off,
                    "git": code,
                    "base": str(args.base) if args.base else None,
                },
                "rounds": results,
            },
        )
        print(f"\nsaved {out.relative_to(REPO)}")


if __name__ == "__main__":
    main()
