"""Loading a plan file: trusted file, exact bytes, strict JSON, exact structure, digest."""

from __future__ import annotations

import base64
import contextlib
import copy
import hashlib
import json
import os
import signal
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.errors import (
    HygieneError,
    PlanDigestMismatch,
    PlanMalformed,
    PlanUnreadable,
    PlanUntrusted,
)
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.plan.reader import (
    MAX_CANDIDATES,
    MAX_PLAN_BYTES,
    LoadedPlan,
    load_plan,
    validate_plan,
)
from hygiene_nb.plan.schema import plan_digest
from hygiene_nb.store import Store
from tests.executor.helpers import snapshot
from tests.helpers import write

Plan = dict[str, Any]
BAD_NAME = b"n-\xff"


@pytest.fixture
def made(tmp_path: Path, store: Path) -> tuple[Path, Plan]:
    """A real plan: a directory, a file, a non-UTF-8 name, an exclusion and a fold."""
    root = tmp_path / "r"
    write(root / "web" / "node_modules" / "pkg" / "index.js", 3000)
    write(root / "web" / "node_modules" / "pkg" / "dist" / "bundle.js", 500)
    write(root / "web" / "app.log", 40)
    write(root / "web" / "server.pem", 5)
    write(Path(os.fsdecode(os.fsencode(root / "bad") + b"/" + BAD_NAME)), 9)
    api.scan_root(root, store=store)
    web = root / "web"
    api.annotate(
        [
            str(web / "node_modules"),
            str(web / "node_modules" / "pkg" / "dist"),
            str(web / "app.log"),
            str(web / "server.pem"),
            os.fsencode(root / "bad") + b"/" + BAD_NAME,
        ],
        store=store,
        decision="delete",
    )
    result = api.make_plan(root, store=store)
    return Path(result.plan_path), result.plan


def save(path: Path, data: bytes, mode: int = 0o600) -> Path:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.chmod(path, mode)
    return path


def dump(plan: Plan, *, redigest: bool = True) -> bytes:
    """The plan as the producer writes it, digest recomputed (when it still can be)."""
    plan = copy.deepcopy(plan)
    if redigest:
        # NaN or a lone surrogate cannot be digested: the parser must refuse them before that.
        with contextlib.suppress(ValueError, UnicodeEncodeError):
            plan["plan_digest"] = plan_digest(plan)
    return json.dumps(plan, indent=2).encode()


def cand(plan: Plan, kind: str, b64: bool = False) -> dict[str, Any]:
    return next(c for c in plan["candidates"] if c["kind"] == kind and ("path_b64" in c) == b64)


def code_of(path: Path) -> str:
    with pytest.raises(HygieneError) as info:
        load_plan(path)
    return info.value.code


def refused_by_execute(path: Path, tmp_path: Path) -> HygieneError:
    """Execute ``path`` fully confirmed: the error it is refused with (nothing under
    ``tmp_path``, the root and the store among it, changed)."""
    before = snapshot(tmp_path)
    confirm = Confirmation("plan-20260101T000000Z-00000000", "sha256:" + "0" * 64, "quarantine")
    with pytest.raises(HygieneError) as info:
        execute_plan(path, store=Store(tmp_path / "store"), confirm=confirm)
    assert snapshot(tmp_path) == before
    return info.value


# -- a real plan -------------------------------------------------------------------------------


def test_a_real_plan_loads_and_round_trips(made: tuple[Path, Plan]) -> None:
    path, plan = made
    loaded = load_plan(path)
    assert isinstance(loaded, LoadedPlan)
    assert loaded.plan == plan == json.loads(path.read_bytes())
    assert loaded.raw == path.read_bytes()
    assert loaded.path == path
    assert {c["kind"] for c in plan["candidates"]} == {"file", "dir"}
    assert plan["excluded"] and plan["folded"]
    raw_name = base64.b64decode(cand(plan, "file", b64=True)["path_b64"])
    assert raw_name.endswith(b"/bad/" + BAD_NAME)
    validate_plan(loaded.plan)


def test_file_sha256_is_the_sha256_of_the_exact_file_bytes(made: tuple[Path, Plan]) -> None:
    path, _ = made
    assert load_plan(path).file_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_plan_in_canonical_or_reindented_form_still_loads(
    made: tuple[Path, Plan], tmp_path: Path
) -> None:
    _, plan = made
    compact = save(tmp_path / "compact.json", json.dumps(plan, separators=(",", ":")).encode())
    loaded = load_plan(compact)
    assert loaded.plan == plan
    assert loaded.file_sha256 == hashlib.sha256(compact.read_bytes()).hexdigest()


def test_a_group_readable_plan_is_accepted(made: tuple[Path, Plan]) -> None:
    path, plan = made
    path.chmod(0o640)
    assert load_plan(path).plan == plan


# -- the file ----------------------------------------------------------------------------------


@pytest.fixture
def alarm() -> Iterator[None]:
    """Fail instead of hanging: a fifo must never block the loader."""

    def fire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError("load_plan blocked")

    previous = signal.signal(signal.SIGALRM, fire)
    signal.alarm(5)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_a_symlinked_plan_is_untrusted(made: tuple[Path, Plan], tmp_path: Path) -> None:
    path, _ = made
    link = tmp_path / "link.json"
    link.symlink_to(path)
    assert code_of(link) == "plan-untrusted"


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666, 0o622])
def test_a_plan_writable_by_group_or_others_is_untrusted(
    made: tuple[Path, Plan], mode: int
) -> None:
    path, _ = made
    path.chmod(mode)
    with pytest.raises(PlanUntrusted, match="chmod 600"):
        load_plan(path)


@pytest.mark.usefixtures("alarm")
def test_a_fifo_is_untrusted_and_never_blocks(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo, 0o600)
    assert code_of(fifo) == "plan-untrusted"


@pytest.mark.usefixtures("alarm")
def test_a_directory_or_device_is_untrusted(tmp_path: Path) -> None:
    assert code_of(tmp_path) == "plan-untrusted"
    assert code_of(Path("/dev/null")) == "plan-untrusted"


def test_a_missing_plan_or_a_name_with_nul_is_unreadable(tmp_path: Path) -> None:
    assert code_of(tmp_path / "nope.json") == "plan-unreadable"
    assert code_of(tmp_path / "a\x00b.json") == "plan-unreadable"


def test_a_plan_larger_than_the_cap_is_malformed_without_reading_it(tmp_path: Path) -> None:
    big = save(tmp_path / "big.json", b"")
    os.truncate(big, MAX_PLAN_BYTES + 1)  # sparse: nothing is written, nothing must be read
    with pytest.raises(PlanMalformed, match="larger than"):
        load_plan(big)


def test_a_link_swapped_for_a_file_between_look_and_open_is_untrusted(
    made: tuple[Path, Plan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The name was a symlink when looked at and a regular file when opened: still refused."""
    link = tmp_path / "link.json"
    link.symlink_to(made[0])
    ours = save(tmp_path / "ours.json", made[0].read_bytes())  # trusted: ours, 0600
    real_open = os.open

    def swap_then_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        os.rename(ours, link)  # the file takes the link's name
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", swap_then_open)
    with pytest.raises(PlanUntrusted, match="symlink"):
        load_plan(link)
    assert stat.S_ISREG(os.lstat(link).st_mode)  # what it opened was the file, and refused


def test_a_plan_that_fails_to_read_is_unreadable(tmp_path: Path) -> None:
    # A regular file of ours, mode 0600, whose first read fails: the kernel answers EIO for
    # the unmapped page 0 of this process's memory.
    assert code_of(Path("/proc/self/mem")) == "plan-unreadable"
    assert refused_by_execute(Path("/proc/self/mem"), tmp_path).code == "plan-unreadable"


def test_a_plan_that_outgrows_the_cap_while_read_is_malformed(tmp_path: Path) -> None:
    # A regular file of ours whose size says 0 and which reads as far more than the cap (8
    # bytes per page of the address space): what is read counts, not what fstat said.
    assert os.stat("/proc/self/pagemap").st_size < MAX_PLAN_BYTES
    with pytest.raises(PlanMalformed, match="larger than") as info:
        load_plan("/proc/self/pagemap")
    assert info.value.code == "plan-malformed"


def test_refusal_exit_codes_follow_the_contract() -> None:
    assert PlanMalformed("x").exit_code == 2
    assert PlanUnreadable("x").exit_code == 2
    assert PlanUntrusted("x").exit_code == 3
    assert PlanDigestMismatch("x").exit_code == 3


# -- strict JSON -------------------------------------------------------------------------------


def _dup_key(raw: bytes) -> bytes:
    return raw.replace(b'{\n  "schema"', b'{\n  "root": {"path": "/"},\n  "schema"', 1)


def _literal(field: bytes, literal: bytes) -> Callable[[bytes], bytes]:
    def edit(raw: bytes) -> bytes:
        start = raw.index(field) + len(field)
        end = raw.index(b",", start)
        return raw[:start] + literal + raw[end:]

    return edit


def _in_string(raw: bytes, junk: bytes) -> bytes:
    at = raw.index(b'"authority": "') + len(b'"authority": "')
    return raw[:at] + junk + raw[at:]


RAW_CASES: dict[str, tuple[Callable[[bytes], bytes], str]] = {
    "duplicate-key": (_dup_key, "appears twice"),
    "nan": (_literal(b'"ttl_seconds": ', b"NaN"), "NaN"),
    "infinity": (_literal(b'"ttl_seconds": ', b"Infinity"), "Infinity"),
    "minus-infinity": (_literal(b'"ttl_seconds": ', b"-Infinity"), "Infinity"),
    "float-overflow": (_literal(b'"ttl_seconds": ', b"1e999"), "out of range"),
    "huge-int-literal": (_literal(b'"ttl_seconds": ', b"9" * 5000), "more than 20 digits"),
    "21-digit-int": (_literal(b'"ttl_seconds": ', b"1" + b"0" * 20), "more than 20 digits"),
    "nul-escape": (lambda r: _in_string(r, b"\\u0000"), "NUL"),
    "lone-surrogate": (lambda r: _in_string(r, b"\\ud800"), "lone surrogate"),
    "invalid-utf8": (lambda r: _in_string(r, b"\xff"), "not UTF-8"),
    "cesu-surrogate": (lambda r: _in_string(r, b"\xed\xa0\x80"), "not UTF-8"),
    "utf8-bom": (lambda r: b"\xef\xbb\xbf" + r, "not JSON"),
    "empty": (lambda r: b"", "empty"),
    "whitespace-only": (lambda r: b" \n\t", "empty"),
    "not-json": (lambda r: b"hello, plan", "not JSON"),
    "truncated": (lambda r: r[: len(r) // 2], "not JSON"),
    "trailing-garbage": (lambda r: r + b"{}", "not JSON"),
    "top-level-array": (lambda r: b"[]", "must be a JSON object"),
    "depth-bomb": (lambda r: b"[" * 100_000 + b"]" * 100_000, "nests deeper"),
    "depth-13": (lambda r: b"[" * 13 + b"]" * 13, "nests deeper"),
    "deep-in-a-field": (
        lambda r: r.replace(b'"note": null', b'"note": ' + b"[" * 500 + b"]" * 500, 1),
        "nests deeper",
    ),
}


@pytest.mark.parametrize("case", sorted(RAW_CASES))
def test_byte_level_defects_are_malformed(
    made: tuple[Path, Plan], tmp_path: Path, case: str
) -> None:
    edit, says = RAW_CASES[case]
    path = save(tmp_path / "bad.json", edit(made[0].read_bytes()))
    with pytest.raises(PlanMalformed) as info:
        load_plan(path)
    assert info.value.code == "plan-malformed"
    assert says in info.value.message
    assert info.value.message.endswith("export a new plan with `hygiene-nb plan ROOT`.")
    assert refused_by_execute(path, tmp_path).code == "plan-malformed"


# -- structure ---------------------------------------------------------------------------------

Edit = Callable[[Plan], None]


def _set(*keys: Any, value: Any) -> Edit:
    def edit(plan: Plan) -> None:
        target: Any = plan
        for key in keys[:-1]:
            target = target[key] if not callable(key) else key(plan)
        target[keys[-1]] = value

    return edit


def _dir(plan: Plan) -> dict[str, Any]:
    return cand(plan, "dir")


def _file(plan: Plan) -> dict[str, Any]:
    return cand(plan, "file")


def _b64(plan: Plan) -> dict[str, Any]:
    return cand(plan, "file", b64=True)


def _root(plan: Plan) -> str:
    return str(plan["root"]["path"])


def _cand_path(fn: Callable[[str], str]) -> Edit:
    def edit(plan: Plan) -> None:
        _file(plan)["path"] = fn(_root(plan))

    return edit


def _add_candidate(make: Callable[[Plan], dict[str, Any]]) -> Edit:
    def edit(plan: Plan) -> None:
        plan["candidates"].append(make(plan))
        plan["summary"]["candidates"] += 1

    return edit


def _nested(plan: Plan) -> dict[str, Any]:
    inner = copy.deepcopy(_file(plan))
    inner["path"] = _dir(plan)["path"] + "/pkg/index.js"
    return inner


def _b64_of(raw: Callable[[Plan], bytes]) -> Edit:
    def edit(plan: Plan) -> None:
        _b64(plan)["path_b64"] = base64.b64encode(raw(plan)).decode()

    return edit


def _del(getter: Callable[[Plan], dict[str, Any]], key: str) -> Edit:
    return lambda plan: getter(plan).pop(key) and None


def _workspace(plan: Plan, **changes: Any) -> dict[str, Any]:
    """A reference_check record as the planner writes one, with ``changes``."""
    return {
        "workspace": _root(plan),
        "complete": True,
        "files_seen": 3,
        "text_files_read": 2,
        "text_bytes_read": 100,
        "binary_files_skipped": 0,
        "reason": "",
        **changes,
    }


def _only_under_a_backslash_root(plan: Plan) -> None:
    """Root ``.../bad/n-\\xff`` in text (a real backslash), one candidate below the real byte.

    Its text lies inside the root's, its bytes (``n-`` and byte 0xff) do not: the root's text
    names the bytes it encodes, a backslash and ``xff``.
    """
    inner = _b64(plan)
    raw = base64.b64decode(inner["path_b64"]) + b"/x"
    inner.update(path=inner["path"] + "/x", path_b64=base64.b64encode(raw).decode())
    plan["root"]["path"] = inner["path"].rsplit("/", 1)[0]
    plan.update(candidates=[inner], folded=[], excluded=[])
    plan["summary"].update(candidates=1, folded=0, excluded=0)


STRUCT_CASES: dict[str, tuple[Edit, str]] = {
    "unknown-schema": (_set("schema", value="hygiene-nb/plan@2"), "unknown schema"),
    "schema-not-a-string": (_set("schema", value=1), "unknown schema"),
    "unknown-top-key": (_set("extra", value=1), "unknown key 'extra'"),
    "missing-top-key": (lambda p: p.pop("summary") and None, "lacks the key 'summary'"),
    "plan-id-shape": (_set("plan_id", value="plan-1"), "plan_id"),
    "plan-id-unicode-digits": (
        _set("plan_id", value="plan-\u0662\u0660\u0662\u06660101T000000Z-0123abcd"),
        "plan_id",
    ),
    "naive-timestamp": (_set("created_at", value="2026-01-01T00:00:00"), "timezone"),
    "not-a-timestamp": (_set("expires_at", value="tomorrow"), "ISO 8601"),
    "expiry-not-ttl": (_set("ttl_seconds", value=60), "ttl_seconds"),
    "ttl-zero": (_set("ttl_seconds", value=0), "ttl_seconds"),
    "ttl-huge": (_set("ttl_seconds", value=2**62), "ttl_seconds"),
    "root-relative": (_set("root", "path", value="r"), "root.path must be an absolute"),
    "root-not-normalized": (_set("root", "path", value="/tmp/./r"), "normalized"),
    "root-dev-negative": (_set("root", "dev", value=-1), "root.dev"),
    "root-inode-2-64": (_set("root", "inode", value=2**64), "root.inode"),
    "root-null-byte": (_set("root", "path", value="/tmp/r\x00x"), "NUL"),
    "wrong-type-candidates": (_set("candidates", value={}), "candidates must be a list"),
    "wrong-type-candidate": (_set("candidates", 0, value="x"), "candidates[0] must be an object"),
    "size-string": (lambda p: _file(p).update(size="9"), "size must be a non-negative integer"),
    "size-negative": (lambda p: _file(p).update(size=-1), "size must be a non-negative integer"),
    "size-2-63": (lambda p: _file(p).update(size=2**63), "below 2**63"),
    "size-2-70": (lambda p: _file(p).update(size=2**70), "more than 20 digits"),
    "size-bool": (lambda p: _file(p).update(size=True), "size must be a non-negative integer"),
    "size-float": (lambda p: _file(p).update(size=9.0), "size must be a non-negative integer"),
    "inode-2-63": (lambda p: _file(p).update(inode=2**63), "inode"),
    "missing-inode": (_del(_file, "inode"), "lacks the key 'inode'"),
    "unknown-candidate-key": (lambda p: _file(p).update(extra=1), "unknown key 'extra'"),
    "relative-path": (_cand_path(lambda r: "web/app.log"), "absolute, normalized"),
    "dotdot-component": (_cand_path(lambda r: r + "/web/../../etc"), "absolute, normalized"),
    "dot-component": (_cand_path(lambda r: r + "/./web/app.log"), "absolute, normalized"),
    "double-slash": (_cand_path(lambda r: r + "//web/app.log"), "absolute, normalized"),
    "trailing-slash": (_cand_path(lambda r: r + "/web/"), "absolute, normalized"),
    "outside-root": (_cand_path(lambda r: "/etc/passwd"), "strictly inside root.path"),
    "sibling-prefix": (_cand_path(lambda r: r + "2/x"), "strictly inside root.path"),
    "equal-to-root": (_cand_path(lambda r: r), "strictly inside root.path"),
    "slash": (_cand_path(lambda r: "/"), "strictly inside root.path"),
    "nul-in-path": (_cand_path(lambda r: r + "/a\x00b"), "NUL"),
    "lone-surrogate-in-path": (_cand_path(lambda r: r + "/a\udcff"), "lone surrogate"),
    "path-too-long": (_cand_path(lambda r: r + "/" + "a" * 70_000), "longer than"),
    "note-too-long": (lambda p: _file(p).update(note="n" * 17_000), "note is longer than"),
    "kind-symlink": (lambda p: _file(p).update(kind="symlink"), 'kind must be "file" or "dir"'),
    "kind-other": (lambda p: _file(p).update(kind="other"), 'kind must be "file" or "dir"'),
    "nested": (_add_candidate(_nested), "lies inside"),
    "duplicate": (_add_candidate(lambda p: copy.deepcopy(_file(p))), "listed twice"),
    "bad-base64": (lambda p: _b64(p).update(path_b64="!!!not base64"), "must be base64"),
    "non-ascii-base64": (lambda p: _b64(p).update(path_b64="é"), "must be base64"),
    "non-canonical-base64": (
        lambda p: _b64(p).update(path_b64=_b64(p)["path_b64"][:-2] + "9="),
        "canonical base64",
    ),
    "base64-elsewhere": (_b64_of(lambda p: b"/etc/passwd\xff"), "display form"),
    "base64-of-utf8-path": (_b64_of(lambda p: _b64(p)["path"].encode()), "display form"),
    "file-with-fingerprint": (
        lambda p: _file(p).update(fingerprint=_dir(p)["fingerprint"]),
        "a file has null",
    ),
    "dir-without-fingerprint": (lambda p: _dir(p).update(fingerprint=None), "must be an object"),
    "dir-null-tree-bytes": (lambda p: _dir(p).update(tree_bytes=None), "tree_bytes"),
    "fingerprint-bad-sha": (
        lambda p: _dir(p)["fingerprint"].update(sha256="sha256:XYZ"),
        "fingerprint.sha256",
    ),
    "fingerprint-extra-key": (
        lambda p: _dir(p)["fingerprint"].update(extra=1),
        "unknown key 'extra'",
    ),
    "confidence-above-one": (lambda p: _file(p).update(confidence=1.5), "confidence"),
    "confidence-string": (lambda p: _file(p).update(confidence="0.5"), "confidence"),
    "confidence-nan": (lambda p: _file(p).update(confidence=float("nan")), "NaN"),
    "confidence-inf": (lambda p: _file(p).update(confidence=float("inf")), "Infinity"),
    "risk-unknown-level": (lambda p: _file(p).update(risk="fine"), "risk must be one of"),
    "rule-null": (lambda p: _file(p).update(rule=None), "rule must be a string"),
    "note-number": (lambda p: _file(p).update(note=3), "note must be a string"),
    "excluded-unknown-code": (_set("excluded", 0, "code", value="whatever"), "code must be"),
    "excluded-not-list": (_set("excluded", value={}), "excluded must be a list"),
    "folded-into-nothing": (_set("folded", 0, "into", value="/nowhere"), "into must be the path"),
    "folded-outside-into": (
        lambda p: p["folded"][0].update(path=_root(p) + "/web/app.log.d"),
        "strictly inside",
    ),
    "summary-count-wrong": (_set("summary", "candidates", value=99), "summary.candidates"),
    "summary-negative": (_set("summary", "reclaim_bytes", value=-5), "summary.reclaim_bytes"),
    "workspace-complete-not-a-bool": (
        lambda p: p.update(reference_check=[_workspace(p, complete="yes")]),
        "reference_check[0].complete must be true or false",
    ),
    "workspace-relative": (
        lambda p: p.update(reference_check=[_workspace(p, workspace="web")]),
        "reference_check[0].workspace must be an absolute",
    ),
    "bytes-outside-a-root-named-with-a-backslash": (
        _only_under_a_backslash_root,
        "candidates[0].path_b64 must lie strictly inside root.path",
    ),
}


@pytest.mark.parametrize("case", sorted(STRUCT_CASES))
def test_structural_defects_are_malformed_even_with_a_fresh_digest(
    made: tuple[Path, Plan], tmp_path: Path, case: str
) -> None:
    edit, says = STRUCT_CASES[case]
    plan = copy.deepcopy(made[1])
    edit(plan)
    path = save(tmp_path / "bad.json", dump(plan))
    with pytest.raises(PlanMalformed) as info:
        load_plan(path)
    assert info.value.code == "plan-malformed", info.value.message
    assert says in info.value.message, info.value.message
    assert info.value.message.endswith("export a new plan with `hygiene-nb plan ROOT`.")
    assert refused_by_execute(path, tmp_path).code == "plan-malformed"


def test_a_digest_of_the_wrong_shape_is_malformed(made: tuple[Path, Plan], tmp_path: Path) -> None:
    plan = {**made[1], "plan_digest": "md5:abc"}
    path = save(tmp_path / "bad.json", dump(plan, redigest=False))
    with pytest.raises(PlanMalformed, match="plan_digest must be sha256"):
        load_plan(path)


def test_validate_plan_refuses_the_same_defects_without_a_file(made: tuple[Path, Plan]) -> None:
    plan = copy.deepcopy(made[1])
    _file(plan)["path"] = "/"
    with pytest.raises(PlanMalformed, match=r"^the plan is malformed: candidates\[\d\]\.path"):
        validate_plan(plan)
    with pytest.raises(PlanMalformed, match="NUL"):
        validate_plan({**made[1], "store": "/x\x00"})


def test_validate_plan_refuses_a_key_that_is_not_a_string(made: tuple[Path, Plan]) -> None:
    # a document built in Python, not read from JSON: no check expects it, the net refuses it
    odd: dict[Any, Any] = {**made[1], 1: "one"}
    with pytest.raises(PlanMalformed, match=r"unexpected shape \(TypeError\)"):
        validate_plan(odd)


def test_whatever_a_check_misses_is_malformed_never_a_traceback(
    made: tuple[Path, Plan], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every JSON shape meets a check first (the fuzz test says so); should one not, the
    error it raises is still a refusal with the plan's code."""

    def missed(plan: Any) -> str:
        raise KeyError("a shape no check expected")

    monkeypatch.setattr("hygiene_nb.plan.reader.plan_digest", missed)
    with pytest.raises(PlanMalformed, match=r"unexpected shape \(KeyError\)") as info:
        load_plan(made[0])
    assert info.value.code == "plan-malformed"
    assert refused_by_execute(made[0], tmp_path).code == "plan-malformed"


def test_more_candidates_than_the_cap_are_malformed(
    made: tuple[Path, Plan], tmp_path: Path
) -> None:
    plan = copy.deepcopy(made[1])
    plan["candidates"] = []
    head = json.dumps(plan, separators=(",", ":")).encode()
    many = b"[" + b",".join([b"null"] * (MAX_CANDIDATES + 1)) + b"]"  # 50 MB: under the cap
    path = save(tmp_path / "many.json", head.replace(b'"candidates":[]', b'"candidates":' + many))
    refused = refused_by_execute(path, tmp_path)  # read once: it takes seconds
    assert refused.code == "plan-malformed"
    assert f"more than {MAX_CANDIDATES} candidates" in refused.message


def test_a_plan_without_a_reference_check_record_loads(
    made: tuple[Path, Plan], tmp_path: Path
) -> None:
    # the key is optional: plans written before the reference check have none
    plan = copy.deepcopy(made[1])
    del plan["reference_check"]
    loaded = load_plan(save(tmp_path / "older.json", dump(plan)))
    assert "reference_check" not in loaded.plan and loaded.parsed.plan_id == plan["plan_id"]


def test_a_candidate_with_negative_mtime_or_int64_inode_is_accepted(
    made: tuple[Path, Plan], tmp_path: Path
) -> None:
    # Snapshots store mtime_ns, inode and dev as int64: before 1970 or above 2**63 is negative.
    plan = copy.deepcopy(made[1])
    _file(plan).update(mtime_ns=-(10**18), inode=-2, dev=-(2**63))
    assert load_plan(save(tmp_path / "p.json", dump(plan))).plan["candidates"] == plan["candidates"]


# -- digest ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tamper",
    [
        lambda p: _file(p).update(size=_file(p)["size"] + 1),
        lambda p: _dir(p).update(inode=1),
        lambda p: p["root"].update(path="/"),
        lambda p: p["excluded"].pop() and p["summary"].update(excluded=len(p["excluded"])),
        lambda p: _file(p).update(note="fine to delete"),
    ],
)
def test_tampered_content_with_the_old_digest_is_a_digest_mismatch(
    made: tuple[Path, Plan], tmp_path: Path, tamper: Edit
) -> None:
    plan = copy.deepcopy(made[1])
    tamper(plan)
    path = save(tmp_path / "tampered.json", dump(plan, redigest=False))
    with pytest.raises(PlanDigestMismatch) as info:
        load_plan(path)
    assert info.value.code == "plan-digest-mismatch"
    assert info.value.exit_code == 3


# -- fuzz --------------------------------------------------------------------------------------

JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
    | st.sampled_from(["/", "..", "/etc", "sha256:" + "0" * 64, "file", "dir", "a\x00b"])
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
FRAGMENTS = (
    st.sampled_from(
        [
            b"NaN",
            b"Infinity",
            b"-Infinity",
            b"1e999",
            b'"\\u0000"',
            b'"\\ud800"',
            b"[",
            b"]",
            b"{",
            b"}",
            b",",
            b":",
            b'"',
            b"\\",
            b"\xff",
            b"\xed\xa0\x80",
            b"null",
            b"9" * 30,
            b'"path": "/"',
            b'"schema": "x",',
            b"[" * 200,
            b"\x00",
            b"-0",
            b"1e-999",
        ]
    )
    | st.binary(max_size=16)
    | JSON_VALUES.map(lambda v: json.dumps(v).encode())
)


def _leaf_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if prefix:
        yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _leaf_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for i, child in enumerate(value):
            yield from _leaf_paths(child, (*prefix, i))


def _replace(plan: Plan, where: tuple[Any, ...], value: Any, redigest: bool) -> bytes:
    plan = copy.deepcopy(plan)
    target: Any = plan
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    return dump(plan, redigest=redigest)


def mutated(base: bytes, plan: Plan) -> st.SearchStrategy[bytes]:
    size = len(base)

    def flip(edits: list[tuple[int, int]]) -> bytes:
        data = bytearray(base)
        for at, byte in edits:
            data[at] = byte
        return bytes(data)

    positions = st.integers(0, size)
    return st.one_of(
        st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 255)), min_size=1,
                 max_size=8).map(flip),
        positions.map(lambda k: base[:k]),
        st.tuples(positions, FRAGMENTS).map(lambda t: base[: t[0]] + t[1] + base[t[0] :]),
        st.tuples(positions, positions).map(lambda t: base[: min(t)] + base[max(t) :]),
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        st.tuples(st.sampled_from(list(_leaf_paths(plan))), JSON_VALUES, st.booleans()).map(
            lambda t: _replace(plan, *t)
        ),
    )  # fmt: skip


@pytest.fixture(scope="module")
def fuzz_base(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, Plan]:
    tmp = tmp_path_factory.mktemp("fuzz")
    store = tmp / "store"
    root = tmp / "r"
    write(root / "dir" / "x" / "f", 10)
    write(root / "file.log", 3)
    write(Path(os.fsdecode(os.fsencode(root) + b"/" + BAD_NAME)), 4)
    api.scan_root(root, store=store)
    api.annotate(
        [
            str(root / "dir"),
            str(root / "dir" / "x"),
            str(root / "file.log"),
            os.fsencode(root) + b"/" + BAD_NAME,
            str(root / "gone"),
        ],
        store=store,
        decision="delete",
    )
    result = api.make_plan(root, store=store)
    return Path(result.plan_path).read_bytes(), result.plan


@settings(
    max_examples=10_000,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                           HealthCheck.data_too_large],
)  # fmt: skip
@given(data=st.data())
def test_any_mutation_either_loads_or_raises_a_hygiene_error(
    fuzz_base: tuple[bytes, Plan], tmp_path: Path, data: st.DataObject
) -> None:
    base, plan = fuzz_base
    blob = data.draw(mutated(base, plan))
    path = save(tmp_path / "fuzzed.json", blob)
    try:
        loaded = load_plan(path)
    except HygieneError as exc:
        event(exc.code)
        assert exc.code in {"plan-malformed", "plan-digest-mismatch"}, exc.code
        assert exc.message.endswith(".")
        assert "unexpected shape" not in exc.message, exc.message  # a check, not the net
        return
    event("loaded")
    assert loaded.raw == blob
    assert loaded.plan["plan_digest"] == plan_digest(loaded.plan)
    assert stat.S_ISREG(os.stat(path).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a file to another user")
def test_a_plan_owned_by_someone_else_is_untrusted(made: tuple[Path, Plan]) -> None:
    path, _ = made
    os.chown(path, 54321, -1)
    with pytest.raises(PlanUntrusted, match="belongs to uid 54321"):
        load_plan(path)


def test_the_file_is_opened_once_without_following_links(
    made: tuple[Path, Plan], monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[int] = []
    real_open = os.open

    def spy(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
        opened.append(flags)
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy)
    load_plan(made[0])
    assert len(opened) == 1
    assert opened[0] & os.O_NOFOLLOW and opened[0] & os.O_NONBLOCK
    assert opened[0] & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) == 0
