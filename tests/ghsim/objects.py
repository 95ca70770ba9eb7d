"""REST-shaped objects rendered from state (urls all point at the simulator)."""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from .gitrepo import BareRepo, CommitInfo
from .state import (
    CheckRun,
    CheckSuite,
    Comment,
    CommitStatus,
    Installation,
    Issue,
    Label,
    Pull,
    Reaction,
    RepoState,
    Review,
    ReviewComment,
    User,
    WorkflowRun,
    now_iso,
)

APP_PERMISSIONS = {
    "actions": "write",
    "checks": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
    "statuses": "write",
}
APP_EVENTS = [
    "check_run",
    "check_suite",
    "issue_comment",
    "issues",
    "pull_request",
    "pull_request_review",
    "push",
    "workflow_run",
]


def node_id(kind: str, ident: int | str) -> str:
    return base64.b64encode(f"0:{kind}{ident}".encode()).decode().rstrip("=")


@dataclass(frozen=True)
class Urls:
    api: str

    @property
    def web(self) -> str:
        return f"{self.api}/_web"

    @property
    def git(self) -> str:
        return f"{self.api}/git"

    def repo(self, full_name: str) -> str:
        return f"{self.api}/repos/{full_name}"


def user_obj(u: Urls, user: User) -> dict[str, Any]:
    base = f"{u.api}/users/{user.login}"
    return {
        "login": user.login,
        "id": user.id,
        "node_id": node_id("User", user.id),
        "avatar_url": f"{u.api}/_avatars/{user.id}",
        "gravatar_id": "",
        "url": base,
        "html_url": f"{u.web}/{user.login}",
        "followers_url": f"{base}/followers",
        "following_url": f"{base}/following{{/other_user}}",
        "gists_url": f"{base}/gists{{/gist_id}}",
        "starred_url": f"{base}/starred{{/owner}}{{/repo}}",
        "subscriptions_url": f"{base}/subscriptions",
        "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos",
        "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events",
        "type": user.type,
        "site_admin": False,
    }


def repo_obj(
    u: Urls, repo: RepoState, owner: User, *, pushed_at: str | None = None
) -> dict[str, Any]:
    api = u.repo(repo.full_name)
    html = f"{u.web}/{repo.full_name}"
    names = {
        "forks_url": "/forks",
        "keys_url": "/keys{/key_id}",
        "collaborators_url": "/collaborators{/collaborator}",
        "teams_url": "/teams",
        "hooks_url": "/hooks",
        "issue_events_url": "/issues/events{/number}",
        "events_url": "/events",
        "assignees_url": "/assignees{/user}",
        "branches_url": "/branches{/branch}",
        "tags_url": "/tags",
        "blobs_url": "/git/blobs{/sha}",
        "git_tags_url": "/git/tags{/sha}",
        "git_refs_url": "/git/refs{/sha}",
        "trees_url": "/git/trees{/sha}",
        "statuses_url": "/statuses/{sha}",
        "languages_url": "/languages",
        "stargazers_url": "/stargazers",
        "contributors_url": "/contributors",
        "subscribers_url": "/subscribers",
        "subscription_url": "/subscription",
        "commits_url": "/commits{/sha}",
        "git_commits_url": "/git/commits{/sha}",
        "comments_url": "/comments{/number}",
        "issue_comment_url": "/issues/comments{/number}",
        "contents_url": "/contents/{+path}",
        "compare_url": "/compare/{base}...{head}",
        "merges_url": "/merges",
        "archive_url": "/{archive_format}{/ref}",
        "downloads_url": "/downloads",
        "issues_url": "/issues{/number}",
        "pulls_url": "/pulls{/number}",
        "milestones_url": "/milestones{/number}",
        "notifications_url": "/notifications{?since,all,participating}",
        "labels_url": "/labels{/name}",
        "releases_url": "/releases{/id}",
        "deployments_url": "/deployments",
    }
    open_issues = sum(1 for i in repo.issues.values() if i.state == "open")
    obj: dict[str, Any] = {
        "id": repo.id,
        "node_id": node_id("Repository", repo.id),
        "name": repo.name,
        "full_name": repo.full_name,
        "private": repo.private,
        "owner": user_obj(u, owner),
        "html_url": html,
        "description": None,
        "fork": repo.fork_of is not None,
        "url": api,
    }
    obj.update({k: api + v for k, v in names.items()})
    obj.update(
        {
            "created_at": repo.created_at,
            "updated_at": now_iso(),
            "pushed_at": pushed_at or now_iso(),
            "git_url": f"{u.git}/{repo.full_name}.git",
            "ssh_url": f"{u.git}/{repo.full_name}.git",
            "clone_url": f"{u.git}/{repo.full_name}.git",
            "svn_url": html,
            "homepage": None,
            "size": 1,
            "stargazers_count": 0,
            "watchers_count": 0,
            "language": None,
            "has_issues": True,
            "has_projects": False,
            "has_downloads": True,
            "has_wiki": False,
            "has_pages": False,
            "has_discussions": False,
            "forks_count": 0,
            "mirror_url": None,
            "archived": False,
            "disabled": False,
            "open_issues_count": open_issues,
            "license": None,
            "allow_forking": True,
            "is_template": False,
            "web_commit_signoff_required": False,
            "topics": [],
            "visibility": "private" if repo.private else "public",
            "forks": 0,
            "open_issues": open_issues,
            "watchers": 0,
            "default_branch": repo.default_branch,
        }
    )
    return obj


def label_obj(u: Urls, repo: RepoState, label: Label) -> dict[str, Any]:
    return {
        "id": label.id,
        "node_id": node_id("Label", label.id),
        "url": f"{u.repo(repo.full_name)}/labels/{label.name}",
        "name": label.name,
        "color": label.color,
        "default": label.default,
        "description": label.description,
    }


def reactions_rollup(
    u: Urls, repo: RepoState, subject: tuple[str, int], url: str
) -> dict[str, Any]:
    counts = dict.fromkeys(
        ["+1", "-1", "laugh", "confused", "heart", "hooray", "eyes", "rocket"], 0
    )
    for r in repo.reactions:
        if r.subject == subject:
            counts[r.content] = counts.get(r.content, 0) + 1
    return {"url": f"{url}/reactions", "total_count": sum(counts.values()), **counts}


def association(repo: RepoState, login: str) -> str:
    if login == repo.owner:
        return "OWNER"
    if repo.permissions.get(login, "none") in ("write", "maintain", "admin", "triage"):
        return "COLLABORATOR"
    return "NONE"


def issue_obj(
    u: Urls,
    repo: RepoState,
    issue: Issue,
    users: dict[str, User],
    app: dict[str, Any] | None = None,
) -> dict[str, Any]:
    api = f"{u.repo(repo.full_name)}/issues/{issue.number}"
    kind = "pull" if issue.is_pull else "issues"
    n_comments = sum(1 for c in repo.comments.values() if c.issue_number == issue.number)
    obj: dict[str, Any] = {
        "url": api,
        "repository_url": u.repo(repo.full_name),
        "labels_url": f"{api}/labels{{/name}}",
        "comments_url": f"{api}/comments",
        "events_url": f"{api}/events",
        "html_url": f"{u.web}/{repo.full_name}/{kind}/{issue.number}",
        "id": issue.id,
        "node_id": node_id("Issue", issue.id),
        "number": issue.number,
        "title": issue.title,
        "user": user_obj(u, users[issue.user]),
        "labels": [label_obj(u, repo, repo.labels[name]) for name in issue.labels],
        "state": issue.state,
        "locked": False,
        "assignee": None,
        "assignees": [],
        "milestone": None,
        "comments": n_comments,
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "closed_at": issue.closed_at,
        "author_association": association(repo, issue.user),
        "active_lock_reason": None,
        "body": issue.body,
        "reactions": reactions_rollup(u, repo, ("issue", issue.number), api),
        "timeline_url": f"{api}/timeline",
        "performed_via_github_app": None,
        "state_reason": issue.state_reason,
    }
    if issue.closed_by:
        obj["closed_by"] = user_obj(u, users[issue.closed_by])
    if issue.is_pull:
        pr_api = f"{u.repo(repo.full_name)}/pulls/{issue.number}"
        obj["pull_request"] = {
            "url": pr_api,
            "html_url": f"{u.web}/{repo.full_name}/pull/{issue.number}",
            "diff_url": f"{u.web}/{repo.full_name}/pull/{issue.number}.diff",
            "patch_url": f"{u.web}/{repo.full_name}/pull/{issue.number}.patch",
            "merged_at": None,
        }
        pr = repo.pulls.get(issue.number)
        if pr is not None:
            obj["pull_request"]["merged_at"] = pr.merged_at
    return obj


def comment_obj(
    u: Urls, repo: RepoState, comment: Comment, users: dict[str, User], app: dict[str, Any] | None
) -> dict[str, Any]:
    api = f"{u.repo(repo.full_name)}/issues/comments/{comment.id}"
    issue = repo.issues[comment.issue_number]
    kind = "pull" if issue.is_pull else "issues"
    user = users[comment.user]
    return {
        "url": api,
        "html_url": f"{u.web}/{repo.full_name}/{kind}/{issue.number}#issuecomment-{comment.id}",
        "issue_url": f"{u.repo(repo.full_name)}/issues/{issue.number}",
        "id": comment.id,
        "node_id": node_id("IssueComment", comment.id),
        "user": user_obj(u, user),
        "created_at": comment.created_at,
        "updated_at": comment.updated_at,
        "author_association": association(repo, comment.user),
        "body": comment.body,
        "reactions": reactions_rollup(u, repo, ("comment", comment.id), api),
        "performed_via_github_app": app if user.type == "Bot" else None,
    }


def reaction_obj(u: Urls, reaction: Reaction, users: dict[str, User]) -> dict[str, Any]:
    return {
        "id": reaction.id,
        "node_id": node_id("Reaction", reaction.id),
        "user": user_obj(u, users[reaction.user]),
        "content": reaction.content,
        "created_at": reaction.created_at,
    }


def branch_ref_obj(u: Urls, repo: RepoState, owner: User, ref: str, sha: str) -> dict[str, Any]:
    return {
        "label": f"{repo.owner}:{ref}",
        "ref": ref,
        "sha": sha,
        "user": user_obj(u, owner),
        "repo": repo_obj(u, repo, owner),
    }


def pull_obj(
    u: Urls,
    repo: RepoState,
    pr: Pull,
    users: dict[str, User],
    *,
    head_repo: RepoState,
    mergeable: bool | None,
    mergeable_state: str,
    stats: dict[str, int],
) -> dict[str, Any]:
    api = f"{u.repo(repo.full_name)}/pulls/{pr.number}"
    issue_api = f"{u.repo(repo.full_name)}/issues/{pr.number}"
    html = f"{u.web}/{repo.full_name}/pull/{pr.number}"
    issue = pr.issue
    owner = users[repo.owner]
    n_comments = sum(1 for c in repo.comments.values() if c.issue_number == pr.number)
    return {
        "url": api,
        "id": pr.id,
        "node_id": node_id("PullRequest", pr.id),
        "html_url": html,
        "diff_url": f"{html}.diff",
        "patch_url": f"{html}.patch",
        "issue_url": issue_api,
        "commits_url": f"{api}/commits",
        "review_comments_url": f"{api}/comments",
        "review_comment_url": f"{u.repo(repo.full_name)}/pulls/comments{{/number}}",
        "comments_url": f"{issue_api}/comments",
        "statuses_url": f"{u.repo(repo.full_name)}/statuses/{pr.head_sha}",
        "number": pr.number,
        "state": issue.state,
        "locked": False,
        "title": issue.title,
        "user": user_obj(u, users[issue.user]),
        "body": issue.body,
        "labels": [label_obj(u, repo, repo.labels[name]) for name in issue.labels],
        "milestone": None,
        "active_lock_reason": None,
        "created_at": issue.created_at,
        "updated_at": issue.updated_at,
        "closed_at": issue.closed_at,
        "merged_at": pr.merged_at,
        "merge_commit_sha": pr.merge_commit_sha,
        "assignee": None,
        "assignees": [],
        "requested_reviewers": [user_obj(u, users[login]) for login in pr.requested_reviewers],
        "requested_teams": [],
        "head": branch_ref_obj(u, head_repo, users[head_repo.owner], pr.head, pr.head_sha),
        "base": branch_ref_obj(u, repo, owner, pr.base, pr.base_sha),
        "_links": {
            "self": {"href": api},
            "html": {"href": html},
            "issue": {"href": issue_api},
            "comments": {"href": f"{issue_api}/comments"},
            "review_comments": {"href": f"{api}/comments"},
            "review_comment": {"href": f"{u.repo(repo.full_name)}/pulls/comments{{/number}}"},
            "commits": {"href": f"{api}/commits"},
            "statuses": {"href": f"{u.repo(repo.full_name)}/statuses/{pr.head_sha}"},
        },
        "author_association": association(repo, issue.user),
        "auto_merge": None,
        "draft": pr.draft,
        "merged": pr.merged,
        "mergeable": mergeable,
        "rebaseable": mergeable,
        "mergeable_state": mergeable_state,
        "merged_by": user_obj(u, users[pr.merged_by]) if pr.merged_by else None,
        "comments": n_comments,
        "review_comments": sum(
            1 for c in repo.review_comments.values() if c.pr_number == pr.number
        ),
        "maintainer_can_modify": pr.maintainer_can_modify,
        "commits": stats.get("commits", 0),
        "additions": stats.get("additions", 0),
        "deletions": stats.get("deletions", 0),
        "changed_files": stats.get("changed_files", 0),
    }


def review_obj(u: Urls, repo: RepoState, review: Review, users: dict[str, User]) -> dict[str, Any]:
    pr_api = f"{u.repo(repo.full_name)}/pulls/{review.pr_number}"
    html = f"{u.web}/{repo.full_name}/pull/{review.pr_number}#pullrequestreview-{review.id}"
    return {
        "id": review.id,
        "node_id": node_id("PullRequestReview", review.id),
        "user": user_obj(u, users[review.user]),
        "body": review.body,
        "state": review.state,
        "html_url": html,
        "pull_request_url": pr_api,
        "_links": {"html": {"href": html}, "pull_request": {"href": pr_api}},
        "submitted_at": review.submitted_at,
        "commit_id": review.commit_id,
        "author_association": association(repo, review.user),
    }


def review_comment_obj(
    u: Urls,
    repo: RepoState,
    comment: ReviewComment,
    users: dict[str, User],
    *,
    commit_id: str,
    line: int | None,
    start_line: int | None,
    position: int | None,
    webhook: bool = False,
) -> dict[str, Any]:
    """A review comment where it is now (``commit_id``, ``line``, ``position``: None when
    outdated) and where it was made (``original_*``). GitHub answers null for an outdated
    comment's ``line``/``position``; the REST description types them non-null, so the REST
    form leaves them out then (the webhook form has them null, as its schema says)."""
    api = f"{u.repo(repo.full_name)}/pulls/comments/{comment.id}"
    pr_api = f"{u.repo(repo.full_name)}/pulls/{comment.pr_number}"
    html = f"{u.web}/{repo.full_name}/pull/{comment.pr_number}#discussion_r{comment.id}"
    obj: dict[str, Any] = {
        "url": api,
        "pull_request_review_id": comment.review_id,
        "id": comment.id,
        "node_id": node_id("PullRequestReviewComment", comment.id),
        "diff_hunk": comment.diff_hunk,
        "path": comment.path,
        "position": position,
        "original_position": comment.original_position,
        "commit_id": commit_id,
        "original_commit_id": comment.original_commit_id,
        "user": user_obj(u, users[comment.user]),
        "body": comment.body,
        "created_at": comment.created_at,
        "updated_at": comment.updated_at,
        "html_url": html,
        "pull_request_url": pr_api,
        "author_association": association(repo, comment.user),
        "_links": {
            "self": {"href": api},
            "html": {"href": html},
            "pull_request": {"href": pr_api},
        },
        "reactions": reactions_rollup(u, repo, ("review_comment", comment.id), api),
        "start_line": start_line,
        "original_start_line": comment.original_start_line,
        "start_side": comment.start_side,
        "line": line,
        "original_line": comment.original_line,
        "side": comment.side,
        "subject_type": "line",
    }
    if comment.in_reply_to_id is not None:
        obj["in_reply_to_id"] = comment.in_reply_to_id
    if not webhook:
        for key in ("line", "position"):
            if obj[key] is None:
                del obj[key]
    return obj


def review_request_obj(u: Urls, users: dict[str, User], logins: list[str]) -> dict[str, Any]:
    return {"users": [user_obj(u, users[login]) for login in logins], "teams": []}


def app_obj(u: Urls, app_id: int, slug: str, owner: User) -> dict[str, Any]:
    return {
        "id": app_id,
        "slug": slug,
        "node_id": node_id("Integration", app_id),
        "client_id": f"Iv1.{app_id:016x}",
        "owner": user_obj(u, owner),
        "name": slug,
        "description": "scaffold GitHub App (simulated)",
        "external_url": f"{u.web}/apps/{slug}",
        "html_url": f"{u.web}/apps/{slug}",
        "created_at": "2024-01-01T00:00:00Z",
        "updated_at": "2024-01-01T00:00:00Z",
        "permissions": dict(APP_PERMISSIONS),
        "events": list(APP_EVENTS),
        "installations_count": 1,
    }


def pr_mini(u: Urls, repo: RepoState, pr: Pull, head_repo: RepoState) -> dict[str, Any]:
    def mini(r: RepoState) -> dict[str, Any]:
        return {"id": r.id, "url": u.repo(r.full_name), "name": r.name}

    return {
        "url": f"{u.repo(repo.full_name)}/pulls/{pr.number}",
        "id": pr.id,
        "number": pr.number,
        "head": {"ref": pr.head, "sha": pr.head_sha, "repo": mini(head_repo)},
        "base": {"ref": pr.base, "sha": pr.base_sha, "repo": mini(repo)},
    }


def suite_obj(
    u: Urls,
    repo: RepoState,
    suite: CheckSuite,
    app: dict[str, Any],
    owner: User,
    pulls: list[tuple[Pull, RepoState]],
    head_commit: CommitInfo | None,
) -> dict[str, Any]:
    runs = [r for r in repo.check_runs.values() if r.suite_id == suite.id]
    obj: dict[str, Any] = {
        "id": suite.id,
        "node_id": node_id("CheckSuite", suite.id),
        "head_branch": suite.head_branch,
        "head_sha": suite.head_sha,
        "status": suite.status,
        "conclusion": suite.conclusion,
        "url": f"{u.repo(repo.full_name)}/check-suites/{suite.id}",
        "before": suite.before,
        "after": suite.after,
        "pull_requests": [pr_mini(u, repo, p, h) for p, h in pulls],
        "app": app,
        "repository": repo_obj(u, repo, owner),
        "created_at": suite.created_at,
        "updated_at": suite.updated_at,
        "latest_check_runs_count": len(runs),
        "check_runs_url": f"{u.repo(repo.full_name)}/check-suites/{suite.id}/check-runs",
        "rerequestable": True,
        "runs_rerequestable": True,
        "head_commit": commit_mini(head_commit) if head_commit else None,
    }
    return obj


def commit_mini(info: CommitInfo) -> dict[str, Any]:
    return {
        "id": info.sha,
        "tree_id": info.tree,
        "message": info.message,
        "timestamp": info.committer_date,
        "author": {"name": info.author_name, "email": info.author_email},
        "committer": {"name": info.committer_name, "email": info.committer_email},
    }


def check_run_obj(
    u: Urls,
    repo: RepoState,
    run: CheckRun,
    suite: CheckSuite,
    app: dict[str, Any],
    pulls: list[tuple[Pull, RepoState]],
) -> dict[str, Any]:
    api = f"{u.repo(repo.full_name)}/check-runs/{run.id}"
    output = {
        "title": run.output.get("title"),
        "summary": run.output.get("summary"),
        "text": run.output.get("text"),
        "annotations_count": len(run.annotations),
        "annotations_url": f"{api}/annotations",
    }
    return {
        "id": run.id,
        "head_sha": run.head_sha,
        "node_id": node_id("CheckRun", run.id),
        "external_id": run.external_id,
        "url": api,
        "html_url": run.html_url or f"{u.web}/{repo.full_name}/runs/{run.id}",
        "details_url": run.details_url or f"{u.web}/{repo.full_name}/runs/{run.id}",
        "status": run.status,
        "conclusion": run.conclusion,
        "started_at": run.started_at,
        "completed_at": run.completed_at,
        "output": output,
        "name": run.name,
        "check_suite": {"id": suite.id},
        "app": app,
        "pull_requests": [pr_mini(u, repo, p, h) for p, h in pulls],
    }


def status_obj(
    u: Urls, repo: RepoState, st: CommitStatus, users: dict[str, User]
) -> dict[str, Any]:
    return {
        "url": f"{u.repo(repo.full_name)}/statuses/{st.sha}",
        "avatar_url": None,
        "id": st.id,
        "node_id": node_id("StatusContext", st.id),
        "state": st.state,
        "description": st.description,
        "target_url": st.target_url,
        "context": st.context,
        "created_at": st.created_at,
        "updated_at": st.updated_at,
        "creator": user_obj(u, users[st.creator]),
    }


def installation_obj(
    u: Urls, inst: Installation, account: User, app_id: int, slug: str
) -> dict[str, Any]:
    return {
        "id": inst.id,
        "account": user_obj(u, account),
        "repository_selection": "selected",
        "access_tokens_url": f"{u.api}/app/installations/{inst.id}/access_tokens",
        "repositories_url": f"{u.api}/installation/repositories",
        "html_url": f"{u.web}/settings/installations/{inst.id}",
        "app_id": app_id,
        "target_id": account.id,
        "target_type": account.type if account.type != "Bot" else "User",
        "permissions": dict(APP_PERMISSIONS),
        "events": list(APP_EVENTS),
        "created_at": inst.created_at,
        "updated_at": inst.created_at,
        "single_file_name": None,
        "has_multiple_single_files": False,
        "single_file_paths": [],
        "app_slug": slug,
        "suspended_by": None,
        "suspended_at": None,
        "contact_email": None,
    }


def git_commit_obj(u: Urls, repo: RepoState, info: CommitInfo) -> dict[str, Any]:
    api = u.repo(repo.full_name)
    return {
        "url": f"{api}/git/commits/{info.sha}",
        "author": {"name": info.author_name, "email": info.author_email, "date": info.author_date},
        "committer": {
            "name": info.committer_name,
            "email": info.committer_email,
            "date": info.committer_date,
        },
        "message": info.message,
        "comment_count": 0,
        "tree": {"sha": info.tree, "url": f"{api}/git/trees/{info.tree}"},
        "verification": {
            "verified": False,
            "reason": "unsigned",
            "payload": None,
            "signature": None,
            "verified_at": None,
        },
    }


def commit_obj(u: Urls, repo: RepoState, info: CommitInfo) -> dict[str, Any]:
    api = u.repo(repo.full_name)
    return {
        "url": f"{api}/commits/{info.sha}",
        "sha": info.sha,
        "node_id": node_id("Commit", info.sha[:12]),
        "html_url": f"{u.web}/{repo.full_name}/commit/{info.sha}",
        "comments_url": f"{api}/commits/{info.sha}/comments",
        "commit": git_commit_obj(u, repo, info),
        "author": {},  # the spec's empty-object form: the git identity is not a known user
        "committer": {},
        "parents": [
            {
                "sha": p,
                "url": f"{api}/commits/{p}",
                "html_url": f"{u.web}/{repo.full_name}/commit/{p}",
            }
            for p in info.parents
        ],
    }


def ref_obj(u: Urls, repo: RepoState, ref: str, sha: str) -> dict[str, Any]:
    api = u.repo(repo.full_name)
    return {
        "ref": ref,
        "node_id": node_id("Ref", ref),
        "url": f"{api}/git/{ref}",
        "object": {"type": "commit", "sha": sha, "url": f"{api}/git/commits/{sha}"},
    }


def workflow_run_obj(
    u: Urls,
    repo: RepoState,
    run: WorkflowRun,
    users: dict[str, User],
    git: BareRepo,
    pulls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    api = f"{u.repo(repo.full_name)}/actions/runs/{run.id}"
    owner = users[repo.owner]
    info = git.commit_info(run.head_sha)
    suite_id = run.check_suite_id if run.check_suite_id is not None else run.id + 1
    return {
        "id": run.id,
        "name": run.name,
        "node_id": node_id("WorkflowRun", run.id),
        "head_branch": run.head_branch,
        "head_sha": run.head_sha,
        "path": f".github/workflows/{run.workflow_id}",
        "display_title": run.name,
        "run_number": run.run_number,
        "run_attempt": 1,
        "event": run.event,
        "status": run.status,
        "conclusion": run.conclusion,
        "workflow_id": abs(hash(run.workflow_id)) % 10**8,
        "check_suite_id": suite_id,
        "check_suite_node_id": node_id("CheckSuite", suite_id),
        "url": api,
        "html_url": f"{u.web}/{repo.full_name}/actions/runs/{run.id}",
        "pull_requests": list(pulls or []),
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "actor": user_obj(u, users[run.actor]),
        "triggering_actor": user_obj(u, users[run.actor]),
        "run_started_at": run.run_started_at,
        "jobs_url": f"{api}/jobs",
        "logs_url": f"{api}/logs",
        "check_suite_url": f"{u.repo(repo.full_name)}/check-suites/{suite_id}",
        "artifacts_url": f"{api}/artifacts",
        "cancel_url": f"{api}/cancel",
        "rerun_url": f"{api}/rerun",
        "previous_attempt_url": None,
        "workflow_url": f"{u.repo(repo.full_name)}/actions/workflows/{run.workflow_id}",
        "head_commit": {
            "id": info.sha,
            "tree_id": info.tree,
            "message": info.message,
            "timestamp": info.committer_date,
            "author": {"name": info.author_name, "email": info.author_email},
            "committer": {"name": info.committer_name, "email": info.committer_email},
        },
        "repository": repo_obj(u, repo, owner),
        "head_repository": repo_obj(u, repo, owner),
    }


def job_obj(u: Urls, repo: RepoState, run: WorkflowRun) -> dict[str, Any]:
    api = u.repo(repo.full_name)
    status = run.status if run.status != "requested" else "queued"
    return {
        "id": run.job_id,
        "run_id": run.id,
        "run_url": f"{api}/actions/runs/{run.id}",
        "run_attempt": 1,
        "node_id": node_id("CheckRun", run.job_id),
        "head_sha": run.head_sha,
        "head_branch": run.head_branch,
        "url": f"{api}/actions/jobs/{run.job_id}",
        "html_url": f"{u.web}/{repo.full_name}/actions/runs/{run.id}/job/{run.job_id}",
        "status": status,
        "conclusion": run.conclusion if status == "completed" else None,
        "created_at": run.created_at,
        "started_at": run.job_started_at or run.created_at,
        "completed_at": run.job_completed_at if status == "completed" else None,
        "name": run.job_name or run.workflow_id.rsplit(".", 1)[0],
        "steps": [],
        "check_run_url": f"{api}/check-runs/{run.job_id}",
        "labels": ["ubuntu-latest"],
        "runner_id": 1 if status != "queued" else None,
        "runner_name": "sim-runner" if status != "queued" else None,
        "runner_group_id": 1 if status != "queued" else None,
        "runner_group_name": "sim" if status != "queued" else None,
        "workflow_name": run.name,
    }
