"""Feedback on a task's pull request, read from GitHub: a changes-requested review with
its inline comments, a ``/scaffold fix``, and a merge-blocking check that failed on the
head (those branch protection requires or, where it requires none, any but scaffold's
own; judged by the newest run). All of it is untrusted text: cleaned, masked, bounded.
After a round, ``answer_round`` replies to each piece of it on the pull request.
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from scaffold.core.review import SCAFFOLD, reviewers
from scaffold.errors import GitHubError
from scaffold.github.client import AppIdentity, GitHubClient, check_runs
from scaffold.github.comments import CHECK_NAME
from scaffold.quest.model import (
    CheckFailure,
    Feedback,
    ReviewComment,
    ReviewRound,
    TaskRecord,
    utcnow,
)
from scaffold.sanitize import clean

log = logging.getLogger("scaffold.github")

FAILED = ("failure", "timed_out")
# Bounds that keep a round's record (and the quest file) small; an agent reads the code.
BODY_LIMIT = 6_000
COMMENT_LIMIT = 2_000
HUNK_LIMIT = 1_500
COMMENTS_KEPT = 50
LOG_LIMIT = 6_000
ANNOTATIONS_KEPT = 30
_ACTIONS_JOB = re.compile(r"/actions/runs/\d+/job(?:s)?/(\d+)")


def _when(text: object) -> datetime:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return utcnow()


def _int(value: object) -> int | None:
    return value if type(value) is int else None


def review_comment(c: Mapping[str, Any], body: str | None = None) -> ReviewComment:
    side = c.get("side")
    return ReviewComment(
        id=_int(c.get("id")),
        path=clean(str(c.get("path") or ""), 500) or "(no path)",
        line=_int(c.get("line")) or _int(c.get("original_line")),
        side=side if side in ("LEFT", "RIGHT") else None,
        start_line=_int(c.get("start_line")),
        diff_hunk=clean(str(c.get("diff_hunk") or ""), HUNK_LIMIT),
        commit_id=str(c.get("commit_id") or "") or None,
        body=clean(str(c.get("body") if body is None else body), COMMENT_LIMIT),
    )


async def from_review(
    gh: GitHubClient, repo_vars: Mapping[str, str | int], number: int, review: Mapping[str, Any]
) -> Feedback:
    """A changes-requested review with every inline comment it holds."""
    review_id = int(review["id"])
    comments = await gh.get_all(
        "/repos/{owner}/{repo}/pulls/{number}/reviews/{review_id}/comments",
        {**repo_vars, "number": number, "review_id": review_id},
    )
    return Feedback(
        key=f"review:{review_id}",
        kind="review",
        by=str((review.get("user") or {}).get("login") or "?"),
        at=_when(review.get("submitted_at")),
        body=clean(str(review.get("body") or ""), BODY_LIMIT),
        comments=tuple(review_comment(c) for c in comments[:COMMENTS_KEPT]),
        url=str(review.get("html_url") or "") or None,
    )


def from_fix(comment: Mapping[str, Any], text: str, *, in_thread: bool) -> Feedback:
    """A writer's `/scaffold fix <text>`: on the pull request, or in a review thread (whose
    line it is about, and where scaffold replies)."""
    comment_id = int(comment["id"])
    thread = _int(comment.get("in_reply_to_id")) or comment_id if in_thread else None
    comments = (review_comment(comment, body=text),) if in_thread else ()
    return Feedback(
        key=f"comment:{comment_id}",
        kind="fix",
        by=str((comment.get("user") or {}).get("login") or "?"),
        at=_when(comment.get("created_at")),
        body="" if in_thread else clean(text, BODY_LIMIT),
        comments=comments,
        thread=thread,
        url=str(comment.get("html_url") or "") or None,
    )


async def required_status_checks(
    gh: GitHubClient, repo_vars: Mapping[str, str | int], base: str
) -> Mapping[str, Any]:
    """Branch protection's ``required_status_checks`` on ``base`` (empty: none required,
    or the token may not read the protection)."""
    try:
        protection = await gh.get(
            "/repos/{owner}/{repo}/branches/{branch}/protection", {**repo_vars, "branch": base}
        )
    except GitHubError as exc:
        if exc.status in (403, 404):
            return {}
        raise
    return protection.get("required_status_checks") or {}


def blocks_merge(name: str, required: set[str], *, own: bool) -> bool:
    if name == CHECK_NAME and own:
        return False  # scaffold's DiagramCheck: scaffold settles it itself
    return name in required if required else name != CHECK_NAME


async def from_check_run(
    gh: GitHubClient,
    repo_vars: Mapping[str, str | int],
    run: Mapping[str, Any],
    app: AppIdentity,
    required: set[str],
) -> Feedback | None:
    """The failure of ``run`` as feedback; None when it is no merge-blocking failure (or a
    newer run of the same check on the same commit did not fail)."""
    name = str(run.get("name") or "")
    head_sha = str(run.get("head_sha") or "")
    if not name or not head_sha or not blocks_merge(name, required, own=app.owns(run)):
        return None
    runs = await check_runs(gh, repo_vars, head_sha, check_name=name, filter="latest")
    same_app = [
        r for r in runs if (r.get("app") or {}).get("id") == (run.get("app") or {}).get("id")
    ]
    newest = max(same_app or [run], key=lambda r: int(r.get("id") or 0))
    if newest.get("status") != "completed" or newest.get("conclusion") not in FAILED:
        return None
    run_id = int(newest["id"])
    output = newest.get("output") or {}
    annotations: list[str] = []
    if int(output.get("annotations_count") or 0) > 0:
        found = await gh.get_all(
            "/repos/{owner}/{repo}/check-runs/{check_run_id}/annotations",
            {**repo_vars, "check_run_id": run_id},
        )
        for a in found[:ANNOTATIONS_KEPT]:
            where = f"{a.get('path')}:{a.get('start_line')}"
            text = (
                f"{where}: {a.get('annotation_level')}: {a.get('title') or ''} {a.get('message')}"
            )
            annotations.append(clean(text.replace("  ", " "), 1_000))
    check = CheckFailure(
        name=clean(name, 200),
        conclusion=str(newest.get("conclusion")),
        head_sha=head_sha,
        url=str(newest.get("html_url") or newest.get("details_url") or "") or None,
        title=clean(str(output.get("title") or ""), 500),
        summary=clean(str(output.get("summary") or ""), BODY_LIMIT),
        text=clean(str(output.get("text") or ""), BODY_LIMIT),
        annotations=tuple(annotations),
        log_tail=await _job_log_tail(gh, repo_vars, newest),
    )
    by = str((newest.get("app") or {}).get("slug") or "ci")
    return Feedback(
        key=f"check:{by}/{name}@{head_sha}"[:200],
        kind="ci",
        by=by,
        at=_when(newest.get("completed_at")),
        check=check,
        url=check.url,
    )


async def from_check_runs(
    gh: GitHubClient,
    repo_vars: Mapping[str, str | int],
    runs: list[Any],
    app: AppIdentity,
    base: str,
) -> list[Feedback]:
    """The merge-blocking failures among ``runs`` (all of one head) of a PR into ``base``."""
    failed = [r for r in runs if r.get("conclusion") in FAILED]
    required = (
        set((await required_status_checks(gh, repo_vars, base)).get("contexts") or [])
        if failed
        else set()
    )
    found = [await from_check_run(gh, repo_vars, run, app, required) for run in failed]
    return [item for item in found if item is not None]


async def _job_log_tail(
    gh: GitHubClient, repo_vars: Mapping[str, str | int], run: Mapping[str, Any]
) -> str:
    """For a GitHub Actions job: the end of its log, masked and bounded."""
    if (run.get("app") or {}).get("slug") != "github-actions":
        return ""
    m = _ACTIONS_JOB.search(str(run.get("details_url") or ""))
    job_id = int(m.group(1)) if m else int(run["id"])  # a job's check run has its id
    try:
        data = await gh.download(
            "/repos/{owner}/{repo}/actions/jobs/{job_id}/logs", {**repo_vars, "job_id": job_id}
        )
    except GitHubError:
        return ""
    # The end is where a job says why it failed; masked after the cut, so a secret cut
    # in half at the start of the tail is dropped with the first line.
    tail = data[-LOG_LIMIT * 2 :].decode("utf-8", "replace").split("\n", 1)[-1]
    return clean(tail, LOG_LIMIT * 2)[-LOG_LIMIT:]


def from_status(status: Mapping[str, Any], required: set[str]) -> Feedback | None:
    """A commit status (``status`` delivery) that failed and blocks the merge."""
    context = str(status.get("context") or "")
    if status.get("state") not in ("failure", "error") or not context:
        return None
    if context == CHECK_NAME or (required and context not in required):
        return None  # nobody's status stands for scaffold's own check
    sha = str(status.get("sha") or "")
    check = CheckFailure(
        name=clean(context, 200),
        conclusion=str(status.get("state")),
        head_sha=sha,
        url=str(status.get("target_url") or "") or None,
        summary=clean(str(status.get("description") or ""), BODY_LIMIT),
    )
    return Feedback(
        key=f"check:{context}@{sha}",
        kind="ci",
        by="status",
        at=utcnow(),
        check=check,
        url=check.url,
    )


# ---------------------------------------------------------------------- answering

REPLY_MARKER = "<!-- scaffold:reply {task} round {round} comment {comment} -->"
ROUND_MARKER = "<!-- scaffold:round {task} round {round} {key} -->"


def _what_changed(task: TaskRecord, sha: str) -> str:
    summary = clean(task.last_summary or "", 1500) or "the change is in the commit."
    return f"Addressed in {sha[:12]}: {summary}"


async def answer_round(
    gh: GitHubClient,
    repo_vars: Mapping[str, str | int],
    number: int,
    task: TaskRecord,
    done: ReviewRound,
    head_sha: str,
) -> None:
    """Reply to every piece of ``done``'s feedback and request the reviewers again."""
    pr_vars = {**repo_vars, "number": number}
    threads = await gh.get_all("/repos/{owner}/{repo}/pulls/{number}/comments", pr_vars)
    answered = {str(c.get("body") or "") for c in threads}
    issue_comments = await gh.get_all("/repos/{owner}/{repo}/issues/{number}/comments", pr_vars)
    said = "\n".join(str(c.get("body") or "") for c in issue_comments)
    text = _what_changed(task, head_sha)
    for item in done.feedback:
        in_threads = [c.id for c in item.comments if c.id is not None]
        if item.thread is not None:
            in_threads.append(item.thread)
        for comment_id in in_threads:
            marker = REPLY_MARKER.format(task=task.id, round=done.number, comment=comment_id)
            if any(marker in body for body in answered):
                continue
            try:
                await gh.post(
                    "/repos/{owner}/{repo}/pulls/{number}/comments/{comment_id}/replies",
                    {**pr_vars, "comment_id": comment_id},
                    data={"body": f"{marker}\n{text}"},
                )
            except GitHubError as exc:
                # A thread deleted meanwhile: the PR comment below still says it.
                log.warning("no reply in a review thread", extra={"pr": number, "error": str(exc)})
        if item.thread is not None and not item.body:
            continue  # a `/scaffold fix` in a thread is answered there
        marker = ROUND_MARKER.format(task=task.id, round=done.number, key=item.key)
        if marker in said:
            continue
        await gh.post(
            "/repos/{owner}/{repo}/issues/{number}/comments",
            pr_vars,
            data={"body": f"{marker}\n{_round_comment(item, done, text)}"},
        )
    people = list(reviewers(done.feedback))
    if people:
        # Asked again (GitHub ignores a reviewer who is requested already); someone
        # who cannot be requested (the PR's author, no longer a collaborator) is skipped.
        with contextlib.suppress(GitHubError):
            await gh.post(
                "/repos/{owner}/{repo}/pulls/{number}/requested_reviewers",
                pr_vars,
                data={"reviewers": people},
            )


def _round_comment(item: Feedback, done: ReviewRound, text: str) -> str:
    if item.kind == "ci" and item.check is not None:
        link = f" ([details]({item.check.url}))" if item.check.url else ""
        return f"🔧 Round {done.number}: the check `{item.check.name}`{link} failed. {text}"
    if item.by == SCAFFOLD:
        return f"🔧 Round {done.number}: commits pushed to the branch are merged in. {text}"
    asked = "requested changes" if item.kind == "review" else "asked for a fix"
    return (
        f"🔧 Round {done.number}: @{item.by} {asked}. {text}\n\n"
        "The new head needs a fresh approval."
    )
