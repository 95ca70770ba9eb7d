"""The App's DiagramCheck on a pull request from a fork: the check reads the fork's code
and never runs it, takes its settings from the default branch (the fork cannot relax
them), needs nothing from the fork (no secret, no token of its own), and reports like on
any pull request: a check run with annotations and one comment."""

from __future__ import annotations

from pathlib import Path

from app_harness import app_process, repo_files, wait_for, write_script

from ghsim import GitHubSimulator

REPO = "acme/widgets"
FORK = "mallory/widgets"
ARCH = "docs/diagrams/02-architecture.md"


def test_a_fork_pull_request_is_checked_without_running_its_code(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    marker = tmp_path / "the-fork-code-ran"
    sim.create_repo(
        "acme",
        "widgets",
        {
            **repo_files(),
            "src/shop/__init__.py": "",
            ARCH: "# Architecture\n\n```mermaid\nflowchart LR\n  shop\n```\n",
        },
    )
    sim.set_permission(REPO, "mallory", "read")
    sim.install("acme", ["widgets"])
    write_script(tmp_path, [])
    hostile = f"import pathlib\n\npathlib.Path({str(marker)!r}).write_text('ran')\n"
    with app_process(sim, tmp_path):
        sim.fork(REPO, "mallory")
        head = sim.push_files(
            FORK,
            "payments",
            {
                "src/shop/payment.py": hostile + "\n\ndef pay() -> None:\n    pass\n",
                "conftest.py": hostile,
                "setup.py": hostile,
                ".gitattributes": "* diff=evil filter=evil\n",
                ".github/scaffold.yml": "diagrams:\n  ignore: ['**']\n",
            },
            "mallory",
            "payments",
        )
        number = sim.open_pull(REPO, "payments", by="mallory", title="Payments", head_repo=FORK)

        def done() -> object:
            runs = [
                r
                for r in sim.repo(REPO).check_runs.values()
                if r.head_sha == head
                and r.name == "scaffold/diagram-check"
                and r.status == "completed"
            ]
            return runs[0] if runs else None

        run = wait_for("the fork's check run", done)
        assert run.conclusion == "failure"
        assert [a["path"] for a in run.annotations] == ["src/shop/payment.py"]
        wait_for(
            "the comment",
            lambda: (
                any(
                    c.issue_number == number and "scaffold:diagram-check" in c.body
                    for c in sim.repo(REPO).comments.values()
                )
                or None
            ),
        )
    assert not marker.exists()
