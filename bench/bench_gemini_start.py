"""Benchmark: a Gemini run's start through scaffold against the bare ``gemini`` CLI.

What is timed: *spawn -> first model request*, from just before the process is started
to the arrival of its first ``streamGenerateContent`` request at the scripted Gemini API
(``tests/gemini/gemini_server.py``, on loopback; the server stamps each request with
``time.time()``). Every run is a Codeweaver run that answers its first request with a
``signal-back complete`` call through scaffold's real signal endpoint and ends with
text, so it is a whole run, but only its start is compared.

Variants, interleaved round by round (the order rotates each round, after one
unrecorded warm-up run of each):

- **bare**: the CLI with an MCP server, as a person would run it: ``gemini -p <prompt>
  -o stream-json -m <model> --skip-trust --allowed-mcp-server-names scaffold``, its home
  holding a ``settings.json`` with API-key auth and the ``scaffold`` server (Streamable
  HTTP, served by this process from a thread), started with :class:`subprocess.Popen`.
  As shipped otherwise: the CLI relaunches itself as a child node process.
- **bare-norelaunch**: the same with ``GEMINI_CLI_NO_RELAUNCH=true`` (which scaffold sets).
- **scaffold**: the orchestrator's path for one run: :func:`prepare_run` (the Gemini
  adapter's argv, environment and ``settings.json``), the run's :class:`RunChannel`
  (signal endpoint, egress, bubblewrap), :func:`run_agent` with the adapter's parser.
- **scaffold-nosbx**: the same without the sandbox.

The headline is ``scaffold / bare`` (medians; target at most 1.10).

Usage::

    .venv/bin/python bench/bench_gemini_start.py            # 5 rounds
    .venv/bin/python bench/bench_gemini_start.py --quick    # 2 rounds
    .venv/bin/python bench/bench_gemini_start.py --rounds 9

Results go to ``bench/results/backend_start_gemini.json``. A busy machine inflates every
figure (the load average is recorded): compare the variants of one run, not runs.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from scaffold.agent.choice import agent_for
from scaffold.agent.gemini import Gemini
from scaffold.agent.process import AgentSpec, agent_environment, run_agent
from scaffold.agent.process_group import LiveChildren
from scaffold.config import SandboxConfig, parse_config
from scaffold.quest.model import AgentRun
from scaffold.roles import Role
from scaffold.runtime.agent_runs import agent_env, prepare_run, watch_signal, write_run_files
from scaffold.runtime.prompts import PromptData
from scaffold.runtime.run_channel import RunChannel
from scaffold.sandbox.confinement import Confinement
from scaffold.sandbox.settings import resolve_sandbox
from scaffold.signal_back.records import Binding, latest_signal

REPO = Path(__file__).resolve().parents[1]
# The scripted Gemini API and the thread-served signal endpoint are test support: this
# script is run, never imported, so it takes them straight from the tests.
sys.path.insert(0, str(REPO / "tests" / "gemini"))
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))
from gemini_server import GeminiServer, When, chain, signal_back  # noqa: E402
from results_file import write_result  # noqa: E402

from harness import find_tool, served_tools  # noqa: E402

MODEL = Gemini.default_model
VARIANTS = ("bare", "bare-norelaunch", "scaffold", "scaffold-nosbx")


@dataclass
class Run:
    variant: str
    round_no: int
    label: str
    spawn: float = 0.0
    first_request: float | None = None
    ok: bool = False
    detail: str = ""

    @property
    def to_first_request_ms(self) -> float | None:
        if self.first_request is None:
            return None
        return (self.first_request - self.spawn) * 1000


class Bench:
    def __init__(self, gemini: str, root: Path, server: GeminiServer) -> None:
        self.gemini = gemini
        self.root = root
        self.server = server
        self.work = root / "work"
        self.work.mkdir()
        subprocess.run(["git", "init", "-q", str(self.work)], check=True)
        (self.work / "README.md").write_text("# bench\n", encoding="utf-8")
        self.config = parse_config(
            f"agent:\n  backend: gemini\n  command: [{json.dumps(gemini)}]\n"
            "  stuck_timeout_s: 120\n"
        )

    def env(self, home: Path) -> dict[str, str]:
        """A hermetic environment: PATH, the model host and key, a private HOME."""
        return {
            "PATH": os.environ.get("PATH", os.defpath),
            "HOME": str(home),
            "GOOGLE_GEMINI_BASE_URL": self.server.base_url,
            "GEMINI_API_KEY": "bench",
        }

    def data(self, label: str) -> PromptData:
        return PromptData(step_id=label, task_title="Benchmark", task_description="Report back.")

    def run(self, variant: str, round_no: int) -> Run:
        label = f"B{round_no:03d}-{variant}"
        run = Run(variant, round_no, label)
        if variant.startswith("scaffold"):
            asyncio.run(self._scaffold(run))
        else:
            self._bare(run)
        mine = [r for r in self.server.requests if r.step == label]
        run.first_request = mine[0].received_at if mine else None
        run.ok = run.ok and run.first_request is not None
        return run

    def _bare(self, run: Run) -> None:
        home = self.root / "homes" / run.label
        signal_dir = self.root / "signals" / run.label
        signal_dir.mkdir(parents=True)
        binding = Binding(signal_dir, run.label, Role.CODEWEAVER, "bench", self.work)
        with served_tools(binding) as config:
            entry = config["mcpServers"]["scaffold"]
            settings = {
                "security": {"auth": {"selectedType": "gemini-api-key"}},
                "privacy": {"usageStatisticsEnabled": False},
                "mcpServers": {"scaffold": {"httpUrl": entry["url"], "headers": entry["headers"]}},
            }
            (home / ".gemini").mkdir(parents=True)
            (home / ".gemini" / "settings.json").write_text(json.dumps(settings))
            env = self.env(home)
            if run.variant == "bare-norelaunch":
                env["GEMINI_CLI_NO_RELAUNCH"] = "true"
            prompt = f"Report back on step {run.label}."
            argv = [self.gemini, "-p", prompt, "-o", "stream-json", "-m", MODEL]
            argv += ["--skip-trust", "--allowed-mcp-server-names", "scaffold"]
            run.spawn = time.time()
            proc = subprocess.run(
                argv,
                cwd=self.work,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=300,
                check=False,
            )
        run.ok = proc.returncode == 0 and latest_signal(signal_dir) is not None
        if not run.ok:
            run.detail = f"exit {proc.returncode}: {proc.stderr[-300:]!r}"

    async def _scaffold(self, run: Run) -> None:
        """As ``AgentJobs._run_here`` runs an agent, minus the quest bookkeeping."""
        private = self.root / "private" / run.label
        signal_dir = self.root / "signals" / run.label
        signal_dir.mkdir(parents=True)
        binding = Binding(signal_dir, run.label, Role.CODEWEAVER, "bench", self.work)
        confinement = Confinement(
            repo=self.work, cwd=self.work, private=private, worktree=self.work
        )
        mode = "off" if run.variant == "scaffold-nosbx" else "bwrap"
        sandbox = resolve_sandbox(SandboxConfig(mode=mode), strict=False)
        base_env = agent_environment(self.env(private / "home"), {})
        backend = agent_for(self.config.agent, Role.CODEWEAVER).backend
        channel = RunChannel(
            sandbox,
            binding,
            confinement,
            python=sys.executable,
            env=base_env,
            model_host=backend.model_host(base_env),
        )
        async with channel:
            prepared = prepare_run(
                self.config,
                AgentRun(role=Role.CODEWEAVER),
                self.data(run.label),
                quest_id="bench",
                signal_dir=signal_dir,
                signal=channel.signal,
                home=private / "home",
                env=base_env,
            )
            write_run_files(prepared.invocation.files)
            argv, wrapped = channel.wrap(prepared.invocation.argv, agent_env(base_env, prepared))
            spec = AgentSpec(
                argv=argv,
                cwd=self.work,
                base_env=wrapped,
                stuck_timeout_s=self.config.agent.stuck_timeout_s,
                pass_fds=channel.pass_fds,
                parse=prepared.parse,
            )
            stop = asyncio.Event()
            run.spawn = time.time()
            agent = asyncio.create_task(
                run_agent(spec, children=LiveChildren(), stop_requested=stop)
            )
            watcher = asyncio.create_task(watch_signal(channel.signalled, stop))
            try:
                outcome = await agent
            finally:
                watcher.cancel()
        run.ok = outcome.ok and latest_signal(signal_dir) is not None
        if not run.ok:
            run.detail = f"exit {outcome.exit_code}: {outcome.stderr_tail[-300:]!r}"


def _stats(values: list[float]) -> dict[str, Any]:
    if not values:
        return {"n": 0}
    return {
        "n": len(values),
        "median_ms": statistics.median(values),
        "min_ms": min(values),
        "max_ms": max(values),
    }


def analyse(runs: list[Run]) -> dict[str, Any]:
    by: dict[str, list[float]] = {v: [] for v in VARIANTS}
    for r in runs:
        if r.ok and r.to_first_request_ms is not None:
            by[r.variant].append(r.to_first_request_ms)
    medians = {v: statistics.median(xs) for v, xs in by.items() if xs}
    ratios: dict[str, float] = {}
    for num, den in (
        ("scaffold", "bare"),
        ("scaffold", "bare-norelaunch"),
        ("scaffold-nosbx", "bare-norelaunch"),
        ("scaffold", "scaffold-nosbx"),
    ):
        if num in medians and den in medians:
            ratios[f"{num} / {den}"] = medians[num] / medians[den]
    # Per round, the runs sat side by side: the ratio of each pair, then its median.
    per_round: dict[str, float] = {}
    for den in ("bare", "bare-norelaunch"):
        paired: list[float] = []
        for n in sorted({r.round_no for r in runs}):
            pair = {r.variant: r.to_first_request_ms for r in runs if r.round_no == n and r.ok}
            num, base = pair.get("scaffold"), pair.get(den)
            if num and base:
                paired.append(num / base)
        if paired:
            per_round[f"scaffold / {den}"] = statistics.median(paired)
    return {
        "spawn_to_first_request": {v: _stats(xs) for v, xs in by.items()},
        "ratios_of_medians": ratios,
        "per_round_ratio_medians": per_round,
        "target": "scaffold / bare <= 1.10",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="2 rounds")
    args = parser.parse_args()
    rounds = 2 if args.quick else args.rounds
    gemini = find_tool("gemini", "SCAFFOLD_GEMINI_BIN")
    if gemini is None:
        sys.exit("the gemini CLI is required: ./scripts/install --test")
    version = subprocess.run(
        [gemini, "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    answer = chain(signal_back("complete", summary="benchmark"), final="Done.", when=When())
    root = Path(tempfile.mkdtemp(prefix="bench-gemini-"))
    runs: list[Run] = []
    try:
        with GeminiServer(answer) as server:
            # Every turn may answer any number of runs.
            for turn in server.script:
                turn.times = None
            bench = Bench(gemini, root, server)
            for variant in VARIANTS:  # warm-up (page cache, node's compile cache)
                warm = bench.run(variant, 0)
                if not warm.ok:
                    sys.exit(f"warm-up {variant} failed: {warm.detail}")
            for n in range(1, rounds + 1):
                shift = n % len(VARIANTS)
                for variant in VARIANTS[shift:] + VARIANTS[:shift]:
                    run = bench.run(variant, n)
                    runs.append(run)
                    ms = run.to_first_request_ms
                    shown = f"{ms:7.0f} ms" if ms is not None else "   n/a"
                    print(f"round {n} {variant:16s} {shown} {'' if run.ok else run.detail}")
            server.check()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    result = {
        "rounds": rounds,
        "gemini_version": version,
        "model": MODEL,
        "failures": [asdict(r) for r in runs if not r.ok],
        "analysis": analyse(runs),
        "runs": [
            {"variant": r.variant, "round": r.round_no, "ms": r.to_first_request_ms} for r in runs
        ],
    }
    out = write_result("backend_start_gemini", result)
    print(json.dumps(result["analysis"], indent=2))
    print(f"written to {out}")


if __name__ == "__main__":
    main()
