"""Delivery payloads built from the simulator's state (the shapes are the examples')."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import objects as ob
from .gitrepo import ZERO, BareRepo
from .state import CheckRun, CheckSuite, Pull, RepoState, WorkflowRun, now_iso
from .webhooks import DROP, Exact

if TYPE_CHECKING:
    from .server import GitHubSimulator


def base(sim: GitHubSimulator, repo: RepoState, sender: str) -> dict[str, Any]:
    out: dict[str, Any] = {
        "repository": ob.repo_obj(sim.urls, repo, sim.users[repo.owner]),
        "sender": ob.user_obj(sim.urls, sim.users[sender]),
    }
    inst = sim.installation_for(repo.full_name)
    if inst is not None:
        out["installation"] = {"id": inst.id, "node_id": ob.node_id("Installation", inst.id)}
    return out


def issues(
    sim: GitHubSimulator,
    repo: RepoState,
    number: int,
    action: str,
    sender: str,
    label: str | None = None,
) -> None:
    payload = base(sim, repo, sender)
    payload["action"] = action
    payload["issue"] = ob.issue_obj(sim.urls, repo, repo.issues[number], sim.users)
    if label is not None:
        lab = repo.labels[label]
        payload["label"] = ob.label_obj(sim.urls, repo, lab)
    sim.emit("issues", action, payload)


def issue_comment(
    sim: GitHubSimulator, repo: RepoState, comment_id: int, action: str, sender: str
) -> None:
    comment = repo.comments[comment_id]
    payload = base(sim, repo, sender)
    payload["action"] = action
    issue = ob.issue_obj(sim.urls, repo, repo.issues[comment.issue_number], sim.users)
    if "pull_request" in issue:
        # A comment on a pull request: its issue says so (the examples show issues only).
        issue = {**issue, "pull_request": Exact(issue["pull_request"])}
    payload["issue"] = issue
    payload["comment"] = ob.comment_obj(
        sim.urls, repo, comment, sim.users, sim.app_json(webhook=True)
    )
    sim.emit("issue_comment", action, payload)


def pull_request(
    sim: GitHubSimulator, repo: RepoState, pr: Pull, action: str, sender: str, **extra: Any
) -> None:
    payload = base(sim, repo, sender)
    payload.update(action=action, number=pr.number, pull_request=sim.pull_json(repo, pr), **extra)
    sim.note_pull_event(repo, pr, action, sender, extra)
    sim.emit("pull_request", action, payload)


def review_comment(
    sim: GitHubSimulator,
    repo: RepoState,
    comment_id: int,
    action: str,
    sender: str,
    **extra: Any,
) -> None:
    """``pull_request_review_comment``: the comment whole (a reply's ``in_reply_to_id`` is
    a key no example has), the pull request in the example's shape."""
    comment = repo.review_comments[comment_id]
    pr = repo.pulls[comment.pr_number]
    payload = base(sim, repo, sender)
    payload.update(
        action=action,
        comment=Exact(sim.review_comment_json(repo, comment, webhook=True)),
        pull_request=sim.pull_json(repo, pr),
        **extra,
    )
    sim.emit("pull_request_review_comment", action, payload)


def review_submitted(sim: GitHubSimulator, repo: RepoState, review_id: int, sender: str) -> None:
    _review(sim, repo, review_id, sender, "submitted")


def review_dismissed(sim: GitHubSimulator, repo: RepoState, review_id: int, sender: str) -> None:
    _review(sim, repo, review_id, sender, "dismissed")


def _review(
    sim: GitHubSimulator, repo: RepoState, review_id: int, sender: str, action: str
) -> None:
    review = repo.reviews[review_id]
    pr = repo.pulls[review.pr_number]
    payload = base(sim, repo, sender)
    rv = ob.review_obj(sim.urls, repo, review, sim.users)
    rv["state"] = review.state.lower()
    payload.update(action=action, pull_request=sim.pull_json(repo, pr), review=rv)
    sim.emit("pull_request_review", action, payload)


def push(
    sim: GitHubSimulator,
    repo: RepoState,
    git: BareRepo,
    ref: str,
    before: str,
    after: str,
    sender: str,
) -> None:
    created, deleted = before == ZERO, after == ZERO
    commits: list[dict[str, Any]] = []
    if not deleted:
        spec = after if created else f"{before}..{after}"
        shas = (
            git.rev_list(spec, "--reverse", "--max-count=20")
            if not created
            else list(reversed(git.rev_list(after, "--max-count=20")))
        )
        for sha in shas:
            commits.append(_push_commit(sim, repo, git, sha))
    forced = not created and not deleted and not git.is_ancestor(before, after)
    payload = base(sim, repo, sender)
    user = sim.users[sender]
    payload.update(
        ref=ref,
        before=before,
        after=after,
        created=created,
        deleted=deleted,
        forced=forced,
        base_ref=None,
        compare=f"{sim.urls.web}/{repo.full_name}/compare/{before[:12]}...{after[:12]}",
        commits=commits,
        head_commit=None if deleted else _push_commit(sim, repo, git, after),
        pusher={"name": user.login, "email": f"{user.id}+{user.login}@users.noreply.sim.invalid"},
    )
    sim.emit("push", None, payload)


def _push_commit(sim: GitHubSimulator, repo: RepoState, git: BareRepo, sha: str) -> dict[str, Any]:
    info = git.commit_info(sha)
    added: list[str] = []
    removed: list[str] = []
    modified: list[str] = []
    parent = info.parents[0] if info.parents else None
    args = ["diff-tree", "-r", "--no-commit-id", "--name-status", "--no-renames"]
    text = git.out(*args, parent, sha) if parent else git.out(*args, "--root", sha)
    for line in text.splitlines():
        kind, _, path = line.partition("\t")
        {"A": added, "D": removed}.get(kind, modified).append(path)
    return {
        "id": info.sha,
        "tree_id": info.tree,
        "distinct": True,
        "message": info.message,
        "timestamp": info.committer_date,
        "url": f"{sim.urls.web}/{repo.full_name}/commit/{info.sha}",
        "author": {"name": info.author_name, "email": info.author_email},
        "committer": {"name": info.committer_name, "email": info.committer_email},
        "added": added,
        "removed": removed,
        "modified": modified,
    }


def check_run(
    sim: GitHubSimulator, repo: RepoState, run: CheckRun, action: str, sender: str
) -> None:
    payload = base(sim, repo, sender)
    obj = sim.check_run_json(repo, run)
    suite = repo.check_suites[run.suite_id]
    obj["check_suite"] = sim.suite_json(repo, suite)
    obj["deployment"] = DROP
    payload.update(action=action, check_run=obj)
    sim.emit("check_run", action, payload)


FAILING = ("action_required", "cancelled", "failure", "timed_out")


def settle_suite(sim: GitHubSimulator, repo: RepoState, suite: CheckSuite, sender: str) -> None:
    """A suite's status from its runs; ``check_suite.completed`` when they all are."""
    runs = [r for r in repo.check_runs.values() if r.suite_id == suite.id]
    if runs and all(r.status == "completed" for r in runs):
        conclusions = {r.conclusion for r in runs}
        failing = [c for c in FAILING if c in conclusions]
        new = failing[0] if failing else ("success" if "success" in conclusions else "neutral")
        if suite.status != "completed" or suite.conclusion != new:
            suite.status, suite.conclusion, suite.updated_at = "completed", new, now_iso()
            check_suite(sim, repo, suite, "completed", sender)
    elif runs:
        suite.status = "in_progress" if any(r.status == "in_progress" for r in runs) else "queued"
        suite.conclusion = None


def check_suite(
    sim: GitHubSimulator, repo: RepoState, suite: CheckSuite, action: str, sender: str
) -> None:
    payload = base(sim, repo, sender)
    payload.update(action=action, check_suite=sim.suite_json(repo, suite))
    sim.emit("check_suite", action, payload)


def workflow(
    sim: GitHubSimulator, repo: RepoState, run: WorkflowRun, event: str, action: str
) -> None:
    payload = base(sim, repo, run.actor)
    git = sim.git_of(repo)
    if event == "workflow_run":
        obj = sim.workflow_run_json(repo, run, git)
        payload.update(
            action=action,
            workflow_run=obj,
            workflow={
                "id": obj["workflow_id"],
                "node_id": ob.node_id("Workflow", obj["workflow_id"]),
                "name": run.name,
                "path": obj["path"],
                "state": "active",
                "created_at": repo.created_at,
                "updated_at": repo.created_at,
                "url": obj["workflow_url"],
                "html_url": f"{sim.urls.web}/{repo.full_name}/blob/{run.head_branch}/{obj['path']}",
                "badge_url": f"{sim.urls.web}/{repo.full_name}/workflows/{run.name}/badge.svg",
            },
        )
    else:
        payload.update(action=action, workflow_job=ob.job_obj(sim.urls, repo, run))
    sim.emit(event, action, payload)


def installation_created(sim: GitHubSimulator, inst_id: int, sender: str) -> None:
    inst = sim.installations[inst_id]
    obj = ob.installation_obj(sim.urls, inst, sim.users[inst.account], sim.app_id, sim.app_slug)
    repos = []
    for full in inst.repos:
        r = sim.repos[full.lower()]
        repos.append(
            {
                "id": r.id,
                "node_id": ob.node_id("Repository", r.id),
                "name": r.name,
                "full_name": r.full_name,
                "private": r.private,
            }
        )
    payload = {
        "action": "created",
        "installation": obj,
        "repositories": repos,
        "requester": DROP,
        "sender": ob.user_obj(sim.urls, sim.users[sender]),
    }
    sim.emit("installation", "created", payload)
