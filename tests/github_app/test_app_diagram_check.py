"""DiagramCheck as the App's check on any pull request of an installed repository:
a check run with annotations, ONE comment listing what is missing, turned into a pass
when the diagram is fixed, and a re-run on request."""

from __future__ import annotations

from pathlib import Path

from app_harness import app_process, repo_files, wait_for, write_script
from github import Auth, Github

from ghsim import GitHubSimulator

REPO = "acme/widgets"
ARCH = "docs/diagrams/02-architecture.md"


def _arch(*modules: str) -> str:
    nodes = "\n".join(f"  {m}" for m in modules)
    return f"# Architecture\n\n```mermaid\nflowchart LR\n{nodes}\n```\n"


def _runs(sim: GitHubSimulator, sha: str) -> list[object]:
    return [
        r
        for r in sim.repo(REPO).check_runs.values()
        if r.head_sha == sha and r.name == "scaffold/diagram-check" and r.status == "completed"
    ]


def _our_comments(sim: GitHubSimulator, number: int) -> list[object]:
    return [
        c
        for c in sim.repo(REPO).comments.values()
        if c.issue_number == number and "scaffold:diagram-check" in c.body
    ]


def test_any_pull_request_is_blocked_until_its_diagram_names_the_new_module(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    sim.add_user("bob")
    files = {
        **repo_files(),
        "src/shop/__init__.py": "",
        "src/shop/cart.py": "def total() -> int:\n    return 0\n",
        ARCH: _arch("shop", "cart"),
    }
    sim.create_repo("acme", "widgets", files)
    sim.set_permission(REPO, "bob", "write")
    sim.install("acme", ["widgets"])
    write_script(tmp_path, [])
    with app_process(sim, tmp_path):
        head = sim.push_files(
            REPO,
            "feature",
            {"src/shop/payment.py": "def pay() -> None:\n    pass\n"},
            by="bob",
            message="payments",
        )
        gh = Github(base_url=sim.url, auth=Auth.Token(sim.installation_token(REPO)))
        pr = gh.get_repo(REPO).create_pull(title="Payments", body="", head="feature", base="main")

        run = wait_for("a failing check run", lambda: next(iter(_runs(sim, head)), None))
        assert run.conclusion == "failure"
        assert any(a["path"] == "src/shop/payment.py" for a in run.annotations)
        comment = wait_for("the comment", lambda: next(iter(_our_comments(sim, pr.number)), None))
        assert "payment" in comment.body

        fixed = sim.push_files(
            REPO, "feature", {ARCH: _arch("shop", "cart", "payment")}, by="bob", message="diagram"
        )
        run = wait_for("a passing check run", lambda: next(iter(_runs(sim, fixed)), None))
        assert run.conclusion == "success"
        wait_for(
            "the comment turned into a pass",
            lambda: (
                "payment" not in _our_comments(sim, pr.number)[0].body.split("\n", 2)[-1] or None
            ),
        )
        assert len(_our_comments(sim, pr.number)) == 1  # edited in place, never a second one

        sim.rerequest_check_run(REPO, run.id, by="bob")
        wait_for("a re-run", lambda: len(_runs(sim, fixed)) >= 2 or None)
        gh.close()
