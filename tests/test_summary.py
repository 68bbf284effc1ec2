"""``summary --json`` on a small demo tree, against figures computed by hand from lstat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.helpers import write


def own(*paths: Path) -> int:
    return sum(os.lstat(p).st_size for p in paths)


def demo(root: Path) -> dict[str, Path]:
    home = root / "home"
    p = {
        "proj": home / "proj",
        "nm": home / "proj" / "node_modules",
        "lib": home / "proj" / "node_modules" / "lib.js",
        "pkg": home / "proj" / "package.json",
        "lock": home / "proj" / "package-lock.json",
        "log": home / "proj" / "app.log",
        "bin": home / "proj" / "x.bin",
        "docs": home / "Documents",
        "pdf": home / "Documents" / "a.pdf",
        "cache": home / "proj" / "__pycache__",
        "pyc": home / "proj" / "__pycache__" / "m.pyc",
        "key": home / "proj" / "server.pem",
    }
    write(p["lib"], 1000)
    write(p["pkg"], 20)
    write(p["lock"], 30)
    write(p["log"], 300)
    write(p["bin"], 50)
    write(p["pdf"], 200)
    write(p["pyc"], 70)
    write(p["key"], 5)
    os.link(p["pyc"], p["proj"] / "pyc-twin")  # a hard link outside the cache
    return p


def summary(root: Path, store: Path, env: dict[str, str]) -> dict[str, Any]:
    for args in (["scan", str(root)], ["summary", str(root), "--top", "3"]):
        out = subprocess.run(
            [sys.executable, "-m", "hygiene_nb", *args, "--store", str(store), "--json"],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        ).stdout
    return dict(json.loads(out))


def test_summary_json_matches_hand_computed_figures(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    p = demo(root)
    home = root / "home"
    env = {**os.environ, "HOME": str(home)}
    s = summary(root, store, env)

    # safe: node_modules (+ its file, evidence present) and __pycache__ (+ m.pyc).
    # m.pyc has a second name outside the cache, so it counts in the risk mix once (first seen)
    # but deleting the cache frees nothing of it.
    safe_nm = own(p["nm"], p["lib"])
    safe_cache_dir = own(p["cache"])
    assert s["risk"]["safe"]["entries"] == 4
    assert s["reclaimable"]["safe"]["bytes"] == safe_nm + safe_cache_dir
    assert s["risk"]["caution"] == {
        "bytes": 300,
        "alloc": s["risk"]["caution"]["alloc"],
        "entries": 1,
    }
    assert s["risk"]["personal"]["bytes"] == own(p["docs"], p["pdf"])
    # high: root, home, proj (contains server.pem), server.pem, and the project's manifests
    # package.json and package-lock.json
    assert s["risk"]["high"]["entries"] == 6
    assert s["risk"]["high"]["bytes"] == own(root, home, p["proj"], p["key"], p["pkg"], p["lock"])
    # every byte is in exactly one risk level (hard links once)
    total = sum(level["bytes"] for level in s["risk"].values())
    assert total == s["tree_bytes"]

    groups = {g["group"]: g for g in s["groups"]}
    assert groups["node_modules"]["count"] == 1
    assert groups["node_modules"]["bytes"] == safe_nm
    assert groups["python-cache"]["count"] == 1  # m.pyc inside the cache is not counted again

    # cleanliness: files counted = app.log, x.bin, a.pdf, m.pyc and its twin (unknown);
    # node_modules is a dependency, server.pem and the manifests are protected.
    # safe 1 (m.pyc), caution 1 (app.log), unknown 2, personal 1 → N = 5
    detail = s["cleanliness_detail"]
    assert (
        detail["counted"],
        detail["cleanable"],
        detail["intermediate"],
        detail["pending"],
        detail["valuable"],
    ) == (5, 1, 1, 2, 1)
    assert s["cleanliness"] == round(100 - 70 * 1 / 5 - 20 * 1 / 5 - 10 * 2 / 5)
    assert [e["path"] for e in s["largest"]][:1] == [str(home)]
    assert all({"path", "bytes", "risk", "rule", "claim"} <= set(e) for e in s["largest"])


def test_pattern_groups_count_nested_members_once(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    home = root / "home"
    write(home / "Pictures" / "a.jpg", 1000)
    write(home / "Pictures" / "trip" / "b.jpg", 2000)
    write(home / "loose.jpg", 500)
    s = summary(root, store, {**os.environ, "HOME": str(home)})
    personal = {g["group"]: g for g in s["groups"]}["personal"]
    assert personal["count"] == 2  # ~/Pictures and loose.jpg; the photos inside are not again
    assert personal["bytes"] == own(
        home / "Pictures", home / "Pictures" / "a.jpg", home / "Pictures" / "trip",
        home / "Pictures" / "trip" / "b.jpg", home / "loose.jpg",
    )  # fmt: skip


def test_a_match_that_sorts_between_a_directory_and_its_rows_hides_no_nesting(
    tmp_path: Path, store: Path
) -> None:
    # "Pictures.jpg" sorts between "Pictures" and "Pictures/a.jpg" ('.' comes before '/'):
    # the photo inside ~/Pictures is still inside it, counted with it and not again
    home = tmp_path / "r" / "home"
    write(home / "Pictures" / "a.jpg", 1000)
    write(home / "Pictures.jpg", 300)
    s = summary(tmp_path / "r", store, {**os.environ, "HOME": str(home)})
    personal = {g["group"]: g for g in s["groups"]}["personal"]
    assert personal["count"] == 2
    assert personal["bytes"] == own(
        home / "Pictures", home / "Pictures" / "a.jpg", home / "Pictures.jpg"
    )
