"""``scaffold demo``: a small project driven end to end by scripted agents.

It builds a git repository with a Backlog.md backlog of six tasks and runs the real
orchestrator with three slots and the scripted agent, through every path: a question
answered (TASK-1), a continuation (TASK-2), a Ward failure fixed by Spiritmender
(TASK-3), a crash retried (TASK-4), a DiagramCheck block fixed (TASK-5) and a
Siegemaster follow-up resumed (TASK-6). Every task ends merged and Done.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.demo import scripted
from scaffold.git.runner import run_git
from scaffold.runtime import inbox
from scaffold.runtime.preflight import scaffold_command
from scaffold.runtime.session import open_or_create_quest, read_all_quests, run_quest, state_root
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

# (title, dependencies, priority, acceptance criterion)
TASKS: list[tuple[str, list[str], str, str]] = [
    ("Add the greeting module", [], "high", "greet() returns the agreed greeting"),
    ("Add the farewell module", [], "medium", "farewell() says goodbye"),
    ("Add the command line", ["TASK-1", "TASK-2"], "medium", "main() prints greeting and farewell"),
    ("Add the settings loader", [], "low", "load() returns defaults"),
    ("Add the report module", ["TASK-4"], "medium", "report() summarises settings"),
    ("Write the usage guide", ["TASK-3", "TASK-5"], "low", "docs/usage.md explains the command"),
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


def _agent(
    role: str, step: str, attempt: int | None, *actions: dict[str, Any], resumed: bool = False
) -> dict[str, Any]:
    """The run of ``role`` on ``step`` (its ``attempt``-th, when given) and its actions."""
    run: dict[str, Any] = {"role": role, "step": step, "actions": list(actions)}
    if attempt is not None:
        run["attempt"] = attempt
    if resumed:
        run["expect_resumed"] = True
    return run


def demo_script() -> dict[str, Any]:
    cli_py = (
        "from demo.farewell import farewell\nfrom demo.greet import greet\n\n\n"
        "def main() -> None:\n    print(greet())\n    print(farewell())\n"
    )
    report_py = (
        "from demo.settings import load\n\n\ndef report() -> str:\n    return ', '.join(load())\n"
    )
    runs = [
        # TASK-1: a question, answered, then the same session resumes.
        _agent(
            "codeweaver",
            "TASK-1",
            1,
            {"say": "Two greetings are plausible; asking the person."},
            {
                "signal": {
                    "signal": "needs-user-input",
                    "stepId": "TASK-1",
                    "question": "Which greeting should greet() return?",
                    "context": "The task says 'the agreed greeting' but none is written down.",
                }
            },
        ),
        _agent(
            "codeweaver",
            "TASK-1",
            2,
            {"expect_prompt_contains": ANSWER},
            {
                "write": "src/demo/greet.py",
                "content": f'def greet() -> str:\n    return "{ANSWER}"\n',
            },
            _arch("greet"),
            _complete("TASK-1", "greet() returns the greeting the person chose"),
            resumed=True,
        ),
        # TASK-2: out of context, then a continuation from the continuation point.
        _agent(
            "codeweaver",
            "TASK-2",
            1,
            {"write": "src/demo/farewell.py", "content": '"""Farewells."""\n'},
            {
                "signal": {
                    "signal": "partially-complete",
                    "stepId": "TASK-2",
                    "progress": "created the module file",
                    "continuationPoint": "write farewell() and its docstring",
                }
            },
        ),
        _agent(
            "codeweaver",
            "TASK-2",
            2,
            {"expect_prompt_contains": "write farewell() and its docstring"},
            {
                "append": "src/demo/farewell.py",
                "content": 'def farewell() -> str:\n    return "Goodbye"\n',
            },
            _arch("farewell"),
            _complete("TASK-2", "farewell() added"),
        ),
        # TASK-3: Ward fails, Spiritmender fixes.
        _agent(
            "codeweaver",
            "TASK-3",
            None,
            {
                "write": "src/demo/cli.py",
                "content": "# TODO-BROKEN: wire the modules\ndef main() -> None:\n    pass\n",
            },
            _arch("cli"),
            _complete("TASK-3", "main() added (wiring left for later)"),
        ),
        _agent(
            "spiritmender",
            "TASK-3",
            None,
            {"expect_prompt_contains": "TODO-BROKEN"},
            {"write": "src/demo/cli.py", "content": cli_py},
            _complete("TASK-3", "wired greet and farewell into main(); Ward is green"),
        ),
        # TASK-4: the first run crashes, the retry resumes the session.
        _agent("codeweaver", "TASK-4", 1, {"say": "Loading settings..."}, {"crash": 1}),
        _agent(
            "codeweaver",
            "TASK-4",
            2,
            {"expect_prompt_contains": "previous attempt failed"},
            {
                "write": "src/demo/settings.py",
                "content": 'def load() -> dict[str, str]:\n    return {"name": "demo"}\n',
            },
            _arch("settings"),
            _complete("TASK-4", "load() returns the defaults"),
        ),
        # TASK-5: a new module without a diagram change is blocked, then fixed.
        _agent(
            "codeweaver",
            "TASK-5",
            1,
            {"write": "src/demo/report.py", "content": report_py},
            _complete("TASK-5", "report() added"),
        ),
        _agent(
            "codeweaver",
            "TASK-5",
            2,
            {"expect_prompt_contains": ARCH},
            _arch("report"),
            _complete("TASK-5", "architecture diagram names demo.report"),
        ),
        # TASK-6: Siegemaster hands a gap to Codeweaver and is resumed after it.
        _agent(
            "codeweaver",
            "TASK-6",
            1,
            {"write": "docs/usage.md", "content": "# Usage\n\nRun `python -m demo.cli`.\n"},
            _complete("TASK-6", "usage guide written"),
        ),
        _agent(
            "siegemaster",
            "TASK-6",
            1,
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
        ),
        _agent(
            "codeweaver",
            "TASK-6",
            2,
            {"expect_prompt_contains": "no example output"},
            {"append": "docs/usage.md", "content": f"\nIt prints:\n\n    {ANSWER}\n    Goodbye\n"},
            _complete("TASK-6", "example output added"),
        ),
        _agent(
            "siegemaster",
            "TASK-6",
            2,
            _complete("TASK-6", "edge cases covered after the follow-up"),
            resumed=True,
        ),
    ]
    # Everyone else completes.
    for n in range(1, len(TASKS) + 1):
        step = f"TASK-{n}"
        runs.append(
            _agent(
                "siegemaster",
                step,
                None,
                {"say": "Checked empty input and imports."},
                _complete(step, "edge cases hold"),
            )
        )
        runs.append(
            _agent("lawbringer", step, None, _complete(step, "reviewed: small, clear, tested"))
        )
    return {"runs": runs}


def build_demo_repo(repo: Path) -> Path:
    """Create the demo repository and its backlog; returns the agent script path."""
    repo.mkdir(parents=True, exist_ok=True)
    run_git(["init", "-q", "-b", "main"], repo)
    run_git(["config", "user.name", "demo"], repo)
    run_git(["config", "user.email", "demo@localhost"], repo)
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
    for title, deps, priority, criterion in TASKS:
        bl.create_task(
            repo,
            title,
            description=f"Demo task: {title.lower()}.",
            dependencies=deps,
            priority=priority,
            acceptance_criteria=[criterion],
        )
    (repo / ".gitignore").write_text(".scaffold/\n.demo-agent/\n__pycache__/\n", encoding="utf-8")
    run_git(["add", "-A"], repo)
    run_git(["commit", "-q", "-m", "demo project with a Backlog.md backlog"], repo)
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
    if directory is not None:
        return _demo(directory.absolute(), keep=True)
    with tempfile.TemporaryDirectory(prefix="scaffold-demo-", ignore_cleanup_errors=True) as base:
        return _demo(Path(base) / "demo", keep=False)


def _demo(repo: Path, keep: bool) -> int:
    if repo.exists() and any(repo.iterdir()):
        print(f"scaffold demo: {repo} is not empty", file=sys.stderr)
        return 2
    out = Reporter()
    script = build_demo_repo(repo)
    os.environ.update(scripted.agent_env(script, script.parent / "state"))
    out.line(f"demo repository: {repo} (6 tasks, 3 slots, scripted agents)")
    code = asyncio.run(_run(repo, out))
    for _ in range(3):
        if code != 3:
            break
        for quest in read_all_quests(repo):
            for q in quest.pending_questions():
                out.line(f'a person answers: scaffold answer {q.id} "{ANSWER}"')
                answer = inbox.make("answer", quest.id, question_id=q.id, text=ANSWER)
                inbox.post(state_root(repo), answer)
        code = asyncio.run(_run(repo, out))
    snapshot = bl.load_backlog(repo)
    done = [t.id for t in snapshot.tasks if t.status == "Done"]
    merges = run_git(["rev-list", "--count", "--merges", "main"], repo).stdout.strip()
    out.line(f"Backlog.md: {len(done)} of {len(snapshot.tasks)} task(s) Done")
    out.line(f"merge commits on main: {merges}")
    ok = code == 0 and len(done) == len(TASKS)
    out.line("demo finished: every task merged and Done" if ok else "demo FAILED")
    if keep:
        status = f"{scaffold_command()} status"
        out.line(f"inspect it: cd {repo} && git log --graph --oneline && {status}")
    return 0 if ok else 1
