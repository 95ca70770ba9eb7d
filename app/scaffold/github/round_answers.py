"""After a round of the review loop: a reply in each inline thread saying what changed,
one PR comment per other piece of feedback, and the reviewers requested again. Markers
with the round keep a restart from posting anything twice.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping

from scaffold.core import review
from scaffold.errors import GitHubError
from scaffold.github.client import GitHubClient
from scaffold.quest.model import Feedback, ReviewRound, TaskRecord
from scaffold.sanitize import clean

log = logging.getLogger("scaffold.github")

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
    people = list(review.reviewers(done.feedback))
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
    if item.by == review.SCAFFOLD:
        return f"🔧 Round {done.number}: commits pushed to the branch are merged in. {text}"
    asked = "requested changes" if item.kind == "review" else "asked for a fix"
    return (
        f"🔧 Round {done.number}: @{item.by} {asked}. {text}\n\n"
        "The new head needs a fresh approval."
    )
