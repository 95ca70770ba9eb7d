"""A real bare git repository driven with plumbing commands (argv lists, isolated config)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

ZERO = "0" * 40
IDENTITY = {"name": "GitHub Simulator", "email": "sim@ghsim.invalid"}
_REF_OK = re.compile(r"^(?!/)(?!.*\.\.)(?!.*//)[A-Za-z0-9._/\-]+(?<!/)(?<!\.lock)$")


class GitError(RuntimeError):
    pass


def valid_branch(name: str) -> bool:
    return bool(_REF_OK.match(name)) and not name.startswith("-")


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME=IDENTITY["name"],
        GIT_AUTHOR_EMAIL=IDENTITY["email"],
        GIT_COMMITTER_NAME=IDENTITY["name"],
        GIT_COMMITTER_EMAIL=IDENTITY["email"],
    )
    return env


@dataclass
class CommitInfo:
    sha: str
    tree: str
    parents: list[str]
    author_name: str
    author_email: str
    author_date: str
    committer_name: str
    committer_email: str
    committer_date: str
    message: str


class BareRepo:
    def __init__(self, path: Path) -> None:
        self.path = path

    # -- running git
    def run(
        self,
        *args: str,
        input: bytes | None = None,
        env: dict[str, str] | None = None,
        check: bool = True,
    ) -> subprocess.CompletedProcess[bytes]:
        full_env = base_env()
        if env:
            full_env.update(env)
        proc = subprocess.run(
            ["git", "--git-dir", str(self.path), *args],
            input=input,
            capture_output=True,
            env=full_env,
            check=False,
        )
        if check and proc.returncode != 0:
            raise GitError(f"git {' '.join(args)}: {proc.stderr.decode(errors='replace').strip()}")
        return proc

    def out(self, *args: str, **kw: object) -> str:
        return self.run(*args, **kw).stdout.decode().strip()  # type: ignore[arg-type]

    # -- setup
    def init(self, default_branch: str) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["git", "init", "--bare", "-q", "-b", default_branch, str(self.path)],
            check=True,
            env=base_env(),
            capture_output=True,
        )
        self.run("config", "http.receivepack", "true")
        self.run("config", "receive.denyDeleteCurrent", "ignore")

    def set_protected(self, branches: list[str]) -> None:
        listing = self.path / "protected-branches"
        listing.write_text("".join(f"{b}\n" for b in branches))
        hook = self.path / "hooks" / "pre-receive"
        hook.parent.mkdir(exist_ok=True)
        hook.write_text(
            "#!/bin/sh\n"
            "while read old new ref; do\n"
            '  branch="${ref#refs/heads/}"\n'
            f'  if grep -qxF -- "$branch" {shlex.quote(str(listing))}; then\n'
            '    echo "error: GH006: Protected branch update failed for $ref." >&2\n'
            '    echo "error: Changes must be made through a pull request." >&2\n'
            "    exit 1\n"
            "  fi\n"
            "done\n"
            "exit 0\n"
        )
        hook.chmod(0o755)

    # -- refs
    def refs(self) -> dict[str, str]:
        text = self.out("for-each-ref", "--format=%(refname) %(objectname)")
        result: dict[str, str] = {}
        for line in text.splitlines():
            name, sha = line.split(" ", 1)
            result[name] = sha
        return result

    def branch_sha(self, branch: str) -> str | None:
        proc = self.run(
            "rev-parse", "--verify", "--quiet", f"refs/heads/{branch}^{{commit}}", check=False
        )
        return proc.stdout.decode().strip() or None

    def resolve(self, rev: str) -> str | None:
        if rev.startswith("-"):
            return None
        for candidate in (f"refs/heads/{rev}", f"refs/tags/{rev}", rev):
            proc = self.run(
                "rev-parse", "--verify", "--quiet", f"{candidate}^{{commit}}", check=False
            )
            sha = proc.stdout.decode().strip()
            if proc.returncode == 0 and sha:
                return sha
        return None

    def object_exists(self, sha: str) -> bool:
        return self.run("cat-file", "-e", sha, check=False).returncode == 0

    def update_ref(self, ref: str, new: str, old: str | None = None) -> None:
        args = ["update-ref", ref, new] + ([old] if old else [])
        self.run(*args)

    def delete_ref(self, ref: str) -> None:
        self.run("update-ref", "-d", ref)

    # -- reading
    def commit_info(self, sha: str) -> CommitInfo:
        fmt = "%H%x00%T%x00%P%x00%an%x00%ae%x00%aI%x00%cn%x00%ce%x00%cI%x00%B"
        parts = self.out("show", "-s", f"--format={fmt}", sha).split("\x00")
        return CommitInfo(
            sha=parts[0],
            tree=parts[1],
            parents=parts[2].split(),
            author_name=parts[3],
            author_email=parts[4],
            author_date=parts[5],
            committer_name=parts[6],
            committer_email=parts[7],
            committer_date=parts[8],
            message=parts[9].strip(),
        )

    def file_at(self, ref: str, path: str) -> bytes | None:
        proc = self.run("cat-file", "blob", f"{ref}:{path}", check=False)
        return proc.stdout if proc.returncode == 0 else None

    def blob_sha(self, ref: str, path: str) -> str | None:
        proc = self.run("rev-parse", "--verify", "--quiet", f"{ref}:{path}", check=False)
        return proc.stdout.decode().strip() or None

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        return (
            self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False).returncode
            == 0
        )

    def merge_base(self, a: str, b: str) -> str | None:
        proc = self.run("merge-base", a, b, check=False)
        return proc.stdout.decode().strip() or None

    def rev_list(self, spec: str, *extra: str) -> list[str]:
        return self.out("rev-list", *extra, spec).split()

    def changed_files(self, base: str, head: str) -> list[dict[str, object]]:
        """Files changed between the merge base of base..head and head (like GitHub's compare)."""
        mb = self.merge_base(base, head) or base
        numstat = self.out("diff", "--numstat", "-z", "--no-renames", mb, head)
        status = self.out("diff", "--name-status", "-z", "--no-renames", mb, head)
        kinds: dict[str, str] = {}
        tokens = status.split("\x00")
        for i in range(0, len(tokens) - 1, 2):
            kinds[tokens[i + 1]] = tokens[i]
        files: list[dict[str, object]] = []
        for entry in numstat.split("\x00"):
            if not entry:
                continue
            adds, dels, name = entry.split("\t", 2)
            a = int(adds) if adds.isdigit() else 0
            d = int(dels) if dels.isdigit() else 0
            patch = self.out("diff", "--no-renames", mb, head, "--", name)
            kind = {"A": "added", "D": "removed", "M": "modified"}.get(
                kinds.get(name, "M"), "changed"
            )
            blob = self.blob_sha(head, name) if kind != "removed" else self.blob_sha(mb, name)
            files.append(
                {
                    "filename": name,
                    "status": kind,
                    "additions": a,
                    "deletions": d,
                    "changes": a + d,
                    "patch": patch.split("\n", 4)[-1] if "@@" in patch else "",
                    "sha": blob or ZERO,
                }
            )
        return files

    # -- writing
    def commit_files(
        self,
        parent: str | None,
        files: dict[str, str | bytes | None],
        message: str,
        author: tuple[str, str] | None = None,
    ) -> str:
        """A commit whose tree is ``parent``'s with ``files`` written (None deletes)."""
        with tempfile.TemporaryDirectory(prefix="ghsim-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            if parent:
                self.run("read-tree", parent, env=env)
            for path, content in files.items():
                if path.startswith("/") or ".." in path.split("/"):
                    raise GitError(f"bad path {path!r}")
                if content is None:
                    self.run("update-index", "--force-remove", "--", path, env=env)
                    continue
                data = content.encode() if isinstance(content, str) else content
                blob = self.out("hash-object", "-w", "--stdin", input=data)
                self.run("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self.out("write-tree", env=env)
        return self.commit_tree(tree, [parent] if parent else [], message, author)

    def commit_tree(
        self, tree: str, parents: list[str], message: str, author: tuple[str, str] | None = None
    ) -> str:
        args = ["commit-tree", tree]
        for p in parents:
            args += ["-p", p]
        env = {}
        if author:
            env = {"GIT_AUTHOR_NAME": author[0], "GIT_AUTHOR_EMAIL": author[1]}
        return self.out(*args, input=message.encode(), env=env)

    def merge_tree(self, ours: str, theirs: str) -> str | None:
        """The merged tree of two commits, or None on conflict (git merge-tree --write-tree)."""
        proc = self.run(
            "merge-tree", "--write-tree", "--name-only", "--no-messages", ours, theirs, check=False
        )
        if proc.returncode == 0:
            return proc.stdout.decode().split()[0]
        if proc.returncode == 1:
            return None
        raise GitError(proc.stderr.decode(errors="replace"))

    def cherry_pick_onto(self, onto: str, commit: str) -> str | None:
        """Replay ``commit`` onto ``onto`` (diff | apply --cached --3way in a scratch index)."""
        info = self.commit_info(commit)
        parent = info.parents[0] if info.parents else None
        diff_args = (
            ["diff-tree", "-p", "--binary", "--full-index", commit]
            if parent is None
            else ["diff-tree", "-p", "--binary", "--full-index", parent, commit]
        )
        if parent is None:
            diff_args = ["diff-tree", "-p", "--binary", "--full-index", "--root", commit]
        patch = self.run(*diff_args).stdout
        with tempfile.TemporaryDirectory(prefix="ghsim-index-") as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.run("read-tree", onto, env=env)
            if patch.strip():
                proc = self.run(
                    "apply", "--cached", "--3way", "-", input=patch, env=env, check=False
                )
                if proc.returncode != 0:
                    return None
            tree = self.out("write-tree", env=env)
        return self.commit_tree(tree, [onto], info.message, (info.author_name, info.author_email))
