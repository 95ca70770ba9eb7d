"""Pull request mergeability and the three merge methods, on the real bare repository."""

from __future__ import annotations

from dataclasses import dataclass

from .gitrepo import BareRepo, GitError
from .state import PERMISSION_LEVELS, Pull, RepoState

WRITE_LEVELS = {"write", "maintain", "admin"}


def permission_of(repo: RepoState, login: str) -> str:
    if login == repo.owner:
        return "admin"
    return repo.permissions.get(login, "read" if not repo.private else "none")


def approvals(repo: RepoState, pr: Pull) -> int:
    """Distinct writers whose latest decisive review is APPROVED."""
    latest: dict[str, str] = {}
    for review in sorted(repo.reviews.values(), key=lambda r: r.id):
        if review.pr_number == pr.number and review.state in (
            "APPROVED",
            "CHANGES_REQUESTED",
            "DISMISSED",
        ):
            latest[review.user] = review.state
    return sum(
        1
        for user, state in latest.items()
        if state == "APPROVED" and permission_of(repo, user) in WRITE_LEVELS
    )


def check_passed(repo: RepoState, sha: str, context: str, app_id: int | None = None) -> bool:
    runs = [
        r
        for r in repo.check_runs.values()
        if r.head_sha == sha
        and r.name == context
        and (app_id is None or repo.check_suites[r.suite_id].app_id == app_id)
    ]
    if runs:
        latest = max(runs, key=lambda r: r.id)
        return latest.status == "completed" and latest.conclusion in (
            "success",
            "neutral",
            "skipped",
        )
    if app_id is not None:
        return False  # a check pinned to an App: a commit status does not stand in
    statuses = [s for s in repo.statuses if s.sha == sha and s.context == context]
    return bool(statuses) and max(statuses, key=lambda s: s.id).state == "success"


@dataclass(frozen=True)
class Mergeability:
    mergeable: bool | None
    state: str  # clean | behind | dirty | blocked | unknown
    reason: str = ""


def mergeability(git: BareRepo, repo: RepoState, pr: Pull) -> Mergeability:
    if pr.issue.state != "open":
        return Mergeability(None, "unknown")
    base_sha = git.branch_sha(pr.base)
    head_sha = pr.head_sha  # refreshed by the caller (refs/pull/<n>/head holds it)
    if base_sha is None:
        return Mergeability(False, "dirty", "Base branch was deleted")
    try:
        tree = git.merge_tree(base_sha, head_sha)
    except GitError:
        tree = None
    if tree is None:
        return Mergeability(False, "dirty", "Merge conflict")
    rule = repo.protections.get(pr.base)
    if rule is not None:
        missing = [
            c
            for c in rule.required_checks
            if not check_passed(repo, head_sha, c, rule.check_apps.get(c))
        ]
        if missing:
            return Mergeability(
                True, "blocked", f"Required status check {missing[0]!r} is expected."
            )
        if approvals(repo, pr) < rule.required_approvals:
            return Mergeability(
                True,
                "blocked",
                f"At least {rule.required_approvals} approving review is required.",
            )
        if rule.strict and not git.is_ancestor(base_sha, head_sha):
            return Mergeability(True, "behind", "Head branch is out of date with the base branch")
    return Mergeability(True, "clean")


def merge_commit(
    git: BareRepo, pr: Pull, method: str, title: str, message: str, author: tuple[str, str]
) -> str | None:
    """The new base tip for merging ``pr`` by ``method``, or None on conflict."""
    base_sha = git.branch_sha(pr.base)
    head_sha = pr.head_sha
    assert base_sha is not None
    if method == "rebase":
        tip = base_sha
        for sha in git.rev_list(f"{base_sha}..{head_sha}", "--reverse", "--no-merges"):
            picked = git.cherry_pick_onto(tip, sha)
            if picked is None:
                return None
            tip = picked
        return tip
    tree = git.merge_tree(base_sha, head_sha)
    if tree is None:
        return None
    text = title + ("\n\n" + message if message else "")
    if method == "squash":
        return git.commit_tree(tree, [base_sha], text, author)
    return git.commit_tree(tree, [base_sha, head_sha], text, author)


__all__ = [
    "PERMISSION_LEVELS",
    "Mergeability",
    "approvals",
    "check_passed",
    "merge_commit",
    "mergeability",
    "permission_of",
]
