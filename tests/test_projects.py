"""Projects, their manifests and untracked source, and the project types' build directories.

Trees are made by the real tools where the machine has them (git, cargo, npm), by hand for the
rest. Expected verdicts come from the rule table itself (risk, confidence, the claim without
evidence), so a changed rule changes what is expected, never the other way round.
"""

from __future__ import annotations

import ast
import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.classify import stored
from hygiene_nb.classify.protect import ProtectContext
from hygiene_nb.classify.rules import (
    BUILTIN_RULES,
    PROJECT_MANIFESTS,
    PROJECT_MARKERS,
    SOURCE_EXTENSIONS,
    Rule,
)
from hygiene_nb.scan.snapshot import entry_paths
from tests.helpers import write

RULES = {r.rule_id: r for r in BUILTIN_RULES}
GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
}


def classified(root: Path, store: Path) -> dict[str, dict[str, Any]]:
    """Scan ``root`` and classify it: path → row."""
    api.scan_root(root, store=store)
    table = api.classify_snapshot(str(root), store=store)
    rows = table.append_column("path", entry_paths(table)).to_pylist()
    return {r["path"]: r for r in rows}


def build(root: Path, rels: list[str]) -> None:
    """Create each path under ``root``; one ending in ``/`` is a directory."""
    for rel in rels:
        if rel.endswith("/"):
            (root / rel).mkdir(parents=True, exist_ok=True)
        else:
            write(root / rel, 10)


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> None:
    subprocess.run(
        list(args), cwd=cwd, check=True, capture_output=True, env={**os.environ, **(env or {})}
    )


def verdict(row: dict[str, Any]) -> tuple[str, str, bool]:
    return row["risk"], row["rule"], row["protected"]


def expected(rule: Rule, *, evidence: bool) -> tuple[str, str, float]:
    """(risk, rule, confidence) the rule gives with or without its evidence."""
    if evidence or rule.evidence is None:
        return rule.risk.value, rule.rule_id, rule.confidence
    assert not rule.evidence.required
    return "caution", rule.rule_id, rule.evidence.missing_confidence


# -- project types -----------------------------------------------------------------------------

# (the directory, the evidence beside it, the rule that should decide it). Every case is run
# with its evidence and without it (then: the rule's caution, or no match if it is required).
TYPE_CASES = [
    ("py/mypkg.egg-info/", ["py/setup.py"], "python-egg-info"),
    ("py/.eggs/", ["py/setup.py"], "python-eggs"),
    ("py/build/", ["py/pyproject.toml"], "build-dir"),
    ("py/__pycache__/", [], "pycache"),
    ("py/.venv/", ["py/pyproject.toml"], "venv"),
    ("py/.nox/", [], "tox"),
    ("py/.tox/", [], "tox"),
    ("web/node_modules/", ["web/package.json", "web/package-lock.json"], "node-modules"),
    ("web/.next/", ["web/package.json"], "build-dir"),
    ("web/.nuxt/", ["web/package.json"], "build-dir"),
    ("web/.turbo/", ["web/package.json"], "build-dir"),
    ("web/.parcel-cache/", ["web/package.json"], "build-dir"),
    ("web/.angular/", ["web/package.json"], "build-dir"),
    ("web/.svelte-kit/", ["web/package.json"], "build-dir"),
    ("rs/target/", ["rs/Cargo.toml"], "rust-target"),
    ("gr/build/", ["gr/build.gradle"], "build-dir"),
    ("gr/.gradle/", ["gr/build.gradle.kts"], "build-dir"),
    ("mvn/target/", ["mvn/pom.xml"], "jvm-target"),
    ("sbt/target/", ["sbt/build.sbt"], "jvm-target"),
    ("net/bin/", ["net/App.csproj"], "dotnet-build"),
    ("net/obj/", ["net/App.csproj"], "dotnet-build"),
    ("fs/bin/", ["fs/Lib.fsproj"], "dotnet-build"),
    ("cm/bld/CMakeFiles/", [], "cmake-files"),
    ("cm/cmake-build-debug/", ["cm/CMakeLists.txt"], "cmake-build"),
    ("game/Library/", ["game/ProjectSettings/"], "unity-generated"),
    ("game/Temp/", ["game/ProjectSettings/"], "unity-generated"),
    ("game/Obj/", ["game/ProjectSettings/"], "unity-generated"),
    ("ex/_build/", ["ex/mix.exs"], "elixir-build"),
    ("ex/deps/", ["ex/mix.exs"], "elixir-build"),
    ("hs/.stack-work/", ["hs/stack.yaml"], "stack-work"),
    ("hs2/.stack-work/", ["hs2/lib.cabal"], "stack-work"),
    ("zig/zig-cache/", ["zig/build.zig"], "zig-cache"),
    ("zig/.zig-cache/", ["zig/build.zig"], "zig-cache"),
    ("zig/zig-out/", ["zig/build.zig"], "zig-cache"),
    ("dart/.dart_tool/", ["dart/pubspec.yaml"], "dart-build"),
    ("dart/build/", ["dart/pubspec.yaml"], "dart-build"),
    ("tf/.terraform/", ["tf/main.tf"], "terraform"),
    ("nb/.ipynb_checkpoints/", [], "ipynb-checkpoints"),
]
PROJECT_TYPE_RULES = {
    "python-egg-info", "python-eggs", "jvm-target", "dotnet-build", "cmake-files", "cmake-build",
    "unity-generated", "elixir-build", "stack-work", "zig-cache", "dart-build", "terraform",
    "ipynb-checkpoints", "latex-intermediate", "untracked-source",
}  # fmt: skip


def test_every_project_type_rule_has_a_case() -> None:
    covered = {rule for *_, rule in TYPE_CASES} | {"latex-intermediate", "untracked-source"}
    assert covered >= PROJECT_TYPE_RULES
    assert set(RULES) >= PROJECT_TYPE_RULES


@pytest.mark.parametrize(("rel", "evidence", "rule_id"), TYPE_CASES)
def test_a_project_types_directory_with_its_evidence(
    tmp_path: Path, store: Path, rel: str, evidence: list[str], rule_id: str
) -> None:
    root = tmp_path / "r"
    build(root, [*evidence, rel, rel + "inside/file.bin"])
    rows = classified(root, store)
    rule = RULES[rule_id]
    for path in (root / rel, root / rel / "inside" / "file.bin"):  # the whole subtree is its
        row = rows[str(path)]
        assert (row["risk"], row["rule"]) == expected(rule, evidence=True)[:2], path
        assert row["confidence"] == pytest.approx(rule.confidence)
        assert not row["protected"]
    assert rows[str(root / rel)]["group_root"]


@pytest.mark.parametrize(("rel", "evidence", "rule_id"), [c for c in TYPE_CASES if c[1]])
def test_a_project_types_directory_without_its_evidence(
    tmp_path: Path, store: Path, rel: str, evidence: list[str], rule_id: str
) -> None:
    root = tmp_path / "r"
    build(root, [rel])
    row = classified(root, store)[str(root / rel)]
    rule = RULES[rule_id]
    if rule.evidence is not None and rule.evidence.required:
        assert row["rule"] != rule_id  # anyone's bin, deps or Library: not a build directory
        assert row["risk"] in ("unknown", "caution")
    elif rule_id in ("build-dir", "dart-build") and rel.endswith("/build/"):
        assert (row["risk"], row["rule"]) == expected(RULES["build-dir"], evidence=False)[:2]
    else:
        risk, rule_name, confidence = expected(rule, evidence=False)
        assert (row["risk"], row["rule"]) == (risk, rule_name)
        assert row["confidence"] == pytest.approx(confidence)


def test_without_a_csproj_bin_and_obj_are_nobodys_build_output(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    build(root, ["tools/bin/run.sh", "tools/obj/x.o", "u/Library/a", "ex/deps/a"])
    rows = classified(root, store)
    for rel in ("tools/bin", "tools/obj", "u/Library", "ex/deps"):
        assert verdict(rows[str(root / rel)]) == ("unknown", "no-rule", False), rel


def test_a_dotnet_tree_without_dotnet(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    app = root / "App"
    build(
        app,
        ["App.csproj", "Program.cs", "bin/Debug/net8.0/App.dll", "obj/project.assets.json"],
    )
    rows = classified(root, store)
    for part in ("bin", "obj", "bin/Debug/net8.0/App.dll"):
        assert verdict(rows[str(app / part)]) == ("safe", "dotnet-build", False), part
    assert verdict(rows[str(app / "App.csproj")]) == ("high", "project-manifest", True)
    assert verdict(rows[str(app / "Program.cs")]) == ("personal", "untracked-source", False)
    assert verdict(rows[str(app)]) == ("high", "contains-protected", True)


def test_a_target_beside_a_pom_is_mavens_and_beside_nothing_stays_a_weak_rust_target(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    build(root, ["m/pom.xml", "m/target/classes/A.class", "x/target/a"])
    rows = classified(root, store)
    assert verdict(rows[str(root / "m/target")]) == ("safe", "jvm-target", False)
    row = rows[str(root / "x/target")]
    assert (row["risk"], row["rule"]) == expected(RULES["rust-target"], evidence=False)[:2]


# -- LaTeX -------------------------------------------------------------------------------------

LATEX_OUTPUTS = ["paper.aux", "paper.log", "paper.synctex.gz", "paper.fdb_latexmk", "paper.fls",
                 "paper.toc", "paper.out", "paper.bbl", "paper.blg"]  # fmt: skip


def test_latex_intermediates_beside_their_tex_are_safe(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    build(root, ["thesis/paper.tex"] + [f"thesis/{n}" for n in LATEX_OUTPUTS])
    build(root, ["thesis/other.aux", "thesis/other.log", "lone/paper.aux", "lone/paper.log"])
    rows = classified(root, store)
    rule = RULES["latex-intermediate"]
    assert rule.same_stem == ".tex"
    for name in LATEX_OUTPUTS:
        assert name.lower().endswith(rule.extensions)
        row = rows[str(root / "thesis" / name)]
        assert (row["risk"], row["rule"]) == expected(rule, evidence=True)[:2], name
    # another stem, or no .tex at all: what it was before (a log is a log, an .aux unknown)
    for rel in ("thesis/other.log", "lone/paper.log"):
        assert (rows[str(root / rel)]["risk"], rows[str(root / rel)]["rule"]) == (
            RULES["log-file"].risk.value,
            "log-file",
        )
    for rel in ("thesis/other.aux", "lone/paper.aux"):
        assert verdict(rows[str(root / rel)]) == ("unknown", "no-rule", False), rel
    assert rows[str(root / "thesis/paper.tex")]["rule"] == "no-rule"  # no project marker here


# -- projects ------------------------------------------------------------------------------------


def test_a_tarball_of_source_with_no_marker_is_not_a_project(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    build(root, ["pkg-1.0/mod.py", "pkg-1.0/README.md", "pkg-1.0/Makefile", "pkg-1.0/lib/a.c"])
    rows = classified(root, store)
    for rel in ("pkg-1.0/mod.py", "pkg-1.0/README.md", "pkg-1.0/lib/a.c", "pkg-1.0"):
        assert verdict(rows[str(root / rel)]) == ("unknown", "no-rule", False), rel


@pytest.mark.parametrize("marker", [m for m in PROJECT_MARKERS if m != ".git"])
def test_every_marker_makes_a_project(tmp_path: Path, store: Path, marker: str) -> None:
    root = tmp_path / "r"
    name = marker.replace("*", "Proj")
    build(root, [f"p/{name}", "p/src/deep/code.py", "p/notes.md"])
    rows = classified(root, store)
    assert verdict(rows[str(root / "p" / name)]) == ("high", "project-manifest", True)
    for rel in ("p/src/deep/code.py", "p/notes.md"):
        assert verdict(rows[str(root / rel)]) == ("personal", "untracked-source", False), rel
    # the project holds a manifest: it cannot go as a whole; its source folder can be decided on
    assert verdict(rows[str(root / "p")]) == ("high", "contains-protected", True)
    assert not rows[str(root / "p/src")]["protected"]


def test_every_source_extension_is_untracked_source_in_a_project(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    build(root, ["p/go.mod"] + [f"p/f{i}{ext}" for i, ext in enumerate(SOURCE_EXTENSIONS)])
    build(root, ["p/data.bin", "p/UPPER.PY"])
    rows = classified(root, store)
    for i, ext in enumerate(SOURCE_EXTENSIONS):
        row = rows[str(root / f"p/f{i}{ext}")]
        assert (row["risk"], row["rule"]) == expected(RULES["untracked-source"], evidence=True)[:2]
    assert rows[str(root / "p/UPPER.PY")]["rule"] == "untracked-source"
    assert rows[str(root / "p/data.bin")]["rule"] == "no-rule"


def test_manifests_and_lockfiles_in_a_project_are_protected(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    names = [m.replace("*", "Proj") for m in PROJECT_MANIFESTS]
    build(root, ["p/pyproject.toml"] + [f"p/{n}" for n in names] + ["lone/Cargo.lock"])
    rows = classified(root, store)
    for name in names:
        assert verdict(rows[str(root / "p" / name)]) == ("high", "project-manifest", True), name
    assert verdict(rows[str(root / "lone/Cargo.lock")]) == ("unknown", "no-rule", False)


def test_nothing_inside_a_dependency_directory_is_a_project(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    build(
        root,
        [
            "web/package.json", "web/package-lock.json", "web/index.js",
            "web/node_modules/left-pad/package.json", "web/node_modules/left-pad/index.js",
            "web/node_modules/left-pad/test/fixture.ts",
            "py/pyproject.toml", "py/.venv/lib/python3.12/site-packages/pkg/setup.py",
            "py/.venv/lib/python3.12/site-packages/pkg/mod.py",
            "rs/Cargo.toml", "rs/target/debug/build/x/Cargo.toml", "rs/target/debug/build/x/a.rs",
        ],
    )  # fmt: skip
    rows = classified(root, store)
    for dep, rule in (("web/node_modules", "node-modules"), ("py/.venv", "venv"),
                      ("rs/target", "rust-target")):  # fmt: skip
        for path, row in rows.items():
            if path == str(root / dep) or path.startswith(str(root / dep) + "/"):
                assert verdict(row) == ("safe", rule, False), path
    assert verdict(rows[str(root / "web/index.js")]) == ("personal", "untracked-source", False)


def test_a_personal_entry_is_planned_only_by_a_persons_decision(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    build(root, ["p/Cargo.toml", "p/src/main.rs", "p/src/util.rs", "p/target/debug/p"])
    rows = classified(root, store)
    assert rows[str(root / "p/src/main.rs")]["risk"] == "personal"
    assert api.make_plan(root, store=store).plan["candidates"] == []  # nothing by rule alone
    api.annotate([str(root / "p/src")], store=store, decision="delete")
    api.annotate([str(root / "p")], store=store, decision="delete")
    plan = api.make_plan(root, store=store).plan
    assert [c["path"] for c in plan["candidates"]] == [str(root / "p/src")]
    assert {e["path"]: e["code"] for e in plan["excluded"]} == {str(root / "p"): "protected"}


# -- trees made by the real tools ----------------------------------------------------------------


def need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed")
    return path


def test_a_cargo_project_before_and_after_its_first_commit(tmp_path: Path, store: Path) -> None:
    need("git")
    need("cargo")
    root = tmp_path / "r"
    root.mkdir()
    # cargo and rustup live in the real home; the test's $HOME is a scratch directory
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    env = {
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", f"{real_home}/.rustup"),
        "CARGO_HOME": os.environ.get("CARGO_HOME", f"{real_home}/.cargo"),
        **GIT_ENV,
    }
    run("cargo", "new", "--vcs", "git", "proj", cwd=root, env=env)
    proj = root / "proj"
    run("cargo", "build", "--offline", cwd=proj, env=env)
    assert (proj / "target").is_dir() and (proj / "Cargo.lock").is_file()
    rows = classified(root, store)
    assert verdict(rows[str(proj / "src/main.rs")]) == ("personal", "untracked-source", False)
    for name in ("Cargo.toml", "Cargo.lock"):
        assert verdict(rows[str(proj / name)]) == ("high", "project-manifest", True)
    target = str(proj / "target")
    inside = [r for p, r in rows.items() if p == target or p.startswith(target + "/")]
    assert len(inside) > 1
    assert {verdict(r) for r in inside} == {("safe", "rust-target", False)}

    run("git", "add", "-A", cwd=proj, env=env)
    run("git", "commit", "-q", "-m", "init", cwd=proj, env=env)
    rows = classified(root, store)
    assert verdict(rows[str(proj / "src/main.rs")]) == ("high", "git-tracked", True)
    assert verdict(rows[str(proj / "Cargo.toml")]) == ("high", "git-tracked", True)
    assert verdict(rows[target]) == ("safe", "rust-target", False)  # .gitignore'd, still safe


def test_a_git_repository_is_a_project_and_so_is_a_root_inside_it(
    tmp_path: Path, store: Path
) -> None:
    need("git")
    root = tmp_path / "r"
    repo = root / "repo"
    build(repo, ["tracked.py", "scratch.py", "docs/draft.md", "data.bin"])
    run("git", "init", "-q", cwd=repo)
    run("git", "add", "tracked.py", cwd=repo)
    run("git", "commit", "-q", "-m", "init", cwd=repo, env=GIT_ENV)
    rows = classified(root, store)
    assert verdict(rows[str(repo / "tracked.py")]) == ("high", "git-tracked", True)
    for rel in ("scratch.py", "docs/draft.md"):
        assert verdict(rows[str(repo / rel)]) == ("personal", "untracked-source", False), rel
    assert rows[str(repo / "data.bin")]["rule"] == "no-rule"
    # the scanned root is a folder inside the work tree: its files are still in a project
    inner = classified(repo / "docs", tmp_path / "store2")
    assert verdict(inner[str(repo / "docs/draft.md")]) == ("personal", "untracked-source", False)


def test_an_npm_project_with_an_installed_package(tmp_path: Path, store: Path) -> None:
    need("npm")
    root = tmp_path / "r"
    web = root / "web"
    web.mkdir(parents=True)
    env = {"npm_config_cache": str(tmp_path / "npm-cache"), "npm_config_audit": "false",
           "npm_config_fund": "false", "npm_config_update_notifier": "false"}  # fmt: skip
    run("npm", "init", "-y", cwd=web, env=env)
    try:
        subprocess.run(
            ["npm", "install", "is-number@7.0.0"],
            cwd=web,
            check=True,
            capture_output=True,
            timeout=120,
            env={**os.environ, **env},
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"npm install could not reach the registry: {exc}")
    write(web / "index.js", 20)
    rows = classified(root, store)
    modules = str(web / "node_modules")
    inside = [r for p, r in rows.items() if p == modules or p.startswith(modules + "/")]
    assert any(p.endswith("/is-number/package.json") for p in rows)
    assert {verdict(r) for r in inside} == {("safe", "node-modules", False)}
    for name in ("package.json", "package-lock.json"):
        assert verdict(rows[str(web / name)]) == ("high", "project-manifest", True)
    assert verdict(rows[str(web / "index.js")]) == ("personal", "untracked-source", False)


# -- the kept classification -------------------------------------------------------------------


def test_a_change_to_the_rules_code_gives_a_new_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = Path(stored.__file__).parent
    assert {"classification.py", "protect.py", "rules.py"} <= set(stored._CODE)
    copy = tmp_path / "classify"
    copy.mkdir()
    for name in stored._CODE:
        shutil.copy(here / name, copy / name)
    monkeypatch.setattr(stored, "__file__", str(copy / "stored.py"))
    monkeypatch.setattr(stored, "_code_digest", stored._code_digest.__wrapped__)
    ctx = ProtectContext("/r", "/h", "/s")
    before = stored.classification_key(ctx, (), None)
    assert stored.classification_key(ctx, (), None) == before
    rules = copy / "rules.py"
    rules.write_text(rules.read_text().replace('".tex"', '".ltx"', 1))
    after_rules = stored.classification_key(ctx, (), None)
    assert after_rules != before
    content = copy / "content.py"  # the share a directory takes one risk's colour at
    text = content.read_text()
    assert "\nUNIFORM_SHARE = " in text
    content.write_text(text.replace("\nUNIFORM_SHARE = ", "\nUNIFORM_SHARE = 0.5  # was ", 1))
    assert stored.classification_key(ctx, (), None) not in (before, after_rules)


def classify_imports(module: Path) -> set[str]:
    """The modules of ``hygiene_nb.classify`` that ``module`` imports, as file names."""
    tree = ast.parse(module.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            if name.startswith("hygiene_nb.classify."):
                found.add(name.split(".")[2] + ".py")
    return {name for name in found if (module.parent / name).is_file()}


def test_the_key_hashes_every_classify_module_the_kept_columns_are_computed_by() -> None:
    """Verdicts and content columns come from classification.py and what it imports here."""
    here = Path(stored.__file__).parent
    reached, todo = set(), ["classification.py", "stored.py"]
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo += sorted(classify_imports(here / name))
    assert {"content.py", "summary.py"} <= reached  # what each directory holds, inodes once
    assert reached <= set(stored._CODE), sorted(reached - set(stored._CODE))
    assert all((here / name).is_file() for name in stored._CODE)


def test_a_weak_match_by_name_still_outranks_a_rule_by_place(tmp_path: Path, store: Path) -> None:
    home = Path(os.environ["HOME"])
    build(home, [".cache/build/x", ".cache/target/x", ".cache/other/x"])
    rows = classified(home, store)
    for name, rule in (("build", "build-dir"), ("target", "rust-target")):
        row = rows[str(home / ".cache" / name)]
        assert (row["risk"], row["rule"]) == expected(RULES[rule], evidence=False)[:2], name
    assert rows[str(home / ".cache/other")]["rule"] == "user-cache"


def test_the_roots_own_name_is_no_evidence_for_what_it_holds(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "Tool.csproj"
    build(root, ["bin/run", "sub/App.csproj", "sub/bin/App.dll"])
    rows = classified(root, store)
    assert rows[str(root / "bin")]["rule"] == "no-rule"
    assert verdict(rows[str(root / "sub/bin")]) == ("safe", "dotnet-build", False)
