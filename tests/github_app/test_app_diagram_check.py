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


def _ours(sim: GitHubSimulator, sha: str) -> list[object]:
    """The completed DiagramCheck runs on ``sha`` that the App under test created."""
    repo = sim.repo(REPO)
    return [r for r in _runs(sim, sha) if repo.check_suites[r.suite_id].app_id == sim.app_id]


def _repo_with_a_writer(sim: GitHubSimulator) -> None:
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


def _open_pr(sim: GitHubSimulator, branch: str) -> None:
    gh = Github(base_url=sim.url, auth=Auth.Token(sim.installation_token(REPO)))
    gh.get_repo(REPO).create_pull(title=branch, body="", head=branch, base="main")
    gh.close()


def test_a_check_of_the_same_name_from_another_app_does_not_stand_in(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _repo_with_a_writer(sim)
    lookalike = sim.add_app("lookalike-ci")
    write_script(tmp_path, [])
    with app_process(sim, tmp_path):
        head = sim.push_files(
            REPO, "feature", {"src/shop/payment.py": "def pay() -> None:\n    pass\n"}, "bob", "p"
        )
        # Another App (any workflow could) reports a passing "scaffold/diagram-check" first.
        sim.add_check_run(REPO, head, "scaffold/diagram-check", app_id=lookalike)
        _open_pr(sim, "feature")
        run = wait_for("the App's own check run", lambda: next(iter(_ours(sim, head)), None))
        assert run.conclusion == "failure"
        assert any(a["path"] == "src/shop/payment.py" for a in run.annotations)


def test_a_file_the_analyzer_cannot_get_through_fails_the_check(
    github_sim: GitHubSimulator, tmp_path: Path
) -> None:
    sim = github_sim
    _repo_with_a_writer(sim)
    # Deep enough that Python's own parser gives up (RecursionError), a few kilobytes long.
    deep = "class Deep(shop" + ".x" * 5000 + "):\n    pass\n"
    write_script(tmp_path, [])
    with app_process(sim, tmp_path):
        head = sim.push_files(REPO, "deep", {"src/shop/deep.py": deep}, "bob", "deep")
        _open_pr(sim, "deep")
        run = wait_for("the check run concluded", lambda: next(iter(_ours(sim, head)), None))
    assert run.conclusion == "failure"
    assert run.output["title"] == "DiagramCheck could not run"
    assert "RecursionError" in run.output["summary"]
    left = [r for r in sim.repo(REPO).check_runs.values() if r.head_sha == head]
    assert all(r.status == "completed" for r in left)  # none left in progress
