"""Read a plan file once and strictly, and refuse anything but what ``assemble_plan`` produces.

A trusted file (ours, not a link, not writable by others), its exact bytes hashed, strict JSON,
exactly the plan@1 structure, and a digest that matches.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import itertools
import json
import math
import os
import re
import stat
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from hygiene_nb.classify.rules import Risk
from hygiene_nb.errors import PlanDigestMismatch, PlanMalformed, PlanUnreadable, PlanUntrusted
from hygiene_nb.plan.records import Plan
from hygiene_nb.plan.schema import EXCLUSIONS, PLAN_SCHEMA, plan_digest

__all__ = [
    "MAX_CANDIDATES",
    "MAX_DEPTH",
    "MAX_PLAN_BYTES",
    "LoadedPlan",
    "load_plan",
    "validate_plan",
]

MAX_PLAN_BYTES = 256 * 1024 * 1024
MAX_CANDIDATES = 10_000_000
MAX_DEPTH = 12  # nested objects and arrays; a produced plan uses 4
_MAX_INT_DIGITS = 20
_MAX_STRING = 16 * 1024  # UTF-8 bytes
_MAX_PATH = 64 * 1024
_MAX_B64 = 4 * ((_MAX_PATH + 2) // 3)
_INT63 = 2**63
_INT64 = 2**64
_READ_CHUNK = 1024 * 1024

_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_NEXT_STEP = "export a new plan with `hygiene-nb plan ROOT`"
_SAFETY_NET = (
    TypeError,
    ValueError,
    KeyError,
    IndexError,
    AttributeError,
    RecursionError,
    OverflowError,
)
_BAD_CHAR = re.compile("[\x00\ud800-\udfff]")
_PLAN_ID = re.compile(r"plan-[0-9]{8}T[0-9]{6}Z-[0-9a-f]{8}")
_SHA256 = re.compile(r"sha256:[0-9a-f]{64}")

_TOP_KEYS = frozenset(
    {
        "schema",
        "plan_id",
        "created_at",
        "expires_at",
        "ttl_seconds",
        "store",
        "root",
        "snapshot",
        "authority",
        "candidates",
        "excluded",
        "folded",
        "summary",
        "plan_digest",
    }
)
_ROOT_KEYS = frozenset({"path", "dev", "inode"})
_SNAPSHOT_KEYS = frozenset({"scan_id", "scanned_at", "host"})
_CANDIDATE_KEYS = frozenset(
    {
        "path",
        "kind",
        "size",
        "alloc",
        "mtime_ns",
        "ctime_ns",
        "inode",
        "dev",
        "nlink",
        "tree_bytes",
        "tree_alloc",
        "tree_files",
        "risk",
        "rule",
        "claim",
        "note",
        "decided_by",
        "decided_at",
        "confidence",
        "fingerprint",
    }
)
_FINGERPRINT_KEYS = frozenset({"count", "bytes", "newest_mtime_ns", "sha256"})
_EXCLUDED_KEYS = frozenset({"path", "code", "message"})
_FOLDED_KEYS = frozenset({"path", "into"})
_WORKSPACE_KEYS = frozenset(
    {
        "workspace",
        "complete",
        "files_seen",
        "text_files_read",
        "text_bytes_read",
        "binary_files_skipped",
        "reason",
    }
)
_SUMMARY_KEYS = frozenset(
    {
        "candidates",
        "delete_count",
        "keep_count",
        "unsure_count",
        "unreviewed_count",
        "excluded",
        "folded",
        "reclaim_bytes",
        "reclaim_alloc",
        "keep_bytes",
    }
)
_RAW_KEY = frozenset({"path_b64"})
_RISKS = frozenset(r.value for r in Risk)
# Codes older plans may list as excluded (informational only): "vanished" is "gone" now.
_FORMER_EXCLUSIONS = frozenset({"vanished"})


@dataclass(frozen=True)
class LoadedPlan:
    """A plan file read once: its exact bytes, their sha256 (hex) and the validated document.

    Attributes:
        raw: the exact bytes read from the file.
        file_sha256: hex sha256 of ``raw``.
        plan: the parsed, validated plan@1 document (digest checked).
        path: the plan file's absolute path (not resolved).
        parsed: the same plan as typed records, which the executor acts on.
    """

    raw: bytes
    file_sha256: str
    plan: dict[str, Any]
    path: Path
    parsed: Plan


class _Bad(Exception):
    """Internal: what is wrong with the document, before it becomes a ``PlanMalformed``."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


# -- the file -----------------------------------------------------------------------------------


def load_plan(path: os.PathLike[str] | str) -> LoadedPlan:
    """Read a plan file once, check it can be trusted, parse it strictly and validate it.

    Args:
        path: the plan file (a symlink is refused, never followed).

    Returns:
        The exact bytes, their sha256 and the validated plan.

    Raises:
        PlanUnreadable: it cannot be opened or read.
        PlanUntrusted: it is a symlink, not a regular file, not owned by you, or writable by
            group or others.
        PlanMalformed: it is too large, not strict UTF-8 JSON, or not exactly a plan@1 document.
        PlanDigestMismatch: its content does not match its ``plan_digest``.
    """
    where = Path(path).absolute()
    raw = _read_trusted(where)
    try:
        plan = _parse(raw)
        _check_plan(plan)
        expected = plan_digest(plan)
    except _Bad as bad:
        raise PlanMalformed(_malformed(bad.detail, where)) from None
    except _SAFETY_NET as exc:  # a check missed a shape: still refuse, never a traceback
        raise PlanMalformed(_malformed(_unexpected(exc), where)) from None
    if plan["plan_digest"] != expected:
        raise PlanDigestMismatch(
            f"plan {where} does not match its plan_digest: it was changed after it was issued; "
            f"never edit a plan: {_NEXT_STEP}."
        )
    return LoadedPlan(raw, hashlib.sha256(raw).hexdigest(), plan, where, Plan.from_json(plan))


def _unexpected(exc: BaseException) -> str:
    return f"it has an unexpected shape ({type(exc).__name__})"


def _malformed(detail: str, where: Path | None) -> str:
    subject = f"plan {where}" if where is not None else "the plan"
    return f"{subject} is malformed: {detail}; {_NEXT_STEP}."


def _read_trusted(path: Path) -> bytes:
    """The bytes of ``path``, read through one descriptor after checking what it is."""
    try:
        before = os.lstat(path)  # so that a fifo or device is never even opened
        if not stat.S_ISLNK(before.st_mode):
            _check_kind(before, path)
        fd = os.open(path, _OPEN_FLAGS)
    except ValueError:  # a NUL byte in the name
        raise PlanUnreadable(
            f"cannot read plan {str(path)!a}: the name contains a NUL byte; "
            "give the path `hygiene-nb plan` printed."
        ) from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _untrusted_link(path) from None
        raise PlanUnreadable(
            f"cannot read plan {path}: {exc.strerror}; give the path `hygiene-nb plan` printed."
        ) from None
    if stat.S_ISLNK(before.st_mode):  # a race replaced the link with a file: still refuse
        os.close(fd)
        raise _untrusted_link(path)
    try:
        st = os.fstat(fd)
        _check_kind(st, path)
        _check_owner(st, path)
        if st.st_size > MAX_PLAN_BYTES:
            raise PlanMalformed(_malformed(_too_large(st.st_size), path))
        return _read_all(fd, path)
    finally:
        os.close(fd)


def _untrusted_link(path: Path) -> PlanUntrusted:
    return PlanUntrusted(
        f"plan {path} is a symlink and hygiene-nb never follows one to a plan; "
        "give the plan file itself, as `hygiene-nb plan` printed it."
    )


def _check_kind(st: os.stat_result, path: Path) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise PlanUntrusted(
            f"plan {path} is not a regular file; give the plan file `hygiene-nb plan` wrote."
        )


def _check_owner(st: os.stat_result, path: Path) -> None:
    if st.st_mode & 0o022:
        raise PlanUntrusted(
            f"plan {path} is writable by group or others (mode {stat.S_IMODE(st.st_mode):04o}), "
            "so someone else may have changed it; check it, run `chmod 600` on it, then retry."
        )
    if st.st_uid != os.geteuid():
        raise PlanUntrusted(
            f"plan {path} belongs to uid {st.st_uid}, not to you (uid {os.geteuid()}); "
            f"{_NEXT_STEP} as yourself."
        )


def _too_large(size: int) -> str:
    return f"it is {size} bytes or more, larger than the {MAX_PLAN_BYTES} a plan may be"


def _read_all(fd: int, path: Path) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while True:
        try:
            chunk = os.read(fd, _READ_CHUNK)
        except OSError as exc:
            raise PlanUnreadable(
                f"cannot read plan {path}: {exc.strerror}; check the disk, then retry."
            ) from None
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_PLAN_BYTES:  # it grew after fstat
            raise PlanMalformed(_malformed(_too_large(total), path))
        chunks.append(chunk)


# -- strict JSON --------------------------------------------------------------------------------


def _parse(raw: bytes) -> Any:
    if not raw.strip():
        raise _Bad("the file is empty")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Bad(f"it is not UTF-8 (invalid byte at offset {exc.start})") from None
    try:
        value = json.loads(
            text,
            object_pairs_hook=_no_duplicate_keys,
            parse_constant=_no_constant,
            parse_int=_bounded_int,
            parse_float=_finite_float,
        )
    except RecursionError:
        raise _Bad(f"it nests deeper than {MAX_DEPTH} levels") from None
    except json.JSONDecodeError as exc:
        raise _Bad(f"it is not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    _check_values(value)
    return value


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:  # pragma: no branch -- a key repeats, so the loop raises
            if key in seen:
                raise _Bad(f"the key {_show(key)} appears twice in one object")
            seen.add(key)
    return obj


def _no_constant(name: str) -> Any:
    raise _Bad(f"it contains {name}, which is not a JSON number")


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > _MAX_INT_DIGITS:
        raise _Bad(f"it contains an integer of more than {_MAX_INT_DIGITS} digits")
    return int(digits)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _Bad(f"the number {text[:40]} is out of range")
    return value


def _check_values(value: Any) -> None:
    """Reject NUL and lone surrogates in any string or key, and nesting deeper than MAX_DEPTH."""
    if not isinstance(value, dict | list):
        if isinstance(value, str):
            _check_chars(value)
        return
    stack: list[tuple[dict[str, Any] | list[Any], int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _Bad(f"it nests deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            for key in item:
                _check_chars(key)
        for child in item.values() if isinstance(item, dict) else item:
            if isinstance(child, str):
                _check_chars(child)
            elif isinstance(child, dict | list):
                stack.append((child, depth + 1))


def _check_chars(text: str) -> None:
    found = _BAD_CHAR.search(text)
    if found is not None:
        what = "a NUL character" if found.group() == "\x00" else "a lone surrogate"
        raise _Bad(f"the string {_show(text)} contains {what}")


def _show(text: str) -> str:
    return ascii(text if len(text) <= 60 else text[:57] + "...")


# -- structure ----------------------------------------------------------------------------------


def validate_plan(plan: Mapping[str, Any]) -> None:
    """Check that ``plan`` is exactly a plan@1 document as ``assemble_plan`` produces it.

    The digest's form is checked, not its value (``load_plan`` recomputes it). Strings must
    already be free of NUL and lone surrogates and nesting bounded; this checks that too.

    Raises:
        PlanMalformed: the message names the first field that is wrong.
    """
    try:
        _check_values(plan)
        _check_plan(plan)
    except _Bad as bad:
        raise PlanMalformed(_malformed(bad.detail, None)) from None
    except _SAFETY_NET as exc:  # a check missed a shape: still refuse, never a traceback
        raise PlanMalformed(_malformed(_unexpected(exc), None)) from None


def _check_plan(plan: Any) -> None:
    if not isinstance(plan, dict):
        raise _Bad("the document must be a JSON object")
    if "schema" in plan and plan["schema"] != PLAN_SCHEMA:
        raise _Bad(f"unknown schema {_show(str(plan['schema']))}, expected {PLAN_SCHEMA}")
    _keys(plan, "the plan", _TOP_KEYS, {"reference_check"})
    if not isinstance(plan["plan_id"], str) or not _PLAN_ID.fullmatch(plan["plan_id"]):
        raise _Bad("plan_id must look like plan-YYYYMMDDTHHMMSSZ-xxxxxxxx")
    created = _timestamp(plan["created_at"], "created_at")
    expires = _timestamp(plan["expires_at"], "expires_at")
    ttl = _int(plan["ttl_seconds"], "ttl_seconds", lo=1)
    delta = expires - created
    if delta.days * 86_400 + delta.seconds != ttl or delta.microseconds:
        raise _Bad("expires_at must be created_at plus ttl_seconds")
    _str(plan["store"], "store", _MAX_PATH)
    _str(plan["authority"], "authority")
    if not isinstance(plan["plan_digest"], str) or not _SHA256.fullmatch(plan["plan_digest"]):
        raise _Bad("plan_digest must be sha256: and 64 lowercase hex digits")
    _check_snapshot(plan["snapshot"])
    root = _check_root(plan["root"])
    dirs = _check_candidates(plan["candidates"], root)
    _check_list(plan["excluded"], "excluded", _check_excluded)
    _check_list(plan["folded"], "folded", lambda item, where: _check_folded(item, where, dirs))
    _check_summary(plan)
    if "reference_check" in plan:
        _check_list(plan["reference_check"], "reference_check", _check_workspace)


def _keys(obj: Any, where: str, required: frozenset[str], optional: Collection[str] = ()) -> None:
    if not isinstance(obj, dict):
        raise _Bad(f"{where} must be an object")
    missing = required - obj.keys()
    if missing:
        raise _Bad(f"{where} lacks the key {_show(min(missing))}")
    extra = obj.keys() - required - set(optional)
    if extra:
        raise _Bad(f"{where} has an unknown key {_show(min(extra))}")


def _int(value: Any, where: str, *, lo: int = 0, hi: int = _INT63) -> int:
    if type(value) is not int or not lo <= value < hi:
        if lo == 0 and hi == _INT63:
            raise _Bad(f"{where} must be a non-negative integer below 2**63")
        raise _Bad(f"{where} must be an integer from {lo} to {hi - 1}")
    return value


def _str(value: Any, where: str, limit: int = _MAX_STRING) -> str:
    if not isinstance(value, str):
        raise _Bad(f"{where} must be a string")
    if len(value) * 4 > limit and len(value.encode("utf-8")) > limit:
        raise _Bad(f"{where} is longer than {limit} bytes")
    return value


def _opt_str(value: Any, where: str) -> str | None:
    return None if value is None else _str(value, where)


def _timestamp(value: Any, where: str) -> datetime:
    text = _str(value, where, 64)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _Bad(f"{where} must be an ISO 8601 timestamp") from None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise _Bad(f"{where} must carry a timezone")
    return moment


def _abs_path(value: Any, where: str) -> str:
    path = _str(value, where, _MAX_PATH)
    if not path.startswith("/") or path.startswith("//") or os.path.normpath(path) != path:
        raise _Bad(f"{where} must be an absolute, normalized path")
    return path  # normalized: it holds no "..", "." or empty component


def _check_snapshot(snapshot: Any) -> None:
    _keys(snapshot, "snapshot", _SNAPSHOT_KEYS)
    for key in sorted(_SNAPSHOT_KEYS):
        _str(snapshot[key], f"snapshot.{key}")


def _check_root(root: Any) -> str:
    _keys(root, "root", _ROOT_KEYS)
    path = _abs_path(root["path"], "root.path")
    _int(root["dev"], "root.dev", hi=_INT64)
    _int(root["inode"], "root.inode", hi=_INT64)
    return path


def _check_list(items: Any, where: str, check: Callable[[Any, str], object]) -> None:
    if not isinstance(items, list):
        raise _Bad(f"{where} must be a list")
    for i, item in enumerate(items):
        check(item, f"{where}[{i}]")


def _check_summary(plan: Mapping[str, Any]) -> None:
    summary = plan["summary"]
    _keys(summary, "summary", _SUMMARY_KEYS)
    for key in sorted(_SUMMARY_KEYS):
        # The producer reports -1 unreviewed when the root itself carries a decision.
        _int(summary[key], f"summary.{key}", lo=-1 if key == "unreviewed_count" else 0)
    for key in ("candidates", "excluded", "folded"):
        if summary[key] != len(plan[key]):
            raise _Bad(f"summary.{key} must be the number of {key} ({len(plan[key])})")


# -- entries ------------------------------------------------------------------------------------


def _check_candidates(cands: Any, root: str) -> set[str]:
    """Check every candidate; return the directory candidates' paths (what may hold folds)."""
    if not isinstance(cands, list):
        raise _Bad("candidates must be a list")
    if len(cands) > MAX_CANDIDATES:
        raise _Bad(f"it has more than {MAX_CANDIDATES} candidates")
    root_raw = root.encode("utf-8")
    raws: list[tuple[bytes, int]] = []
    texts: set[str] = set()
    dirs: set[str] = set()
    for i, cand in enumerate(cands):
        where = f"candidates[{i}]"
        raw = _check_candidate(cand, where, root, root_raw)
        if cand["path"] in texts:
            raise _Bad(f"{where}.path {_show(cand['path'])} is listed twice")
        texts.add(cand["path"])
        raws.append((raw, i))
        if cand["kind"] == "dir":
            dirs.add(cand["path"])
    _check_disjoint(raws)
    return dirs


def _check_disjoint(raws: list[tuple[bytes, int]]) -> None:
    """No candidate lies inside another (by exact bytes).

    No two are the same bytes either: a path's bytes give its text (``path_b64`` must decode
    to it), and the same text twice was refused already.
    """
    # With "/" sorting lowest, everything inside a path comes right after it.
    raws.sort(key=lambda pair: pair[0].replace(b"/", b"\x00"))
    for (prev, i), (cur, j) in itertools.pairwise(raws):
        if cur.startswith(prev + b"/"):
            raise _Bad(f"candidates[{j}] lies inside candidates[{i}]; a plan folds nested ones")


def _check_candidate(cand: Any, where: str, root: str, root_raw: bytes) -> bytes:
    """Check one candidate; return its exact path bytes."""
    _keys(cand, where, _CANDIDATE_KEYS, _RAW_KEY)
    path = _abs_path(cand["path"], f"{where}.path")
    if path == root or not path.startswith(root.rstrip("/") + "/"):
        raise _Bad(f"{where}.path must lie strictly inside root.path")
    raw = path.encode("utf-8")
    if "path_b64" in cand:
        raw = _check_raw_path(cand["path_b64"], f"{where}.path_b64", path)
        _check_raw_inside(raw, f"{where}.path_b64", root_raw)
    kind = cand["kind"]
    if kind not in ("file", "dir"):
        raise _Bad(f'{where}.kind must be "file" or "dir" (plans hold no links or special files)')
    for key in ("size", "alloc", "nlink"):
        _int(cand[key], f"{where}.{key}")
    # int64 as snapshots store them (may be negative)
    for key in ("mtime_ns", "ctime_ns", "inode", "dev"):
        _int(cand[key], f"{where}.{key}", lo=-_INT63)
    _check_tree(cand, where, kind)
    _check_verdict(cand, where)
    return raw


def _check_raw_path(value: Any, where: str, text: str) -> bytes:
    """Decode ``path_b64``: canonical base64 of the exact bytes whose display form is ``text``."""
    encoded = _str(value, where, _MAX_B64)
    try:
        raw = base64.b64decode(encoded, validate=True)
    except ValueError:
        raise _Bad(f"{where} must be base64") from None
    if base64.b64encode(raw).decode("ascii") != encoded:
        raise _Bad(f"{where} must be canonical base64")
    if raw == text.encode("utf-8") or raw.decode("utf-8", "backslashreplace") != text:
        raise _Bad(f"{where} must hold the non-UTF-8 bytes whose display form is the path")
    return raw


def _check_raw_inside(raw: bytes, where: str, root_raw: bytes) -> None:
    r"""The exact bytes lie strictly inside the root's (whose text names the bytes it encodes).

    Their display form is the path, already checked: decoding keeps every ASCII byte (NUL,
    "/" and "." among them) and shows each invalid one as ``\xNN``, so the bytes have the
    text's components: no NUL, and no "..", "." or empty one.
    """
    if raw == root_raw or not raw.startswith(root_raw.rstrip(b"/") + b"/"):
        raise _Bad(f"{where} must lie strictly inside root.path")


def _check_tree(cand: Mapping[str, Any], where: str, kind: str) -> None:
    tree_keys = ("tree_bytes", "tree_alloc", "tree_files")
    if kind == "file":
        if any(cand[key] is not None for key in (*tree_keys, "fingerprint")):
            raise _Bad(f"{where}: a file has null tree_bytes, tree_alloc, tree_files, fingerprint")
        return
    for key in tree_keys:
        _int(cand[key], f"{where}.{key}")
    fp = cand["fingerprint"]
    _keys(fp, f"{where}.fingerprint", _FINGERPRINT_KEYS)
    for key in ("count", "bytes", "newest_mtime_ns"):
        _int(fp[key], f"{where}.fingerprint.{key}")
    if not isinstance(fp["sha256"], str) or not _SHA256.fullmatch(fp["sha256"]):
        raise _Bad(f"{where}.fingerprint.sha256 must be sha256: and 64 lowercase hex digits")


def _check_verdict(cand: Mapping[str, Any], where: str) -> None:
    if not isinstance(cand["risk"], str) or cand["risk"] not in _RISKS:
        raise _Bad(f"{where}.risk must be one of {', '.join(sorted(_RISKS))}")
    for key in ("rule", "claim", "decided_by", "decided_at"):
        _str(cand[key], f"{where}.{key}")
    _opt_str(cand["note"], f"{where}.note")
    confidence = cand["confidence"]
    if type(confidence) not in (int, float) or not 0 <= confidence <= 1:
        raise _Bad(f"{where}.confidence must be a number from 0 to 1")


def _check_excluded(item: Any, where: str) -> None:
    _keys(item, where, _EXCLUDED_KEYS, _RAW_KEY)
    path = _str(item["path"], f"{where}.path", _MAX_PATH)
    if (
        not isinstance(item["code"], str)
        or item["code"] not in EXCLUSIONS.keys() | _FORMER_EXCLUSIONS
    ):
        raise _Bad(f"{where}.code must be one of the exclusion codes")
    _str(item["message"], f"{where}.message")
    if "path_b64" in item:
        _check_raw_path(item["path_b64"], f"{where}.path_b64", path)


def _check_workspace(item: Any, where: str) -> None:
    _keys(item, where, _WORKSPACE_KEYS)
    _abs_path(item["workspace"], f"{where}.workspace")
    if not isinstance(item["complete"], bool):
        raise _Bad(f"{where}.complete must be true or false")
    for key in ("files_seen", "text_files_read", "text_bytes_read", "binary_files_skipped"):
        _int(item[key], f"{where}.{key}")
    _str(item["reason"], f"{where}.reason")


def _check_folded(item: Any, where: str, dirs: set[str]) -> None:
    _keys(item, where, _FOLDED_KEYS)
    path = _abs_path(item["path"], f"{where}.path")
    into = _str(item["into"], f"{where}.into", _MAX_PATH)
    if into not in dirs:
        raise _Bad(f"{where}.into must be the path of a directory candidate")
    if not path.startswith(into.rstrip("/") + "/"):
        raise _Bad(f"{where}.path must lie strictly inside {where}.into")
