"""Built-in rule groups and user rules: what an entry is, how sure we are, and why.

Each built-in rule is one row of ``BUILTIN_RULES`` (documented in ``docs/rules.md``, which a test
keeps in step). A rule matches by name, extension or place; ``absorbs`` rules cover a whole
directory (everything inside a ``node_modules`` is part of it). Evidence rules say what must stand
beside an entry for the high-confidence verdict; without it the rule falls back to ``caution``.
"""

from __future__ import annotations

import functools
import re
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from hygiene_nb.classify.protect import ProtectContext
from hygiene_nb.errors import RuleInvalid
from hygiene_nb.store import read_regular_file

__all__ = [
    "BUILTIN_RULES",
    "DIR_RULES_BY_AFFIX",
    "DIR_RULES_BY_NAME",
    "DIR_RULES_BY_PLACE",
    "DIR_RULE_PREFIXES",
    "DIR_RULE_SUFFIXES",
    "EVIDENCE_NAMES",
    "GROUPS",
    "LOCKFILES",
    "PACKAGE_RULES",
    "PROJECT_MANIFESTS",
    "PROJECT_MARKERS",
    "SOURCE_EXTENSIONS",
    "Evidence",
    "Risk",
    "Rule",
    "UserRule",
    "dir_rule",
    "evidence_met",
    "evidence_present",
    "is_manifest",
    "load_user_rules",
    "parse_user_rules",
    "rules_table_markdown",
    "tag_outranks",
]


class Risk(StrEnum):
    """The five risk levels (docs/rules.md). ``unknown`` is never deletable by default."""

    SAFE = "safe"
    CAUTION = "caution"
    PERSONAL = "personal"
    HIGH = "high"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Evidence:
    """What must stand beside a matched entry (in the same directory) for the strong verdict.

    A name starting with ``*`` is a suffix pattern: ``*.csproj`` is any name ending ``.csproj``.
    With ``required``, a missing piece means the rule does not match at all (``bin`` without a
    ``*.csproj`` beside it is anyone's ``bin``), instead of matching as ``caution``.
    """

    all_of: tuple[tuple[str, ...], ...]  # each inner tuple: any one of these names
    missing_claim: str
    missing_confidence: float
    required: bool = False


@dataclass(frozen=True)
class Rule:
    """One built-in rule: a matcher and the verdict it gives."""

    rule_id: str
    group: str
    risk: Risk
    claim: str
    confidence: float
    names: tuple[str, ...] = ()  # exact entry names
    extensions: tuple[str, ...] = ()  # lower-case, with the dot
    prefixes: tuple[str, ...] = ()  # name starts with
    suffixes: tuple[str, ...] = ()  # name ends with
    kind: str | None = None  # "dir" or "file" (file = anything not a directory)
    parent_names: tuple[str, ...] = ()  # only where the parent directory has one of these names
    under_home: tuple[str, ...] = ()  # parent path relative to home, e.g. ".cache"
    home_child: bool = False  # only as a direct child of home
    not_home_child: bool = False  # never as a direct child of home (~/.gradle is Gradle's home)
    beside: tuple[str, ...] = ()  # only where one of these names stands beside it (else no match)
    tagged: bool = False  # a directory holding a valid CACHEDIR.TAG (the scan read it)
    absorbs: bool = False  # the whole subtree belongs to this entry
    evidence: Evidence | None = None
    in_project: bool = False  # only inside a project (PROJECT_MARKERS), outside dependencies
    same_stem: str | None = None  # a file of the same stem with this extension stands beside it


LOCKFILES = (
    "package-lock.json",
    "npm-shrinkwrap.json",
    "yarn.lock",
    "pnpm-lock.yaml",
    "bun.lockb",
    "bun.lock",
)
_PY_PROJECT = (
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "requirements.txt",
    "Pipfile",
    "poetry.lock",
    "uv.lock",
    "environment.yml",
    "requirements-dev.txt",
)
_BUILD_CONFIG = (
    "package.json",
    "pyproject.toml",
    "setup.py",
    "Cargo.toml",
    "Makefile",
    "CMakeLists.txt",
    "build.gradle",
    "build.gradle.kts",
    "pom.xml",
    "go.mod",
    "meson.build",
    "tsconfig.json",
    "vite.config.js",
    "vite.config.ts",
    "webpack.config.js",
    "next.config.js",
    "nuxt.config.ts",
)

# -- projects --------------------------------------------------------------------------------
# A project is the nearest directory holding one of these (a name starting with `*`: a suffix),
# outside any directory a built-in rule absorbs (a package's package.json in node_modules
# makes no project). The scanned root counts as in a project when a git work tree holds it.
PROJECT_MARKERS = (
    ".git", "pyproject.toml", "setup.py", "package.json", "Cargo.toml", "go.mod", "pom.xml",
    "build.gradle", "build.gradle.kts", "build.sbt", "*.csproj", "*.fsproj", "*.vbproj",
    "mix.exs", "pubspec.yaml", "stack.yaml", "*.cabal", "build.zig", "CMakeLists.txt",
    "meson.build", "Gemfile", "composer.json", "deno.json", "Package.swift", "dune-project",
    "Project.toml", "DESCRIPTION",
)  # fmt: skip
# In a project, these files (the markers and the lockfiles beside them) are protected.
PROJECT_MANIFESTS = (
    *(m for m in PROJECT_MARKERS if m != ".git"),
    "setup.cfg", "requirements.txt", "Pipfile", "Pipfile.lock", "poetry.lock", "uv.lock",
    "pdm.lock", *LOCKFILES, "Cargo.lock", "go.sum", "go.work", "settings.gradle",
    "settings.gradle.kts", "gradle.properties", "*.sln", "packages.lock.json",
    "Directory.Build.props", "mix.lock", "pubspec.lock", "stack.yaml.lock", "cabal.project",
    "build.zig.zon", "Gemfile.lock", "composer.lock", "deno.lock", "Package.resolved",
    "Manifest.toml", "flake.nix", "flake.lock",
)  # fmt: skip
# In a project, a file with one of these extensions that git does not track is a person's work.
SOURCE_EXTENSIONS = (
    ".py", ".pyi", ".rs", ".go", ".js", ".mjs", ".cjs", ".ts", ".tsx", ".jsx", ".vue", ".svelte",
    ".c", ".h", ".cc", ".cpp", ".cxx", ".hpp", ".hh", ".java", ".kt", ".kts", ".scala", ".groovy",
    ".cs", ".fs", ".vb", ".rb", ".php", ".swift", ".m", ".mm", ".ex", ".exs", ".erl", ".hs",
    ".ml", ".zig", ".dart", ".lua", ".pl", ".sh", ".bash", ".zsh", ".ps1", ".sql", ".r", ".jl",
    ".nim", ".tex", ".bib", ".md", ".rst", ".org", ".ipynb", ".proto", ".tf",
)  # fmt: skip
_LATEX_INTERMEDIATE = (
    ".aux", ".log", ".synctex.gz", ".fdb_latexmk", ".fls", ".toc", ".out", ".bbl", ".blg",
    ".lof", ".lot", ".nav", ".snm", ".bcf", ".run.xml",
)  # fmt: skip

_MEDIA = (
    ".jpg",
    ".jpeg",
    ".png",
    ".gif",
    ".heic",
    ".raw",
    ".cr2",
    ".nef",
    ".tif",
    ".tiff",
    ".webp",
    ".mp3",
    ".flac",
    ".wav",
    ".m4a",
    ".aac",
    ".ogg",
    ".mp4",
    ".mov",
    ".mkv",
    ".avi",
    ".m4v",
)
_OFFICE = (
    ".pdf",
    ".doc",
    ".docx",
    ".xls",
    ".xlsx",
    ".ppt",
    ".pptx",
    ".odt",
    ".ods",
    ".odp",
    ".pages",
    ".numbers",
    ".rtf",
    ".epub",
)

BUILTIN_RULES: tuple[Rule, ...] = (
    # -- language and tool caches -------------------------------------------------------------
    Rule("pycache", "python-cache", Risk.SAFE,
         "Python bytecode cache: Python rebuilds it on the next run", 0.95,
         names=("__pycache__",), kind="dir", absorbs=True),
    Rule("pyc", "python-cache", Risk.SAFE,
         "Compiled Python file: Python rebuilds it from the source", 0.9,
         extensions=(".pyc", ".pyo"), kind="file"),
    Rule("tool-cache", "tool-cache", Risk.SAFE,
         "Test or linter cache: the tool rebuilds it on its next run", 0.95,
         names=(".pytest_cache", ".mypy_cache", ".ruff_cache", ".hypothesis"),
         kind="dir", absorbs=True),
    Rule("tox", "tool-cache", Risk.SAFE,
         "tox/nox test environments: recreated on the next test run", 0.9,
         names=(".tox", ".nox"), kind="dir", absorbs=True),
    # -- dependency directories ---------------------------------------------------------------
    Rule("node-modules", "node_modules", Risk.SAFE,
         "Installed npm packages: `npm ci` reinstalls them from package.json and the lockfile", 0.9,
         names=("node_modules",), kind="dir", absorbs=True,
         evidence=Evidence((("package.json",), LOCKFILES),
                           "Installed npm packages, but no package.json and lockfile beside it: "
                           "reinstalling may not give the same versions", 0.5)),
    Rule("venv", "virtualenv", Risk.SAFE,
         "Python virtual environment: recreated from the project's requirements", 0.85,
         names=(".venv", "venv"), kind="dir", absorbs=True,
         evidence=Evidence((_PY_PROJECT,),
                           "Python virtual environment with no pyproject.toml or requirements "
                           "beside it: what was installed may be hard to recreate", 0.5)),
    Rule("vendor-bundle", "vendor-bundle", Risk.SAFE,
         "Ruby gems installed by Bundler: `bundle install` restores them", 0.8,
         names=("bundle",), parent_names=("vendor",), kind="dir", absorbs=True),
    # -- build outputs ------------------------------------------------------------------------
    Rule("rust-target", "build-output", Risk.SAFE,
         "Rust build output: `cargo build` recreates it", 0.9,
         names=("target",), kind="dir", absorbs=True,
         evidence=Evidence((("Cargo.toml",),),
                           "A directory named target with no Cargo.toml beside it: it may not be "
                           "a build output", 0.4)),
    Rule("build-dir", "build-output", Risk.SAFE,
         "Build output: the project's build recreates it", 0.8,
         names=("dist", "build", "out", ".next", ".nuxt", ".turbo", ".parcel-cache", ".gradle",
                "DerivedData", ".svelte-kit", ".angular"),
         kind="dir", absorbs=True, not_home_child=True,
         evidence=Evidence((_BUILD_CONFIG,),
                           "Looks like build output, but no build file (package.json, "
                           "pyproject.toml, Makefile…) stands beside it", 0.4)),
    # -- project types (as kondo knows them), each with its evidence --------------------------
    Rule("untracked-source", "project-source", Risk.PERSONAL,
         "Source in a project that git does not track: a person's work, nothing rebuilds it", 0.8,
         extensions=SOURCE_EXTENSIONS, kind="file", in_project=True),
    Rule("latex-intermediate", "build-output", Risk.SAFE,
         "LaTeX intermediate file: compiling the .tex beside it writes it again", 0.9,
         extensions=_LATEX_INTERMEDIATE, kind="file", same_stem=".tex"),
    Rule("ipynb-checkpoints", "jupyter", Risk.CAUTION,
         "Jupyter checkpoints: earlier saved versions of notebooks, maybe the only copy of "
         "earlier work", 0.7,
         names=(".ipynb_checkpoints",), kind="dir", absorbs=True),
    Rule("python-egg-info", "build-output", Risk.SAFE,
         "Python packaging metadata: `pip install` or a build writes it again", 0.85,
         suffixes=(".egg-info",), kind="dir", absorbs=True,
         evidence=Evidence((("pyproject.toml", "setup.py", "setup.cfg"),),
                           "Python packaging metadata with no pyproject.toml, setup.py or "
                           "setup.cfg beside it: the project that wrote it is not here", 0.5)),
    Rule("python-eggs", "build-output", Risk.SAFE,
         "Eggs setuptools fetched for a build: fetched again when needed", 0.85,
         names=(".eggs",), kind="dir", absorbs=True,
         evidence=Evidence((("setup.py", "setup.cfg", "pyproject.toml"),),
                           "Python eggs with no setup.py or pyproject.toml beside them", 0.5)),
    Rule("jvm-target", "build-output", Risk.SAFE,
         "Maven or sbt build output: `mvn package` or `sbt compile` recreates it", 0.9,
         names=("target",), kind="dir", absorbs=True,
         evidence=Evidence((("pom.xml", "build.sbt"),),
                           "A directory named target with no pom.xml or build.sbt beside it", 0.4,
                           required=True)),
    Rule("dotnet-build", "build-output", Risk.SAFE,
         ".NET build output: `dotnet build` recreates it", 0.85,
         names=("bin", "obj"), kind="dir", absorbs=True, not_home_child=True,
         evidence=Evidence((("*.csproj", "*.fsproj", "*.vbproj"),),
                           "bin or obj with no .NET project file beside it", 0.4, required=True)),
    Rule("cmake-files", "build-output", Risk.SAFE,
         "CMake's working files in a build tree: the next `cmake` run writes them again", 0.85,
         names=("CMakeFiles",), kind="dir", absorbs=True),
    Rule("cmake-build", "build-output", Risk.SAFE,
         "An IDE's CMake build directory: building again recreates it", 0.85,
         prefixes=("cmake-build-",), kind="dir", absorbs=True,
         evidence=Evidence((("CMakeLists.txt",),),
                           "Looks like a CMake build directory, but no CMakeLists.txt stands "
                           "beside it", 0.4)),
    Rule("unity-generated", "build-output", Risk.SAFE,
         "Unity's generated project files: the editor rebuilds them when it opens the project",
         0.8, names=("Library", "Temp", "Obj"), kind="dir", absorbs=True,
         not_home_child=True,
         evidence=Evidence((("ProjectSettings",),),
                           "Library, Temp or Obj with no Unity ProjectSettings beside it", 0.4,
                           required=True)),
    Rule("elixir-build", "build-output", Risk.SAFE,
         "Elixir build output and fetched dependencies: `mix deps.get` and `mix compile` "
         "recreate them", 0.85,
         names=("_build", "deps"), kind="dir", absorbs=True,
         evidence=Evidence((("mix.exs",),), "_build or deps with no mix.exs beside it", 0.4,
                           required=True)),
    Rule("stack-work", "build-output", Risk.SAFE,
         "Haskell Stack's build directory: `stack build` recreates it", 0.9,
         names=(".stack-work",), kind="dir", absorbs=True,
         evidence=Evidence((("stack.yaml", "package.yaml", "*.cabal"),),
                           "A .stack-work with no stack.yaml, package.yaml or .cabal file beside "
                           "it", 0.5)),
    Rule("zig-cache", "build-output", Risk.SAFE,
         "Zig build cache and output: `zig build` recreates them", 0.9,
         names=("zig-cache", ".zig-cache", "zig-out"), kind="dir", absorbs=True,
         evidence=Evidence((("build.zig",),),
                           "Zig build output with no build.zig beside it", 0.5)),
    Rule("dart-build", "build-output", Risk.SAFE,
         "Dart or Flutter build output and tool state: `dart pub get` and the build recreate "
         "them", 0.85,
         names=(".dart_tool", "build"), kind="dir", absorbs=True, not_home_child=True,
         evidence=Evidence((("pubspec.yaml",),),
                           "Dart tool state with no pubspec.yaml beside it", 0.4)),
    Rule("terraform", "dependencies", Risk.SAFE,
         "Terraform's providers and modules: `terraform init` downloads them again", 0.8,
         names=(".terraform",), kind="dir", absorbs=True,
         evidence=Evidence((("*.tf", "*.tf.json"),),
                           "A .terraform with no .tf file beside it: the configuration that "
                           "would download it again is not here", 0.5)),
    # -- user and package-manager caches ------------------------------------------------------
    Rule("pip-cache", "package-cache", Risk.SAFE,
         "pip's cache of downloads and built wheels: pip downloads them again when needed", 0.9,
         names=("pip",), under_home=(".cache", "Library/Caches"), kind="dir", absorbs=True),
    Rule("uv-cache", "package-cache", Risk.SAFE,
         "uv's package cache: uv downloads packages again when needed", 0.9,
         names=("uv",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("npm-user-cache", "package-cache", Risk.SAFE,
         "npm's cache: packages are downloaded again when needed", 0.9,
         names=("npm",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("pnpm-cache", "package-cache", Risk.SAFE,
         "pnpm's metadata cache: pnpm fetches it again when needed", 0.9,
         names=("pnpm",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("go-build-cache", "package-cache", Risk.SAFE,
         "Go's build cache: `go build` fills it again", 0.9,
         names=("go-build",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("poetry-cache", "package-cache", Risk.SAFE,
         "Poetry's cache of packages and of the virtual environments it made: `poetry install` "
         "recreates them", 0.85,
         names=("pypoetry",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("cargo-cache", "package-cache", Risk.SAFE,
         "Cargo's cache: crates are downloaded again when needed", 0.9,
         names=("cargo",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("playwright-browsers", "package-cache", Risk.SAFE,
         "Browsers downloaded by Playwright: `playwright install` downloads them again", 0.9,
         names=("ms-playwright",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("huggingface-cache", "model-cache", Risk.CAUTION,
         "Hugging Face models and data sets: large models: downloading them again can take long",
         0.8, names=("huggingface",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("torch-cache", "model-cache", Risk.CAUTION,
         "PyTorch hub models and checkpoints: large models: downloading them again can take long",
         0.8, names=("torch",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("jetbrains-cache", "user-cache", Risk.SAFE,
         "JetBrains IDE caches and indexes: the IDE rebuilds them (indexing again takes a while)",
         0.85, names=("JetBrains",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("thumbnails", "user-cache", Risk.SAFE,
         "Thumbnails of your pictures: the desktop draws them again when a folder is shown", 0.95,
         names=("thumbnails",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("firefox-cache", "user-cache", Risk.SAFE,
         "Firefox's web cache (the profile itself is in ~/.mozilla): pages are fetched again", 0.9,
         names=("mozilla",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("chromium-cache", "user-cache", Risk.SAFE,
         "Chromium's web cache (the profile itself is in ~/.config/chromium): pages are fetched "
         "again", 0.9,
         names=("chromium",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("chrome-cache", "user-cache", Risk.SAFE,
         "Google Chrome's web cache (the profile itself is in ~/.config/google-chrome): pages are "
         "fetched again", 0.9,
         names=("google-chrome",), under_home=(".cache",), kind="dir", absorbs=True),
    Rule("npm-cache", "package-cache", Risk.SAFE,
         "npm download cache: packages are downloaded again when needed", 0.9,
         names=("_cacache",), under_home=(".npm",), kind="dir", absorbs=True),
    Rule("cargo-registry", "package-cache", Risk.SAFE,
         "Cargo registry cache: crates are downloaded again when needed", 0.85,
         names=("registry",), under_home=(".cargo",), kind="dir", absorbs=True),
    Rule("go-mod-cache", "package-cache", Risk.SAFE,
         "Go module cache: modules are downloaded again when needed", 0.85,
         names=("mod",), under_home=("go/pkg",), kind="dir", absorbs=True),
    Rule("maven-repo", "package-cache", Risk.CAUTION,
         "Maven's local repository: downloaded artifacts come again, but artifacts installed "
         "locally with `mvn install` may exist nowhere else", 0.7,
         names=("repository",), under_home=(".m2",), kind="dir", absorbs=True),
    Rule("gradle-cache", "package-cache", Risk.SAFE,
         "Gradle cache: dependencies are downloaded again when needed", 0.85,
         names=("caches",), under_home=(".gradle",), kind="dir", absorbs=True),
    Rule("yarn-cache", "package-cache", Risk.SAFE,
         "Yarn cache: packages are downloaded again when needed", 0.85,
         names=("yarn",), under_home=(".cache", "Library/Caches"), kind="dir", absorbs=True),
    Rule("conda-pkgs", "package-cache", Risk.SAFE,
         "conda's package cache: packages are downloaded again when needed (`conda clean "
         "--all` empties it)", 0.8,
         names=("pkgs",), under_home=(".conda",), kind="dir", absorbs=True),
    Rule("conda-install-pkgs", "package-cache", Risk.SAFE,
         "The package cache of a conda installation: packages are downloaded again when needed "
         "(`conda clean --all` empties it)", 0.8,
         names=("pkgs",), beside=("conda-meta", "condabin"), kind="dir", absorbs=True),
    Rule("cachedir-tag", "tool-cache", Risk.SAFE,
         "Cache directory tagged by the tool that made it (CACHEDIR.TAG): the tool recreates "
         "it", 0.9, tagged=True, kind="dir", absorbs=True),
    Rule("user-cache", "user-cache", Risk.CAUTION,
         "Application cache: the app rebuilds it, but large downloads (models, images) may take "
         "long to fetch again", 0.7,
         under_home=(".cache", "Library/Caches"), absorbs=True),
    # -- logs and temporary files -------------------------------------------------------------
    Rule("log-file", "logs", Risk.CAUTION,
         "Log file: useful when something goes wrong; old logs are usually safe to remove", 0.6,
         extensions=(".log",), kind="file"),
    Rule("log-dir", "logs", Risk.CAUTION,
         "Log directory: useful when something goes wrong; old logs are usually safe to remove",
         0.6, names=("Logs", "logs"), kind="dir", absorbs=True),
    Rule("tmp-file", "temporary", Risk.CAUTION,
         "Temporary file: usually left behind, but a running program may still be using it", 0.6,
         extensions=(".tmp", ".temp", ".swp"), kind="file"),
    Rule("backup-tilde", "temporary", Risk.SAFE,
         "Editor backup copy (name ends in ~): the original file is beside it", 0.8,
         suffixes=("~",), kind="file"),
    Rule("os-junk", "temporary", Risk.SAFE,
         "Folder view settings written by macOS or Windows: recreated when needed", 0.95,
         names=(".DS_Store", "Thumbs.db", "desktop.ini", "._.DS_Store"), kind="file"),
    # -- trash --------------------------------------------------------------------------------
    Rule("trash", "trash", Risk.CAUTION,
         "Trash: things already deleted once; emptying it makes that final", 0.8,
         names=(".Trash", ".Trashes"), kind="dir", absorbs=True),
    Rule("xdg-trash", "trash", Risk.CAUTION,
         "The desktop's trash: empty it there", 0.8,
         names=("Trash",), under_home=(".local/share",), kind="dir", absorbs=True),
    # -- personal content ---------------------------------------------------------------------
    Rule("personal-dir", "personal", Risk.PERSONAL,
         "Your own files: nothing rebuilds them", 0.9,
         names=("Documents", "Desktop", "Pictures", "Music", "Movies", "Videos", "Photos"),
         kind="dir", home_child=True),
    Rule("media-file", "personal", Risk.PERSONAL,
         "A photo, song or video: probably yours, and nothing rebuilds it", 0.8,
         extensions=_MEDIA, kind="file"),
    Rule("office-file", "personal", Risk.PERSONAL,
         "A document: probably yours, and nothing rebuilds it", 0.8,
         extensions=_OFFICE, kind="file"),
)  # fmt: skip

GROUPS: tuple[str, ...] = tuple(dict.fromkeys(r.group for r in BUILTIN_RULES))

# Dependency and build directories whose files are the packages' own: inside one matched with
# its evidence (as regular files), a key-like file (``*.pem``, ``*.key``…) is the package's
# (``package-key-material``), not a credential of yours. Its exact-name credentials stay
# protected.
PACKAGE_RULES = frozenset({"pycache", "tox", "node-modules", "venv", "rust-target", "build-dir"})


_MANIFEST_EXACT = frozenset(m for m in PROJECT_MANIFESTS if not m.startswith("*"))
_MANIFEST_SUFFIXES = tuple(m[1:] for m in PROJECT_MANIFESTS if m.startswith("*"))


def is_manifest(name: str) -> bool:
    """Whether ``name`` is a project manifest's or lockfile's (``PROJECT_MANIFESTS``)."""
    return name in _MANIFEST_EXACT or name.endswith(_MANIFEST_SUFFIXES)


def evidence_met(rule: Rule, present: set[str] | frozenset[str]) -> bool:
    """Whether ``present`` (the names beside the entry) holds the evidence ``rule`` needs."""
    if rule.evidence is None:
        return True
    return all(present.intersection(group) for group in rule.evidence.all_of)


def _matches_affix(rule: Rule, name: str) -> bool:
    """Whether ``name`` starts with one of a rule's prefixes or ends with one of its suffixes."""
    return name.startswith(rule.prefixes) or name.endswith(rule.suffixes)


def _matches_place(rule: Rule, parent: str, ctx: ProtectContext) -> bool:
    """Whether a rule's place conditions hold (its name matched: ``_candidates``)."""
    if rule.parent_names and parent.rsplit("/", 1)[-1] not in rule.parent_names:
        return False
    if rule.under_home and ctx.home_rel(parent) not in rule.under_home:
        return False
    if rule.not_home_child and parent in ctx.homes:
        return False
    return not rule.home_child or parent in ctx.homes


_Ordered = list[tuple[int, Rule]]


def _index_dir_rules() -> tuple[dict[str, _Ordered], _Ordered, _Ordered]:
    """Directory rules by the names they match, by name prefix or suffix, and by place alone."""
    by_name: dict[str, _Ordered] = {}
    by_affix: _Ordered = []
    by_place: _Ordered = []
    for order, rule in enumerate(BUILTIN_RULES):
        if rule.kind == "file":
            continue
        if rule.names:
            for name in rule.names:
                by_name.setdefault(name, []).append((order, rule))
        elif rule.prefixes or rule.suffixes:
            by_affix.append((order, rule))
        elif rule.under_home:
            by_place.append((order, rule))
    return by_name, by_affix, by_place


DIR_RULES_BY_NAME, DIR_RULES_BY_AFFIX, DIR_RULES_BY_PLACE = _index_dir_rules()
DIR_RULE_PREFIXES = tuple(p for _, r in DIR_RULES_BY_AFFIX for p in r.prefixes)
DIR_RULE_SUFFIXES = tuple(x for _, r in DIR_RULES_BY_AFFIX for x in r.suffixes)
# Every name a built-in rule looks for beside an entry (``*`` first: a suffix pattern).
EVIDENCE_NAMES = frozenset(
    {n for r in BUILTIN_RULES if r.evidence for group in r.evidence.all_of for n in group}
    | {n for r in BUILTIN_RULES for n in r.beside}
)
_EVIDENCE_EXACT = frozenset(n for n in EVIDENCE_NAMES if not n.startswith("*"))
_EVIDENCE_PATTERNS = tuple(sorted(n for n in EVIDENCE_NAMES if n.startswith("*")))


def evidence_present(names: Iterable[str]) -> set[str]:
    """Which of ``EVIDENCE_NAMES`` the names in one directory make present (patterns too)."""
    out: set[str] = set()
    for name in names:
        if name in _EVIDENCE_EXACT:
            out.add(name)
        out.update(p for p in _EVIDENCE_PATTERNS if name.endswith(p[1:]))
    return out


@functools.lru_cache(maxsize=4096)
def _candidates(name: str) -> tuple[Rule, ...]:
    """The directory rules that could match a name (by it, its affix or place), in order."""
    pairs = DIR_RULES_BY_NAME.get(name, [])
    pairs = pairs + [pair for pair in DIR_RULES_BY_AFFIX if _matches_affix(pair[1], name)]
    pairs = pairs + DIR_RULES_BY_PLACE
    return tuple(rule for _, rule in sorted(pairs, key=lambda pair: pair[0]))


def dir_rule(
    name: str, parent: str, ctx: ProtectContext, present: set[str] | frozenset[str]
) -> tuple[Rule, bool] | None:
    """The built-in rule of a directory by its own name and place, and whether its evidence holds.

    ``present``: the evidence names standing beside it (``evidence_present``). The first rule
    (in table order) that matches wins; where its evidence is missing, a later rule matching
    the same name whose evidence stands beside it wins instead (``target`` beside a
    ``pom.xml`` is Maven's, not a Rust target without its Cargo.toml). A rule whose evidence
    is ``required``, or whose ``beside`` names are all missing, does not match without them.
    Classification and the act-time re-check ask this same question.
    """
    weak: Rule | None = None
    for rule in _candidates(name):
        if not _matches_place(rule, parent, ctx):
            continue
        if rule.beside and not present.intersection(rule.beside):
            continue
        if not evidence_met(rule, present):
            assert rule.evidence is not None
            if weak is None and not rule.evidence.required:
                weak = rule
            continue
        if (
            rule.evidence is None
            and weak is not None
            and not (rule.names or rule.prefixes or rule.suffixes)
        ):
            break  # a rule by place alone never outranks an earlier one by name
        return rule, True
    return (weak, False) if weak is not None else None


def tag_outranks(found: tuple[Rule, bool] | None) -> bool:
    """Whether a valid CACHEDIR.TAG decides over what ``dir_rule`` found for its directory.

    Over nothing, over a rule whose evidence is missing (the tag is that evidence), and over
    the generic application cache; a more specific rule with its evidence keeps its verdict.
    """
    return found is None or not found[1] or found[0].rule_id == "user-cache"


def _matcher(rule: Rule) -> str:
    parts = []
    if rule.names:
        parts.append("name " + ", ".join(f"`{n}`" for n in rule.names))
    if rule.extensions:
        parts.append("extension " + ", ".join(f"`{e}`" for e in rule.extensions))
    if rule.prefixes:
        parts.append("name starting " + ", ".join(f"`{x}`" for x in rule.prefixes))
    if rule.suffixes:
        parts.append("name ending " + ", ".join(f"`{x}`" for x in rule.suffixes))
    if rule.same_stem:
        parts.append(f"beside a `{rule.same_stem}` of the same stem")
    if rule.in_project:
        parts.append("in a project, not tracked by git")
    if rule.parent_names:
        parts.append("inside " + ", ".join(f"`{x}/`" for x in rule.parent_names))
    if rule.under_home:
        parts.append("directly in " + ", ".join(f"`~/{x}/`" for x in rule.under_home))
    if rule.beside:
        parts.append("beside " + " or ".join(f"`{x}`" for x in rule.beside))
    if rule.tagged:
        parts.append("holding a valid `CACHEDIR.TAG`")
    if rule.home_child:
        parts.append("directly in `~`")
    if rule.not_home_child:
        parts.append("not directly in `~`")
    if rule.kind:
        parts.append(f"({rule.kind}{', whole subtree' if rule.absorbs else ''})")
    return "; ".join(parts)


def rules_table_markdown() -> str:
    """The built-in rules as the Markdown table ``docs/rules.md`` holds (a test compares)."""
    lines = [
        "| rule | group | matches | risk | confidence | claim | evidence (else: caution) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in BUILTIN_RULES:
        evidence = ""
        if r.evidence is not None:
            needs = " and ".join(
                " or ".join(f"`{n}`" for n in group) for group in r.evidence.all_of
            )
            if r.evidence.required:
                evidence = f"{needs} beside it; else no match"
            else:
                evidence = f"{needs} beside it; else {r.evidence.missing_confidence}"
        lines.append(
            f"| `{r.rule_id}` | `{r.group}` | {_matcher(r)} | {r.risk.value} | {r.confidence} "
            f"| {r.claim} | {evidence} |"
        )
    return "\n".join(lines) + "\n"


# -- user rules -------------------------------------------------------------------------------

_USER_KEYS = {
    "id", "name", "path", "kind", "min_age_days", "min_bytes", "sibling", "risk", "claim",
    "confidence",
}  # fmt: skip


@dataclass(frozen=True)
class UserRule:
    """A rule from the user's TOML file; it wins over every built-in (never over protection)."""

    rule_id: str
    risk: Risk
    claim: str
    confidence: float
    name: str | None = None  # glob on the entry's name
    path: str | None = None  # glob on the absolute path
    kind: str | None = None  # file | dir | symlink | other
    min_age_days: float | None = None
    min_bytes: int | None = None
    sibling: str | None = None  # a file with this name must stand beside the entry


def _line_of(text: str, index: int) -> int:
    """The line where the ``index``-th ``[[rule]]`` table starts (1-based)."""
    seen = -1
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip().startswith("[[rule]]"):
            seen += 1
            if seen == index:
                return number
    return 1


def _fail(source: str, line: int, message: str) -> RuleInvalid:
    return RuleInvalid(f"{source} line {line}: {message}; fix the rule (see docs/rules.md).")


def _check_rule(raw: Mapping[str, Any], source: str, line: int) -> UserRule:
    unknown = set(raw) - _USER_KEYS
    if unknown:
        return_error = f"unknown key(s) {', '.join(sorted(unknown))}"
        raise _fail(source, line, return_error)
    for key in ("id", "risk", "claim"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise _fail(source, line, f"`{key}` must be a non-empty string")
    try:
        risk = Risk(raw["risk"])
    except ValueError:
        raise _fail(
            source, line, f"risk {raw['risk']!r} is not one of {', '.join(r.value for r in Risk)}"
        ) from None
    if risk is Risk.HIGH:
        raise _fail(source, line, "risk `high` is reserved for protection")
    if not any(k in raw for k in ("name", "path")):
        raise _fail(source, line, "give `name` or `path` (a glob) to say what the rule matches")
    confidence = raw.get("confidence", 0.8)
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not (0 <= confidence <= 1)
    ):
        raise _fail(source, line, "`confidence` must be a number from 0 to 1")
    kind = raw.get("kind")
    if kind is not None and kind not in ("file", "dir", "symlink", "other"):
        raise _fail(source, line, "`kind` must be file, dir, symlink or other")
    for key, types in (
        ("name", str),
        ("path", str),
        ("sibling", str),
        ("min_age_days", int | float),
        ("min_bytes", int),
    ):
        value = raw.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, types)):
            raise _fail(source, line, f"`{key}` has the wrong type")
    return UserRule(
        rule_id=raw["id"],
        risk=risk,
        claim=raw["claim"],
        confidence=float(confidence),
        name=raw.get("name"),
        path=raw.get("path"),
        kind=kind,
        min_age_days=raw.get("min_age_days"),
        min_bytes=raw.get("min_bytes"),
        sibling=raw.get("sibling"),
    )


def parse_user_rules(text: str, *, source: str = "rules.toml") -> tuple[UserRule, ...]:
    """Parse a user rules file (TOML: ``[[rule]]`` tables).

    Raises:
        RuleInvalid: the file is not valid TOML or a rule is malformed (names the line).
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"at line (\d+)", str(exc))  # Python 3.11 has no exc.lineno
        line = getattr(exc, "lineno", None) or (int(found.group(1)) if found else 1)
        raise _fail(source, line, f"not valid TOML ({exc.args[0] if exc.args else exc})") from exc
    extra = set(data) - {"rule"}
    if extra:
        raise _fail(source, 1, f"unknown top-level key(s) {', '.join(sorted(extra))}")
    tables = data.get("rule", [])
    if not isinstance(tables, list):
        raise _fail(source, 1, "`rule` must be an array of tables ([[rule]])")
    rules = tuple(_check_rule(t, source, _line_of(text, i)) for i, t in enumerate(tables))
    ids = [r.rule_id for r in rules]
    if len(ids) != len(set(ids)):
        raise _fail(source, 1, "two rules share an id")
    return rules


_MAX_RULES_BYTES = 16 * 1024 * 1024


def load_user_rules(path: Path, *, missing_ok: bool = False) -> tuple[UserRule, ...]:
    """Read a user rules file (with ``missing_ok``, a missing file means no user rules).

    Raises:
        RuleInvalid: the file is missing (unless ``missing_ok``), unreadable or malformed.
    """
    try:
        data = read_regular_file(path, _MAX_RULES_BYTES)
        if len(data) > _MAX_RULES_BYTES:
            raise RuleInvalid(
                f"{path} is larger than a rules file may be ({_MAX_RULES_BYTES} bytes)."
            )
        text = data.decode("utf-8")
    except FileNotFoundError:
        if missing_ok:
            return ()
        raise RuleInvalid(f"no rules file {path}; check the path given to --rules.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleInvalid(f"cannot read {path}: {exc}; fix or remove it.") from exc
    return parse_user_rules(text, source=str(path))
