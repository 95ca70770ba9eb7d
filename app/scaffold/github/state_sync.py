"""The App's side of the state branch: published with the installation token through
:class:`~scaffold.state.branch.GitRemote`, and the quests of a repository rebuilt from
it when this server has never seen them (a new server, a wiped or evicted state folder).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from scaffold.errors import ScaffoldError
from scaffold.git.workspace import Workspace
from scaffold.github.checkout import Checkout, token_auth
from scaffold.github.links import LinkStore, QuestLink
from scaffold.runtime.session import quest_store
from scaffold.state.branch import GitRemote, StateBranch
from scaffold.state.rebuild import restore_quests

log = logging.getLogger("scaffold.app")


@dataclass
class TokenHolder:
    """The newest installation token, for git calls made in worker threads."""

    token: str = ""


def app_state_branch(checkout: Checkout, branch: str, holder: TokenHolder) -> StateBranch:
    remote = GitRemote(
        checkout.path,
        checkout.clone_url,
        lambda: token_auth(checkout.clone_url, holder.token),
        lock=checkout.remote_lock,
    )
    return StateBranch(checkout.path, branch, remote=remote)


def link_of(links: LinkStore, quest_id: str) -> Mapping[str, Any] | None:
    link = links.get(quest_id)
    return link.model_dump(mode="json") if link is not None else None


def restore_repository(
    checkout: Checkout, links: LinkStore, branch_name: str, last_tip: str | None
) -> tuple[str | None, list[str]]:
    """Rebuild the open quests (and their links) this clone lacks from the fetched state
    branch: (the tip read, the ids rebuilt). Reads nothing when the tip is ``last_tip``."""
    # Read as the App publishes it: the remote's branch as last fetched (nothing is pushed).
    branch = app_state_branch(checkout, branch_name, TokenHolder())
    tip = branch.tip()
    if tip is None or tip == last_tip:
        return last_tip, []
    docs = branch.read(open_only=True)
    for problem in branch.problems:
        log.warning(
            "unreadable quest file on the state branch",
            extra={"path": problem.path, "error": problem.reason},
        )
    done = restore_quests(
        checkout.path, quest_store(checkout.path), docs, Workspace(checkout.path).worktree_path
    )
    rebuilt = [qid for qid, what in done.items() if what != "kept"]
    for qid in done:
        raw = docs[qid].link
        if raw is None or links.get(qid) is not None:
            continue
        try:
            link = QuestLink.model_validate(raw)
            if link.repo != checkout.full_name or link.quest_id != qid:
                # Anyone who can push the branch wrote this file: it ties quests of this
                # repository to this repository only.
                raise ValueError(f"it names {link.repo} {link.quest_id}")
            links.put(link)
        except (ValueError, ScaffoldError) as exc:
            log.warning(
                "quest link on the state branch unreadable",
                extra={"quest": qid, "error": str(exc)},
            )
    if rebuilt:
        log.info("quests rebuilt from the state branch", extra={"quests": rebuilt})
    return tip, rebuilt
