"""The state branch on real git: plumbing only, compare-and-swap, merge by quest id."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from harness import git
from scaffold.core.states import Lifecycle
from scaffold.errors import GitError, InvalidIdError, StoreError
from scaffold.quest.model import HistoryEntry, Quest, QuestPhase, SignalEntry, TaskRecord
from scaffold.roles import Role
from scaffold.state.branch import GitRemote, Publication, StateBranch
from scaffold.state.document import (
    MAX_BYTES,
    HistoryDigest,
    parse,
    quest_id_of,
    render,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "t")
    git(path, "config", "user.email", "t@t")
    (path / "a.txt").write_text("a\n")
    git(path, "add", "a.txt")
    git(path, "commit", "-qm", "init")
    return path


def quest(qid: str, seq: int, phase: QuestPhase = QuestPhase.EXECUTING) -> Quest:
    return Quest(
        id=qid,
        request="Add CSV export",
        phase=phase,
        seq=seq,
        started_at=T0,
        tasks={"TASK-1": TaskRecord(id="TASK-1", title="t", state=Lifecycle.PROCESSING)},
    )


def pub(q: Quest) -> Publication:
    return Publication(
        q.id, render(q, HistoryDigest()), q.seq, q.phase in (QuestPhase.DONE, QuestPhase.FAILED)
    )


def test_publish_touches_no_working_tree_index_or_head(repo: Path) -> None:
    (repo / "dirty.txt").write_text("uncommitted\n")
    git(repo, "add", "dirty.txt")
    before = (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD"))
    index_before = (repo / ".git" / "index").read_bytes()
    branch = StateBranch(repo)
    tip = branch.publish([pub(quest("quest-1", 3))], "scaffold: state")
    assert tip == git(repo, "rev-parse", "refs/heads/scaffold/state").strip()
    assert (git(repo, "status", "--porcelain"), git(repo, "rev-parse", "HEAD")) == before
    assert (repo / ".git" / "index").read_bytes() == index_before
    assert git(repo, "ls-tree", "-r", "--name-only", tip).split() == ["quests/quest-1.json"]
    doc = branch.read()["quest-1"]
    assert doc.quest.request == "Add CSV export"
    assert doc.seq == 3


def test_a_finished_quest_moves_to_done_and_git_log_reads_its_story(repo: Path) -> None:
    branch = StateBranch(repo)
    branch.publish([pub(quest("quest-1", 1))], "scaffold: quest-1 asks a question")
    branch.publish([pub(quest("quest-1", 2))], "scaffold: quest-1 merged TASK-1")
    tip = branch.publish([pub(quest("quest-1", 3, QuestPhase.DONE))], "scaffold: quest-1 done")
    assert tip is not None
    files = git(repo, "ls-tree", "-r", "--name-only", tip).split()
    assert files == ["quests/done/quest-1.json"]
    subjects = [row[2] for row in branch.log("quest-1")]
    assert subjects == [
        "scaffold: quest-1 done",
        "scaffold: quest-1 merged TASK-1",
        "scaffold: quest-1 asks a question",
    ]
    # The same bytes again make no commit.
    assert branch.publish([pub(quest("quest-1", 3, QuestPhase.DONE))], "again") == tip


def test_an_older_file_never_replaces_a_newer_one(repo: Path) -> None:
    branch = StateBranch(repo)
    branch.publish([pub(quest("quest-1", 9))], "new")
    branch.publish([pub(quest("quest-1", 4))], "stale writer")
    assert branch.read()["quest-1"].seq == 9


def test_a_moved_tip_is_merged_by_quest_id(repo: Path) -> None:
    """Another process moves the ref between our read and our swap: both files stay."""
    branch = StateBranch(repo)
    branch.publish([pub(quest("quest-1", 1))], "one")
    real_build = branch._build
    raced = []

    def build_then_race(base: str | None, pubs: list[Publication], msg: str) -> str | None:
        new = real_build(base, pubs, msg)
        if not raced:
            raced.append(True)
            _writers([repo], "-", 1, first=2)  # another process: quest-2 at seq 1
        return new

    branch._build = build_then_race  # type: ignore[method-assign]
    branch.publish([pub(quest("quest-1", 2))], "two")
    docs = StateBranch(repo).read()
    assert {k: v.seq for k, v in docs.items()} == {"quest-1": 2, "quest-2": 1}


WRITER = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    from pathlib import Path
    from scaffold.quest.model import Quest
    from scaffold.state.branch import Publication, StateBranch, GitRemote
    from scaffold.state.document import HistoryDigest, render

    repo, qid, n, url = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
    branch = StateBranch(repo, remote=GitRemote(repo, url) if url != "-" else None)
    for seq in range(1, n + 1):
        q = Quest(id=qid, seq=seq, started_at=datetime(2026, 1, 1, tzinfo=UTC))
        branch.publish([Publication(qid, render(q, HistoryDigest()), seq, False)], f"{qid} {seq}")
    """
)


def _writers(cwds: list[Path], url: str, n: int, first: int = 1) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(cwd), f"quest-{i}", str(n), url])
        for i, cwd in enumerate(cwds, first)
    ]
    assert [p.wait(timeout=120) for p in procs] == [0] * len(procs)


def test_two_processes_on_one_repository_lose_nothing(repo: Path) -> None:
    _writers([repo, repo], "-", 25)
    branch = StateBranch(repo)
    assert {k: v.seq for k, v in branch.read().items()} == {"quest-1": 25, "quest-2": 25}
    # every publication is a commit of its own: 50 in all, none lost
    assert int(git(repo, "rev-list", "--count", "scaffold/state")) == 50


def test_two_clones_pushing_to_one_remote_lose_nothing(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    clones = []
    for name in ("server", "runner"):
        git(tmp_path, "clone", "-q", str(bare), name)
        clones.append(tmp_path / name)
    _writers(clones, str(bare), 15)
    tip = git(bare, "rev-parse", "refs/heads/scaffold/state").strip()
    assert int(git(bare, "rev-list", "--count", tip)) == 30
    reader = StateBranch(clones[0], remote=GitRemote(clones[0], str(bare)))
    reader.remote.fetch_state("scaffold/state")  # type: ignore[union-attr]
    assert {k: v.seq for k, v in reader.read().items()} == {"quest-1": 15, "quest-2": 15}


def test_push_refusal_other_than_a_race_is_an_error(repo: Path, tmp_path: Path) -> None:
    bare = tmp_path / "remote.git"
    git(tmp_path, "clone", "-q", "--bare", str(repo), str(bare))
    hook = bare / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho protected >&2\nexit 1\n")
    hook.chmod(0o755)
    branch = StateBranch(repo, remote=GitRemote(repo, str(bare)))
    with pytest.raises(GitError) as err:
        branch.publish([pub(quest("quest-1", 1))], "x")
    assert "pre-receive hook declined" in str(err.value)
    assert branch.tip() is None  # nothing recorded as pushed


def test_a_broken_file_on_the_branch_is_reported_and_others_still_read(repo: Path) -> None:
    branch = StateBranch(repo)
    branch.publish([pub(quest("quest-1", 1))], "good")
    blob = git(repo, "hash-object", "-w", "--stdin", stdin="{not json").strip()
    env_index = repo / ".git" / "tmp-index"
    env = {"GIT_INDEX_FILE": str(env_index), "PATH": "/usr/bin:/bin"}
    subprocess.run(["git", "read-tree", "scaffold/state"], cwd=repo, env=env, check=True)
    subprocess.run(
        ["git", "update-index", "--add", "--cacheinfo", f"100644,{blob},quests/quest-9.json"],
        cwd=repo,
        env=env,
        check=True,
    )
    tree = subprocess.run(
        ["git", "write-tree"], cwd=repo, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    commit = git(repo, "commit-tree", tree, "-p", "scaffold/state", "-m", "hand-made").strip()
    git(repo, "update-ref", "refs/heads/scaffold/state", commit)
    docs = branch.read()
    assert list(docs) == ["quest-1"]
    assert [p.path for p in branch.problems] == ["quests/quest-9.json"]
    assert "bad JSON" in branch.problems[0].reason
    # publishing another quest keeps the broken file as it is (it is not ours to drop)
    branch.publish([pub(quest("quest-2", 1))], "more")
    names = git(repo, "ls-tree", "-r", "--name-only", "scaffold/state").split()
    assert names == ["quests/quest-1.json", "quests/quest-2.json", "quests/quest-9.json"]


@pytest.mark.parametrize(
    "name", ["scaffold/task-1", "../x", "a b", "-x", "x.lock", "a//b", "", "refs/heads/x"]
)
def test_unusable_state_branch_names_are_refused(repo: Path, name: str) -> None:
    with pytest.raises(InvalidIdError):
        StateBranch(repo, name)


def test_paths_name_quests_and_nothing_else() -> None:
    assert quest_id_of("quests/issue-4.json") == "issue-4"
    assert quest_id_of("quests/done/issue-4.json") == "issue-4"
    for other in ("quests/x/y.json", "README.md", "quests/UPPER.json", "quests/done/.json"):
        assert quest_id_of(other) is None


def _entry(seq: int) -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        at=T0 + timedelta(seconds=seq),
        kind="transition",
        task_id="TASK-1",
        event="retry_on_error" if seq % 2 else "agent_signal",
        source="Processing",
        target="Processing",
        detail={"note": "x" * 120},
    )


def test_ten_thousand_transitions_stay_under_64_kb() -> None:
    signals = tuple(
        SignalEntry(at=T0, role=Role.CODEWEAVER, session_id="s", signal={"n": i})
        for i in range(500)
    )
    task = TaskRecord(id="TASK-1", signals=signals, run_dir="/tmp/run")
    q = Quest(id="quest-1", seq=10_000, started_at=T0, tasks={"TASK-1": task})
    digest = HistoryDigest()
    digest.add(_entry(s) for s in range(1, 10_001))
    data = render(q, digest)
    assert len(data) < MAX_BYTES
    doc = parse(data, "quests/quest-1.json")
    older, recent = doc.history.older, doc.history.recent
    assert older.entries + len(recent) == 10_000
    assert recent[-1].seq == 10_000
    assert older.events == {
        "retry_on_error": sum(1 for s in range(1, older.last_seq + 1) if s % 2),
        "agent_signal": sum(1 for s in range(1, older.last_seq + 1) if not s % 2),
    }
    assert len(doc.quest.tasks["TASK-1"].signals) == 3
    assert doc.quest.tasks["TASK-1"].run_dir is None
    # indented JSON: one field a line, so `git log -p` shows what changed
    assert data.count(b"\n") > 100


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\xff", "bad JSON"),
        (b"[]", "not a JSON object"),
        (json.dumps({"format": 7}).encode(), "upgrade scaffold"),
        (json.dumps({"format": 1, "quest": {"id": "Bad Id!"}}).encode(), "quest"),
    ],
)
def test_bad_state_files_get_clear_errors(data: bytes, says: str) -> None:
    with pytest.raises(StoreError) as err:
        parse(data, "scaffold/state:quests/x.json")
    assert says in str(err.value)
    assert "scaffold/state:quests/x.json" in str(err.value)


def test_git_remote_refuses_an_ssh_url(repo: Path) -> None:
    with pytest.raises(GitError):
        GitRemote(repo, "git@example.com:o/r.git").fetch_state("scaffold/state")
