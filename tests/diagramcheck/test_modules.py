"""New, moved and deleted modules -> the architecture diagram (real git repositories)."""

from __future__ import annotations

from dcrepo import ARCH, Repo, kinds, mermaid_doc


def test_new_module_blocks_until_the_diagram_names_it(repo: Repo) -> None:
    base = repo.head()
    repo.write("app/pkg/service.py", "def run() -> None: ...\n")
    repo.commit("add service")
    report = repo.check(base)
    assert report.blocking
    [finding] = report.failures
    assert (finding.kind, finding.name, finding.diagram) == ("module-added", "pkg.service", ARCH)
    assert (finding.source, finding.line) == ("app/pkg/service.py", 1)
    assert "not updated in this change" in finding.message
    assert 'pkg_service["pkg.service"]' in finding.message  # the draft line

    repo.write(ARCH, mermaid_doc("flowchart LR\n    app --> pkg.service"))
    repo.commit("diagram")
    report = repo.check(base)
    assert not report.blocking, report.findings
    assert report.diagrams_checked == (ARCH,)


def test_diagram_touched_but_not_naming_the_module_is_blocked(repo: Repo) -> None:
    report = repo.change(
        {
            "app/pkg/billing.py": "X = 1\n",
            ARCH: mermaid_doc("flowchart LR\n    app --> something_else"),
        }
    )
    [finding] = report.failures
    assert finding.kind == "module-added"
    assert finding.message.startswith(f"add module `pkg.billing` (app/pkg/billing.py) to {ARCH}")


def test_the_last_part_of_a_dotted_name_is_enough(repo: Repo) -> None:
    report = repo.change(
        {"app/pkg/billing.py": "X = 1\n", ARCH: mermaid_doc('flowchart LR\n    b["billing"]')}
    )
    assert not report.blocking


def test_new_package_needs_its_name(repo: Repo) -> None:
    report = repo.change({"app/pkg/store/__init__.py": "", "app/pkg/store/disk.py": "X = 1\n"})
    assert kinds(report) == [("module-added", "pkg.store"), ("module-added", "pkg.store.disk")]
    fixed = repo.change({ARCH: mermaid_doc("flowchart LR\n    subgraph pkg.store\n  disk\n  end")})
    del fixed
    base = repo.git("rev-parse", "HEAD~2")
    assert not repo.check(base).blocking


def test_source_roots_from_config(repo: Repo) -> None:
    repo.write(".github/scaffold.yml", "diagrams:\n  source_roots: [app]\n")
    repo.commit("config")
    report = repo.change({"app/pkg/x.py": "", "tools/helper.py": ""})
    assert kinds(report) == [("module-added", "pkg.x")]


def test_tests_are_ignored_by_default(repo: Repo) -> None:
    report = repo.change(
        {
            "tests/test_service.py": "def test_x() -> None: ...\n",
            "app/pkg/tests/test_inner.py": "",
            "app/pkg/conftest.py": "",
            "app/pkg/sub/test_mod.py": "",
            "bench/bench_x.py": "",
        }
    )
    assert report.findings == ()


def test_ignore_globs_from_config(repo: Repo) -> None:
    repo.write(
        ".github/scaffold.yml", "diagrams:\n  ignore: ['app/pkg/generated/**', '*_pb2.py']\n"
    )
    repo.commit("config")
    report = repo.change(
        {
            "app/pkg/generated/__init__.py": "",
            "app/pkg/generated/api.py": "",
            "app/pkg/msg_pb2.py": "",
            "tests/test_now_checked.py": "",
        }
    )
    # The configured globs replace the defaults: tests/ is checked now.
    assert kinds(report) == [("module-added", "tests.test_now_checked")]


def test_renamed_module_via_git_rename_detection(repo: Repo) -> None:
    body = "".join(f"def f{i}() -> int:\n    return {i}\n\n\n" for i in range(20))
    repo.write("app/pkg/old_name.py", body)
    repo.write(ARCH, mermaid_doc("flowchart LR\n    app --> pkg.old_name"))
    base = repo.commit("old")
    repo.move("app/pkg/old_name.py", "app/pkg/new_name.py")
    repo.commit("rename")
    report = repo.check(base)
    assert kinds(report) == [("module-added", "pkg.new_name"), ("module-removed", "pkg.old_name")]
    added = next(f for f in report.failures if f.kind == "module-added")
    assert "moved from app/pkg/old_name.py" in added.message
    removed = next(f for f in report.failures if f.kind == "module-removed")
    assert removed.message.startswith("remove module `pkg.old_name` (moved to app/pkg/new_name.py)")

    repo.write(ARCH, mermaid_doc("flowchart LR\n    app --> pkg.new_name"))
    repo.commit("diagram")
    assert not repo.check(base).blocking


def test_deleted_module_must_leave_the_diagram(repo: Repo) -> None:
    repo.write("app/pkg/gone.py", "X = 1\n")
    repo.write(ARCH, mermaid_doc("flowchart LR\n    app --> pkg.gone"))
    base = repo.commit("with gone")
    repo.remove("app/pkg/gone.py")
    repo.commit("delete")
    assert kinds(repo.check(base)) == [("module-removed", "pkg.gone")]
    # A deleted module the diagram never named needs nothing.
    repo.write(ARCH, mermaid_doc("flowchart LR\n    app"))
    repo.commit("diagram")
    assert not repo.check(base).blocking


def test_modified_module_needs_nothing(repo: Repo) -> None:
    repo.write("app/pkg/a.py", "X = 1\n")
    base = repo.commit("a")
    repo.write("app/pkg/a.py", "X = 2\n")
    repo.commit("edit")
    assert repo.check(base).findings == ()


def test_diff_is_taken_from_the_merge_base(repo: Repo) -> None:
    """Work on the default branch after the branch point does not count against the branch."""
    fork = repo.head()
    repo.git("checkout", "-q", "-b", "feature")
    repo.write("app/pkg/feature.py", "")
    repo.write(ARCH, mermaid_doc("flowchart LR\n    feature"))
    repo.commit("feature")
    repo.git("checkout", "-q", "main")
    repo.write("app/pkg/mainline.py", "")
    repo.commit("main work")
    report = repo.check("main", "feature")
    assert report.merge_base == fork
    assert not report.blocking


def test_syntax_error_is_a_warning_not_a_crash(repo: Repo) -> None:
    report = repo.change({"app/pkg/broken.py": "def oops(:\n    pass\n"})
    warning = next(f for f in report.findings if f.kind == "python-syntax-error")
    assert not warning.blocking
    assert warning.line == 1
    assert "app/pkg/broken.py:1: cannot parse" in warning.message
    # The module is still new: its name is still required.
    assert kinds(report) == [("module-added", "pkg.broken")]


def test_binary_files_are_skipped(repo: Repo) -> None:
    report = repo.change({"assets/logo.png": "x"})  # placeholder, replaced below
    assert report.findings == ()
    base = repo.head()
    repo.write("assets/logo.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    repo.write("app/pkg/blob.py", b"\x00\x01\x02 not python")
    repo.commit("binary")
    report = repo.check(base)
    assert [f.kind for f in report.warnings] == ["python-unreadable"]
    assert kinds(report) == [("module-added", "pkg.blob")]


def test_odd_file_names(repo: Repo) -> None:
    report = repo.change({"app/pkg/space name.py": "", "app/pkg/ünï.py": "X = 1\n"})
    assert kinds(report) == [("module-added", "pkg.ünï")]


def test_a_module_that_gains_a_parent_package_need_not_leave_the_diagram(repo: Repo) -> None:
    repo.write("app/tools/run.py", "X = 1\n")
    repo.write(ARCH, mermaid_doc('flowchart LR\n    tools_run["tools.run"]'))
    base = repo.commit("a folder of scripts")
    repo.write("app/tools/__init__.py", "")
    repo.write("app/__init__.py", "")
    repo.write("app/tools/run.py", "X = 2\n")  # changed as well: in the diff
    repo.write(ARCH, mermaid_doc('flowchart LR\n    app_tools_run["app.tools.run"]'))
    repo.commit("packages")
    assert [f.kind for f in repo.check(base).failures] == []
