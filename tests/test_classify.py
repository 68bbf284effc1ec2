"""Classification on real trees: each built-in rule, each protection, evidence, user rules."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.classify.rules import BUILTIN_RULES, parse_user_rules
from hygiene_nb.errors import RuleInvalid
from tests.helpers import write

# Every case: (path relative to the scanned root, files to create first, risk, rule).
# A path ending in "/" is created as a directory. The scanned root is the test's tmp dir and
# $HOME is <root>/home, so "home/…" paths are in the home directory.
RULE_CASES = [
    ("home/p/__pycache__/", ["home/p/__pycache__/m.pyc"], "safe", "pycache"),
    ("home/p/__pycache__/m.pyc", [], "safe", "pycache"),  # inside the cache: the cache decides
    ("home/p/old.pyc", [], "safe", "pyc"),
    ("home/p/.pytest_cache/", [], "safe", "tool-cache"),
    ("home/p/.mypy_cache/", [], "safe", "tool-cache"),
    ("home/p/.tox/", [], "safe", "tox"),
    ("home/web/node_modules/", ["home/web/package.json", "home/web/package-lock.json"], "safe",
     "node-modules"),
    ("home/web/node_modules/x/build/", ["home/web/package.json", "home/web/yarn.lock"], "safe",
     "node-modules"),  # nested build output is part of the outer node_modules
    ("home/bare/node_modules/", ["home/bare/package.json"], "caution", "node-modules"),
    ("home/py/.venv/", ["home/py/pyproject.toml"], "safe", "venv"),
    ("home/nopy/venv/", [], "caution", "venv"),
    ("home/rb/vendor/bundle/", [], "safe", "vendor-bundle"),
    ("home/rs/target/", ["home/rs/Cargo.toml"], "safe", "rust-target"),
    ("home/notrs/target/", [], "caution", "rust-target"),
    ("home/js/dist/", ["home/js/package.json"], "safe", "build-dir"),
    ("home/x/build/", [], "caution", "build-dir"),
    ("home/.cache/pip/", [], "safe", "pip-cache"),
    ("home/.cache/uv/", [], "safe", "uv-cache"),
    ("home/.cache/npm/", [], "safe", "npm-user-cache"),
    ("home/.cache/yarn/", [], "safe", "yarn-cache"),
    ("home/.cache/pnpm/", [], "safe", "pnpm-cache"),
    ("home/.cache/go-build/", [], "safe", "go-build-cache"),
    ("home/.cache/pypoetry/virtualenvs/", [], "safe", "poetry-cache"),
    ("home/.cache/cargo/", [], "safe", "cargo-cache"),
    ("home/.cache/ms-playwright/", [], "safe", "playwright-browsers"),
    ("home/.cache/huggingface/hub/", [], "caution", "huggingface-cache"),
    ("home/.cache/torch/", [], "caution", "torch-cache"),
    ("home/.cache/JetBrains/", [], "safe", "jetbrains-cache"),
    ("home/.cache/thumbnails/large/1.png", [], "safe", "thumbnails"),
    ("home/.cache/mozilla/", [], "safe", "firefox-cache"),
    ("home/.cache/chromium/", [], "safe", "chromium-cache"),
    ("home/.cache/google-chrome/", [], "safe", "chrome-cache"),
    ("home/.cache/someapp/", [], "caution", "user-cache"),
    ("home/.npm/_cacache/", [], "safe", "npm-cache"),
    ("home/.m2/repository/", [], "caution", "maven-repo"),  # `mvn install` puts builds there
    ("home/.conda/pkgs/", [], "safe", "conda-pkgs"),
    ("home/miniconda3/pkgs/", ["home/miniconda3/conda-meta/"], "safe", "conda-install-pkgs"),
    ("home/mambaforge/pkgs/x.tar.bz2", ["home/mambaforge/condabin/"], "safe",
     "conda-install-pkgs"),
    ("home/goproj/pkgs/", ["home/goproj/go.mod"], "unknown", "no-rule"),  # not conda's
    ("home/w/app.log", [], "caution", "log-file"),
    ("home/w/Logs/", [], "caution", "log-dir"),
    ("home/w/f.tmp", [], "caution", "tmp-file"),
    ("home/w/notes.txt~", [], "safe", "backup-tilde"),
    ("home/w/.DS_Store", [], "safe", "os-junk"),
    ("home/.local/share/Trash/", [], "caution", "xdg-trash"),
    ("home/.Trash/", [], "caution", "trash"),
    ("home/Documents/", [], "personal", "personal-dir"),
    ("home/Documents/thing.xyz", [], "personal", "in-personal-folder"),
    ("home/Documents/proj/node_modules/", ["home/Documents/proj/package.json",
     "home/Documents/proj/pnpm-lock.yaml"], "safe", "node-modules"),
    ("home/stuff/photo.JPG", [], "personal", "media-file"),
    ("home/stuff/report.pdf", [], "personal", "office-file"),
    ("home/stuff/random.bin", [], "unknown", "no-rule"),
    ("home/stuff/", [], "unknown", "no-rule"),
]  # fmt: skip

PROTECTION_CASES = [
    ("", [], "root"),
    ("home/", [], "home"),
    ("home/.ssh/", ["home/.ssh/id_ed25519"], "credential"),
    ("home/.ssh/id_ed25519", [], "credential"),
    ("home/p/server.pem", [], "credential"),
    ("home/p/tls.KEY", [], "credential"),
    ("home/p/.env.local", [], "credential"),
    ("home/p/id_rsa", [], "credential"),
    ("home/.netrc", [], "credential"),
    ("home/.aws/", [], "credential"),
    ("home/.bashrc", [], "config"),
    ("home/.config/app/settings.json", [], "config"),
    ("home/.config/", [], "config"),
    ("home/p/", ["home/p/server.pem"], "contains-protected"),
    ("home/hg/.hg/", [], "vcs"),
    ("home/kept/", ["home/kept/.hygiene-nb-keep"], "keep-marker"),
    ("home/kept/node_modules/", ["home/kept/.hygiene-nb-keep", "home/kept/package.json",
     "home/kept/package-lock.json"], "keep-marker"),
    ("home/kept/.hygiene-nb-keep", [], "keep-marker"),
    ("home/w/node_modules/", ["home/w/node_modules/pkg/test/fixture.key"], "contains-protected"),
    ("home/.local/share/containers/", [], "container-storage"),
    ("home/.local/share/containers/storage/overlay/abc/diff/x.log", [], "container-storage"),
    ("home/.local/share/docker/volumes/", [], "container-storage"),
    ("home/.local/share/", ["home/.local/share/containers/storage/db.sql"], "contains-protected"),
]  # fmt: skip


def build(root: Path, paths: list[str]) -> None:
    for rel in paths:
        if not rel:
            continue
        target = root / rel
        if rel.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            write(target, 10)


def classified(root: Path, store: Path, **kwargs: Any) -> dict[str, dict[str, Any]]:
    api.scan_root(root, store=store)
    table = api.classify_snapshot(str(root), store=store, **kwargs)
    from hygiene_nb.scan.snapshot import entry_paths

    rows = table.append_column("path", entry_paths(table)).to_pylist()
    return {r["path"]: r for r in rows}


def home_root(tmp_path: Path) -> Path:
    root = tmp_path / "r"
    (root / "home").mkdir(parents=True)
    os.environ["HOME"] = str(root / "home")
    return root


def lookup(rows: dict[str, dict[str, Any]], root: Path, rel: str) -> dict[str, Any]:
    return rows[str(root / rel.rstrip("/")) if rel else str(root)]


@pytest.mark.parametrize(("rel", "extra", "risk", "rule"), RULE_CASES)
def test_builtin_rule(
    tmp_path: Path, store: Path, rel: str, extra: list[str], risk: str, rule: str
) -> None:
    root = home_root(tmp_path)
    build(root, [*extra, rel])
    row = lookup(classified(root, store), root, rel)
    assert (row["risk"], row["rule"]) == (risk, rule)
    assert row["claim"] and 0 <= row["confidence"] <= 1


@pytest.mark.parametrize(("rel", "extra", "rule"), PROTECTION_CASES)
def test_protection(tmp_path: Path, store: Path, rel: str, extra: list[str], rule: str) -> None:
    root = home_root(tmp_path)
    build(root, [*extra, rel])
    row = lookup(classified(root, store), root, rel)
    assert (row["risk"], row["rule"], row["protected"]) == ("high", rule, True)


def test_every_builtin_rule_has_a_case_and_a_claim() -> None:
    covered = {rule for *_, rule in RULE_CASES}
    for rule in BUILTIN_RULES:
        assert rule.claim.strip(), rule.rule_id
        assert 0 < rule.confidence <= 1
    missing = {r.rule_id for r in BUILTIN_RULES} - covered
    # these have a case in their own test below, the project types in tests/test_projects.py
    project_types = {
        "untracked-source", "latex-intermediate", "ipynb-checkpoints", "python-egg-info",
        "python-eggs", "jvm-target", "dotnet-build", "cmake-files", "cmake-build",
        "unity-generated", "elixir-build", "stack-work", "zig-cache", "dart-build", "terraform",
    }  # fmt: skip
    in_home = {"cargo-registry", "go-mod-cache", "gradle-cache", "yarn-cache"}
    tagged = {"cachedir-tag"}  # in tests/test_cachedir.py
    assert missing <= in_home | project_types | tagged


@pytest.mark.parametrize(
    ("rel", "rule"),
    [
        ("home/.cargo/registry/", "cargo-registry"),
        ("home/go/pkg/mod/", "go-mod-cache"),
        ("home/.gradle/caches/", "gradle-cache"),
        ("home/Library/Caches/yarn/", "yarn-cache"),
    ],
)
def test_package_manager_caches_in_home(tmp_path: Path, store: Path, rel: str, rule: str) -> None:
    root = home_root(tmp_path)
    build(root, [rel])
    row = lookup(classified(root, store), root, rel)
    assert (row["risk"], row["rule"]) == ("safe", rule)


def test_evidence_raises_confidence(tmp_path: Path, store: Path) -> None:
    root = home_root(tmp_path)
    build(
        root,
        [
            "home/a/node_modules/",
            "home/a/package.json",
            "home/a/package-lock.json",
            "home/b/node_modules/",
        ],
    )
    rows = classified(root, store)
    strong = lookup(rows, root, "home/a/node_modules")
    weak = lookup(rows, root, "home/b/node_modules")
    assert strong["confidence"] > weak["confidence"]
    assert "lockfile" in weak["claim"]


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        env={
            **os.environ,
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@t",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@t",
        },
    )


@pytest.fixture
def repo_root(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = home_root(tmp_path)
    repo = root / "home" / "repo"
    write(repo / "src" / "main.py", 10)
    write(repo / "notes.tmp", 10)
    write(repo / "build" / "out.o", 10)
    write(repo / "package.json", 2)
    git("init", "-q", cwd=repo)
    git("add", "src/main.py", "package.json", cwd=repo)
    return root


def test_git_tracked_files_and_their_ancestors_are_protected(repo_root: Path, store: Path) -> None:
    rows = classified(repo_root, store)
    assert lookup(rows, repo_root, "home/repo/src/main.py")["rule"] == "git-tracked"
    assert lookup(rows, repo_root, "home/repo/.git")["rule"] == "vcs"
    assert lookup(rows, repo_root, "home/repo")["rule"] == "contains-protected"
    assert lookup(rows, repo_root, "home/repo/src")["rule"] == "contains-protected"
    assert lookup(rows, repo_root, "home/repo/notes.tmp")["rule"] == "tmp-file"
    assert lookup(rows, repo_root, "home/repo/build")["risk"] == "safe"


def test_without_git_the_whole_work_tree_is_protected(
    repo_root: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    api.scan_root(repo_root, store=store)
    monkeypatch.setenv("PATH", "/nonexistent")
    table = api.classify_snapshot(str(repo_root), store=store)
    from hygiene_nb.scan.snapshot import entry_paths

    rows = {p: r for p, r in zip(entry_paths(table).to_pylist(), table.to_pylist(), strict=True)}
    for rel in ("home/repo", "home/repo/notes.tmp", "home/repo/build", "home/repo/src/main.py"):
        assert lookup(rows, repo_root, rel)["risk"] == "high", rel
    assert lookup(rows, repo_root, "home/repo")["rule"] == "git-unreadable"


USER_RULES = """
[[rule]]
id = "old-logs"
name = "*.log"
risk = "safe"
claim = "Our app's logs, shipped to the log server nightly"
confidence = 0.95

[[rule]]
id = "keys-are-fine"
name = "*.pem"
risk = "safe"
claim = "Trying to override protection"

[[rule]]
id = "big-bins"
name = "*.bin"
min_bytes = 100
risk = "caution"
claim = "Large binary dumps"

[[rule]]
id = "checkpoint"
name = "ckpt"
kind = "dir"
sibling = "train.py"
risk = "safe"
claim = "Training checkpoints: train.py beside it recreates them"
"""


def test_user_rules_win_over_builtins_but_never_over_protection(
    tmp_path: Path, store: Path
) -> None:
    root = home_root(tmp_path)
    build(
        root,
        ["home/w/app.log", "home/w/k.pem", "home/w/train.py", "home/w/ckpt/", "home/w/other/ckpt/"],
    )
    write(root / "home" / "w" / "small.bin", 10)
    write(root / "home" / "w" / "large.bin", 500)
    rules = tmp_path / "rules.toml"
    rules.write_text(USER_RULES)
    rows = classified(root, store, rules=rules)
    assert lookup(rows, root, "home/w/app.log")["rule"] == "user:old-logs"
    assert lookup(rows, root, "home/w/app.log")["risk"] == "safe"
    assert lookup(rows, root, "home/w/k.pem")["risk"] == "high"
    assert lookup(rows, root, "home/w/large.bin")["rule"] == "user:big-bins"
    assert lookup(rows, root, "home/w/small.bin")["rule"] == "no-rule"
    assert lookup(rows, root, "home/w/ckpt")["rule"] == "user:checkpoint"
    assert lookup(rows, root, "home/w/other/ckpt")["rule"] == "no-rule"


def test_rules_toml_in_the_store_is_read(tmp_path: Path, store: Path) -> None:
    root = home_root(tmp_path)
    build(root, ["home/w/app.log"])
    api.scan_root(root, store=store)
    (store / "rules.toml").write_text(USER_RULES)
    rows = classified(root, store)
    assert lookup(rows, root, "home/w/app.log")["rule"] == "user:old-logs"


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ('[[rule]]\nid = "a"\nname = \n', 3, "not valid TOML"),
        ('[[rule]]\nid = "a"\nname = "*"\nrisk = "safe"\nclaim = "c"\n\n[[rule]]\nid = "b"\n'
         'name = "*"\nrisk = "high"\nclaim = "c"\n', 7, "reserved"),
        ('[[rule]]\nid = "a"\nrisk = "safe"\nclaim = "c"\n', 1, "give `name` or `path`"),
        ('[[rule]]\nid = "a"\nname = "*"\nrisk = "meh"\nclaim = "c"\n', 1, "not one of"),
        ('[[rule]]\nid = "a"\nname = "*"\nrisk = "safe"\nclaim = "c"\ncolour = 1\n', 1,
         "unknown key"),
        ('[[rule]]\nid = "a"\nname = "*"\nrisk = "safe"\nclaim = "c"\nconfidence = 2\n', 1,
         "confidence"),
    ],
)  # fmt: skip
def test_malformed_rules_fail_naming_the_line(text: str, line: int, words: str) -> None:
    with pytest.raises(RuleInvalid) as info:
        parse_user_rules(text, source="rules.toml")
    assert f"rules.toml line {line}:" in info.value.message
    assert words in info.value.message


def test_excluded_and_unreadable_entries_are_not_classified_safe(
    tmp_path: Path, store: Path
) -> None:
    root = home_root(tmp_path)
    build(root, ["home/w/node_modules/", "home/w/package.json", "home/w/package-lock.json"])
    api.scan_root(root, store=store, excludes=["node_modules"])
    table = api.classify_snapshot(str(root), store=store)
    from hygiene_nb.scan.snapshot import entry_paths

    rows = dict(zip(entry_paths(table).to_pylist(), table.to_pylist(), strict=True))
    row = rows[str(root / "home" / "w" / "node_modules")]
    assert (row["risk"], row["rule"]) == ("unknown", "excluded")


def test_changing_rules_reclassifies_history_without_rescanning(
    tmp_path: Path, store: Path
) -> None:
    root = home_root(tmp_path)
    build(root, ["home/w/data.bak"])
    first = api.scan_root(root, store=store)
    before = lookup(classified_at(root, store, first.scan_id), root, "home/w/data.bak")
    (store / "rules.toml").write_text(
        '[[rule]]\nid = "bak"\nname = "*.bak"\nrisk = "safe"\nclaim = "Backup copies"\n'
    )
    after = lookup(classified_at(root, store, first.scan_id), root, "home/w/data.bak")
    assert (before["rule"], after["rule"]) == ("no-rule", "user:bak")


def classified_at(root: Path, store: Path, scan_id: str) -> dict[str, dict[str, Any]]:
    from hygiene_nb.scan.snapshot import entry_paths

    table = api.classify_snapshot(store=store, scan_id=scan_id)
    return dict(zip(entry_paths(table).to_pylist(), table.to_pylist(), strict=True))


def test_scanning_inside_a_repository_protects_its_tracked_files(
    repo_root: Path, store: Path
) -> None:
    sub = repo_root / "home" / "repo" / "src"
    rows = classified(sub, store)
    assert rows[str(sub / "main.py")]["rule"] == "git-tracked"
    assert rows[str(sub)]["risk"] == "high"


def test_scanning_inside_a_repository_without_git_protects_everything(
    repo_root: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sub = repo_root / "home" / "repo"
    write(sub / "src" / "scratch.tmp", 3)
    api.scan_root(sub / "src", store=store)
    monkeypatch.setenv("PATH", "/nonexistent")
    table = api.classify_snapshot(str(sub / "src"), store=store)
    assert set(table.column("risk").to_pylist()) == {"high"}


def test_a_scanned_repository_cannot_make_git_run_its_commands(
    repo_root: Path, store: Path, tmp_path: Path
) -> None:
    repo = repo_root / "home" / "repo"
    pwned = tmp_path / "PWNED"
    git("config", "core.fsmonitor", f"touch {pwned}; false", cwd=repo)
    rows = classified(repo_root, store)
    assert not pwned.exists()
    assert lookup(rows, repo_root, "home/repo/src/main.py")["rule"] == "git-tracked"


@pytest.mark.parametrize(
    ("inner", "setup"),
    [
        ("repo/.git/objects", ["repo/.git/objects/09/abc"]),
        ("k/.ssh/sub", ["k/.ssh/sub/old"]),
        ("k/keepme/sub", ["k/keepme/.hygiene-nb-keep", "k/keepme/sub/data"]),
        ("home/.config/app", ["home/.config/app/cache.db"]),
    ],
)
def test_a_root_inside_something_protected_is_protected_throughout(
    tmp_path: Path, store: Path, inner: str, setup: list[str]
) -> None:
    root = home_root(tmp_path)
    build(root, setup)
    rows = classified(root / inner, store)
    assert {r["risk"] for r in rows.values()} == {"high"}, inner
    decide_all = [p for p, r in rows.items() if r["kind"] == "file"]
    api.annotate(decide_all, store=store, decision="delete")
    plan = api.make_plan(root / inner, store=store).plan
    assert plan["candidates"] == []


@pytest.mark.parametrize(
    ("glob", "hit", "miss"),
    [
        ("cache", "cache", "mycache"),
        ("*cache*", "xcachey", "cach"),
        ("*.lo[gx]", "a.log", "a.loz"),
        ("data-?.csv", "data-1.csv", "data-10.csv"),
        ("[!a]*.bin", "b.bin", "a.bin"),
    ],
)
def test_user_rule_globs_match_whole_names(
    tmp_path: Path, store: Path, glob: str, hit: str, miss: str
) -> None:
    root = home_root(tmp_path)
    build(root, [f"home/w/{hit}", f"home/w/{miss}"])
    rules = tmp_path / "rules.toml"
    rules.write_text(f'[[rule]]\nid = "g"\nname = "{glob}"\nrisk = "caution"\nclaim = "c"\n')
    rows = classified(root, store, rules=rules)
    assert lookup(rows, root, f"home/w/{hit}")["rule"] == "user:g"
    assert lookup(rows, root, f"home/w/{miss}")["rule"] != "user:g"


def test_a_missing_rules_file_given_explicitly_is_an_error(tmp_path: Path, store: Path) -> None:
    root = home_root(tmp_path)
    api.scan_root(root, store=store)
    with pytest.raises(RuleInvalid, match="no rules file"):
        api.classify_snapshot(str(root), store=store, rules=tmp_path / "nope.toml")


@pytest.mark.parametrize("through_link", [False, True])
def test_other_accounts_homes_in_the_root_are_protected_like_your_own(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch, through_link: bool
) -> None:
    import pwd

    root = tmp_path / "homes"
    alice = root / "alice"
    build(
        root,
        [
            "alice/.bashrc",
            "alice/.config/app.ini",
            "alice/.cache/pip/wheel.whl",
            "alice/notes.txt",
            "bob/.bashrc",
        ],
    )
    monkeypatch.setenv("HOME", str(tmp_path / "me"))  # the auditor's own home is elsewhere
    if through_link:  # /home -> /data/home: the password database names the link's path
        (tmp_path / "link").symlink_to(root)
        alice = tmp_path / "link" / "alice"
    real = pwd.getpwall()
    fake = pwd.struct_passwd(("alice", "x", 4321, 4321, "", str(alice), "/bin/sh"))
    monkeypatch.setattr(pwd, "getpwall", lambda: [*real, fake])

    rows = classified(root, store)

    assert lookup(rows, root, "alice")["rule"] == "home"
    assert lookup(rows, root, "alice/.bashrc")["rule"] == "config"
    assert lookup(rows, root, "alice/.config")["rule"] == "config"
    assert lookup(rows, root, "alice/.cache/pip")["risk"] == "safe"
    assert lookup(rows, root, "alice/notes.txt")["risk"] == "unknown"
    # bob has no account here: his directory is just a directory
    assert lookup(rows, root, "bob/.bashrc")["rule"] != "config"
