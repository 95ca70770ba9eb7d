"""``scaffold demo``: a small project driven end to end by scripted agents.

The demo builds a git repository with a Backlog.md backlog of six tasks, then runs
the real orchestrator with three slots. The agent is ``python -m scaffold.demo.scripted``
(the same contract as Claude Code: stream-json out, ``signal-back`` through the real MCP
server), so every path below goes through the code that drives ``claude``:

- TASK-1 asks a question; the demo answers it the way a person would (``scaffold answer``)
  and the same session resumes with the answer;
- TASK-2 runs out of context (``partially-complete``) and continues from its continuation point;
- TASK-3 leaves a broken file: Ward fails and Spiritmender fixes it;
- TASK-4's first agent run crashes and is retried, resuming the session;
- TASK-5 adds a module without touching the architecture diagram: DiagramCheck blocks it,
  Codeweaver updates the diagram, and it passes;
- TASK-6's Siegemaster hands a gap to Codeweaver (``needs-role-followup``, ``resume: true``)
  and is resumed afterwards.
Every task is merged into ``main`` and marked Done in Backlog.md.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.demo import scripted
from scaffold.runtime import inbox
from scaffold.runtime.preflight import scaffold_command
from scaffold.runtime.session import open_or_create_quest, run_quest, state_root
from scaffold.runtime.view import Reporter

ANSWER = "Hello, demo"
ARCH = "docs/diagrams/02-architecture.md"

CHECK_PY = '''\
"""The demo's Ward: every module compiles and none is left marked broken."""
import pathlib
import py_compile
import sys

bad = 0
for path in sorted(pathlib.Path("src").rglob("*.py")):
    py_compile.compile(str(path), doraise=True)
    if "TODO-BROKEN" in path.read_text():
        print(f"{path}: still marked TODO-BROKEN")
        bad += 1
sys.exit(1 if bad else 0)
'''

TASKS: list[dict[str, Any]] = [
    {
        "title": "Add the greeting module",
        "deps": [],
        "priority": "high",
        "ac": ["greet() returns the agreed greeting"],
    },
    {
        "title": "Add the farewell module",
        "deps": [],
        "priority": "medium",
        "ac": ["farewell() says goodbye"],
    },
    {
        "title": "Add the command line",
        "deps": ["TASK-1", "TASK-2"],
        "priority": "medium",
        "ac": ["main() prints greeting and farewell"],
    },
    {
        "title": "Add the settings loader",
        "deps": [],
        "priority": "low",
        "ac": ["load() returns defaults"],
    },
    {
        "title": "Add the report module",
        "deps": ["TASK-4"],
        "priority": "medium",
        "ac": ["report() summarises settings"],
    },
    {
        "title": "Write the usage guide",
        "deps": ["TASK-3", "TASK-5"],
        "priority": "low",
        "ac": ["docs/usage.md explains the command"],
    },
]


MODULES = ("greet", "farewell", "cli", "settings", "report")
_REPLACE = (
    "import pathlib, sys; p = pathlib.Path(sys.argv[1]); "
    "p.write_text(p.read_text().replace(sys.argv[2], sys.argv[3]))"
)


def _arch(module: str) -> dict[str, Any]:
    """Name the module in its own line of the diagram, so parallel tasks merge cleanly."""
    return {
        "run": [
            sys.executable,
            "-c",
            _REPLACE,
            ARCH,
            f"%% slot {module}",
            f"demo --> demo.{module}",
        ]
    }


def _complete(step: str, summary: str) -> dict[str, Any]:
    return {"signal": {"signal": "complete", "stepId": step, "summary": summary}}


def demo_script() -> dict[str, Any]:
    runs: list[dict[str, Any]] = [
        # TASK-1: a question, answered, then the same session resumes.
        {
            "role": "codeweaver",
            "step": "TASK-1",
            "attempt": 1,
            "actions": [
                {"say": "Two greetings are plausible; asking the person."},
                {
                    "signal": {
                        "signal": "needs-user-input",
                        "stepId": "TASK-1",
                        "question": "Which greeting should greet() return?",
                        "context": "The task says 'the agreed greeting' but none is written down.",
                    }
                },
            ],
        },
        {
            "role": "codeweaver",
            "step": "TASK-1",
            "attempt": 2,
            "expect_resumed": True,
            "actions": [
                {"expect_prompt_contains": ANSWER},
                {
                    "write": "src/demo/greet.py",
                    "content": f'def greet() -> str:\n    return "{ANSWER}"\n',
                },
                _arch("greet"),
                _complete("TASK-1", "greet() returns the greeting the person chose"),
            ],
        },
        # TASK-2: out of context, then a continuation from the continuation point.
        {
            "role": "codeweaver",
            "step": "TASK-2",
            "attempt": 1,
            "actions": [
                {"write": "src/demo/farewell.py", "content": '"""Farewells."""\n'},
                {
                    "signal": {
                        "signal": "partially-complete",
                        "stepId": "TASK-2",
                        "progress": "created the module file",
                        "continuationPoint": "write farewell() and its docstring",
                    }
                },
            ],
        },
        {
            "role": "codeweaver",
            "step": "TASK-2",
            "attempt": 2,
            "actions": [
                {"expect_prompt_contains": "write farewell() and its docstring"},
                {
                    "append": "src/demo/farewell.py",
                    "content": 'def farewell() -> str:\n    return "Goodbye"\n',
                },
                _arch("farewell"),
                _complete("TASK-2", "farewell() added"),
            ],
        },
        # TASK-3: Ward fails, Spiritmender fixes.
        {
            "role": "codeweaver",
            "step": "TASK-3",
            "actions": [
                {
                    "write": "src/demo/cli.py",
                    "content": "# TODO-BROKEN: wire the modules\ndef main() -> None:\n    pass\n",
                },
                _arch("cli"),
                _complete("TASK-3", "main() added (wiring left for later)"),
            ],
        },
        {
            "role": "spiritmender",
            "step": "TASK-3",
            "actions": [
                {"expect_prompt_contains": "TODO-BROKEN"},
                {
                    "write": "src/demo/cli.py",
                    "content": (
                        "from demo.farewell import farewell\nfrom demo.greet import greet\n\n\n"
                        "def main() -> None:\n    print(greet())\n    print(farewell())\n"
                    ),
                },
                _complete("TASK-3", "wired greet and farewell into main(); Ward is green"),
            ],
        },
        # TASK-4: the first run crashes, the retry resumes the session.
        {
            "role": "codeweaver",
            "step": "TASK-4",
            "attempt": 1,
            "actions": [
                {"say": "Loading settings..."},
                {"crash": 1},
            ],
        },
        {
            "role": "codeweaver",
            "step": "TASK-4",
            "attempt": 2,
            "actions": [
                {"expect_prompt_contains": "previous attempt failed"},
                {
                    "write": "src/demo/settings.py",
                    "content": 'def load() -> dict[str, str]:\n    return {"name": "demo"}\n',
                },
                _arch("settings"),
                _complete("TASK-4", "load() returns the defaults"),
            ],
        },
        # TASK-5: a new module without a diagram change is blocked, then fixed.
        {
            "role": "codeweaver",
            "step": "TASK-5",
            "attempt": 1,
            "actions": [
                {
                    "write": "src/demo/report.py",
                    "content": (
                        "from demo.settings import load\n\n\n"
                        "def report() -> str:\n    return ', '.join(load())\n"
                    ),
                },
                _complete("TASK-5", "report() added"),
            ],
        },
        {
            "role": "codeweaver",
            "step": "TASK-5",
            "attempt": 2,
            "actions": [
                {"expect_prompt_contains": ARCH},
                _arch("report"),
                _complete("TASK-5", "architecture diagram names demo.report"),
            ],
        },
        # TASK-6: Siegemaster hands a gap to Codeweaver and is resumed after it.
        {
            "role": "codeweaver",
            "step": "TASK-6",
            "attempt": 1,
            "actions": [
                {"write": "docs/usage.md", "content": "# Usage\n\nRun `python -m demo.cli`.\n"},
                _complete("TASK-6", "usage guide written"),
            ],
        },
        {
            "role": "siegemaster",
            "step": "TASK-6",
            "attempt": 1,
            "actions": [
                {
                    "signal": {
                        "signal": "needs-role-followup",
                        "stepId": "TASK-6",
                        "targetRole": "codeweaver",
                        "reason": "the guide has no example output",
                        "context": "add the two lines main() prints",
                        "resume": True,
                    }
                },
            ],
        },
        {
            "role": "codeweaver",
            "step": "TASK-6",
            "attempt": 2,
            "actions": [
                {"expect_prompt_contains": "no example output"},
                {
                    "append": "docs/usage.md",
                    "content": f"\nIt prints:\n\n    {ANSWER}\n    Goodbye\n",
                },
                _complete("TASK-6", "example output added"),
            ],
        },
        {
            "role": "siegemaster",
            "step": "TASK-6",
            "attempt": 2,
            "expect_resumed": True,
            "actions": [_complete("TASK-6", "edge cases covered after the follow-up")],
        },
    ]
    # Everyone else completes.
    for n in range(1, len(TASKS) + 1):
        step = f"TASK-{n}"
        runs.append(
            {
                "role": "siegemaster",
                "step": step,
                "actions": [
                    {"say": "Checked empty input and imports."},
                    _complete(step, "edge cases hold"),
                ],
            }
        )
        runs.append(
            {
                "role": "lawbringer",
                "step": step,
                "actions": [_complete(step, "reviewed: small, clear, tested")],
            }
        )
    return {"runs": runs}


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def build_demo_repo(repo: Path) -> Path:
    """Create the demo repository and its backlog; returns the agent script path."""
    repo.mkdir(parents=True, exist_ok=True)
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "config", "user.name", "demo")
    _git(repo, "config", "user.email", "demo@localhost")
    (repo / ".github").mkdir(exist_ok=True)
    python = json.dumps(sys.executable)
    (repo / ".github" / "scaffold.yml").write_text(
        "slots: 3\n"
        f"agent:\n  command: [{python}, -m, scaffold.demo.scripted]\n"
        "  stuck_timeout_s: 20\n  max_attempts: 3\n"
        f"ward:\n  - [{python}, check.py]\n"
        "approval: auto\n",
        encoding="utf-8",
    )
    (repo / "check.py").write_text(CHECK_PY, encoding="utf-8")
    (repo / "src" / "demo").mkdir(parents=True)
    (repo / "src" / "demo" / "__init__.py").write_text("", encoding="utf-8")
    diagrams = repo / "docs" / "diagrams"
    diagrams.mkdir(parents=True)
    slots = "".join(f"    %% slot {m}\n    %%\n    %%\n" for m in MODULES)
    (diagrams / "02-architecture.md").write_text(
        f"# Architecture\n\n```mermaid\nflowchart TD\n    demo[demo package]\n{slots}```\n",
        encoding="utf-8",
    )
    for sub in ("tasks", "completed", "drafts"):
        (repo / "backlog" / sub).mkdir(parents=True)
    (repo / "backlog" / "config.yml").write_text(
        'project_name: "demo"\ndefault_status: "To Do"\n'
        'statuses: ["To Do", "In Progress", "Done"]\nauto_commit: false\ntask_prefix: "task"\n',
        encoding="utf-8",
    )
    for spec in TASKS:
        bl.create_task(
            repo,
            spec["title"],
            description=f"Demo task: {spec['title'].lower()}.",
            dependencies=spec["deps"],
            priority=spec["priority"],
            acceptance_criteria=spec["ac"],
        )
    (repo / ".gitignore").write_text(".scaffold/\n.demo-agent/\n__pycache__/\n", encoding="utf-8")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "demo project with a Backlog.md backlog")
    # The scripted agent's script and state live in an ignored folder of the repository
    # (not scaffold's state, which agents never see), so a demo never sees another
    # demo's attempt counters.
    agent_dir = repo / ".demo-agent"
    agent_dir.mkdir(parents=True)
    script = agent_dir / "script.json"
    script.write_text(json.dumps(demo_script(), indent=2), encoding="utf-8")
    return script


async def _run(repo: Path, reporter: Reporter) -> int:
    writer = open_or_create_quest(repo, None)
    report = await run_quest(repo, load_config(repo), writer, reporter)
    reporter.line(f"run ended: exit {report.exit_code}: {report.reason}")
    return report.exit_code


def run_demo(directory: Path | None) -> int:
    keep = directory is not None
    base = Path(tempfile.mkdtemp(prefix="scaffold-demo-")) if directory is None else None
    repo = (directory or (base or Path()) / "demo").absolute()
    if repo.exists() and any(repo.iterdir()):
        print(f"scaffold demo: {repo} is not empty", file=sys.stderr)
        return 2
    out = Reporter()
    script = build_demo_repo(repo)
    os.environ.update(scripted.agent_env(script, script.parent / "state"))
    out.line(f"demo repository: {repo} (6 tasks, 3 slots, scripted agents)")
    try:
        code = asyncio.run(_run(repo, out))
        rounds = 1
        while code == 3 and rounds < 4:
            rounds += 1
            quest = open_or_create_quest(repo, None)
            try:
                pending = quest.quest.pending_questions()
                quest_id = quest.quest.id
            finally:
                quest.close()
            for q in pending:
                out.line(f'a person answers: scaffold answer {q.id} "{ANSWER}"')
                inbox.post(
                    state_root(repo), inbox.make("answer", quest_id, question_id=q.id, text=ANSWER)
                )
            code = asyncio.run(_run(repo, out))
        snapshot = bl.load_backlog(repo)
        done = [t.id for t in snapshot.tasks if t.status == "Done"]
        log = subprocess.run(
            ["git", "log", "--oneline", "--merges", "main"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=False,
        ).stdout
        out.line(f"Backlog.md: {len(done)} of {len(snapshot.tasks)} task(s) Done")
        out.line(f"merge commits on main: {len(log.splitlines())}")
        ok = code == 0 and len(done) == len(TASKS)
        out.line("demo finished: every task merged and Done" if ok else "demo FAILED")
        if keep:
            status = f"{scaffold_command()} status"
            out.line(f"inspect it: cd {repo} && git log --graph --oneline && {status}")
        return 0 if ok else 1
    finally:
        if not keep and base is not None:
            shutil.rmtree(base, ignore_errors=True)
