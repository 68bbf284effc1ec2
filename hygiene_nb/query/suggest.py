"""Suggestions, never actions: automatic mode's suggested plan and tidy names for kept files.

**Automatic mode** (per root in the store's ``config.toml``; docs/settings.md): when a full scan
scores below the threshold and safe entries exist, the report gains a suggested plan and its
Markdown. It is a proposal for a person to read; turning it into decisions, a plan file and an
execution stays with the person. A suggestion the person declined is not shown again while its
candidates are unchanged (same paths, sizes and times: the suggestion's digest).

**Organization suggestions**: kept intermediate files scattered through a workspace (logs,
exports, scratch outputs) get a suggested name and directory, with the reason. Nothing in
hygiene-nb moves or renames anything for this.
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import api
from hygiene_nb.classify.queries import PATH_SQL, sql_literal
from hygiene_nb.classify.summary import cleanliness, freed_bytes
from hygiene_nb.config import load_root_config
from hygiene_nb.formatting import counted, exact_bytes, human_bytes, shown
from hygiene_nb.ledger import Annotation, Ledger
from hygiene_nb.plan.references import PROJECT_MARKERS
from hygiene_nb.query import views
from hygiene_nb.scan.snapshot import entry_paths, query_engine

__all__ = [
    "ORGANIZE",
    "SuggestResult",
    "Suggestion",
    "decline",
    "organization_suggestions",
    "organize",
    "suggested_plan",
    "suggestion_for",
    "suggestion_markdown",
]


@dataclass(frozen=True)
class Suggestion:
    """Automatic mode's verdict on one scan: a suggested plan, or why there is none."""

    root: str
    scan_id: str
    score: int
    threshold: int
    digest: str = ""
    candidates: list[dict[str, object]] = field(default_factory=list)
    reclaim_bytes: int = 0
    declined_at: str | None = None
    reason: str = ""

    @property
    def shown(self) -> bool:
        """True when there is something to suggest that the person has not declined."""
        return bool(self.candidates) and self.declined_at is None


def _digest(rows: pd.DataFrame) -> str:
    text = "\n".join(
        f"{p}\t{k}\t{b}\t{m}"
        for p, k, b, m in zip(
            rows["path"], rows["kind"], rows["bytes"], rows["latest_mtime_ns"], strict=True
        )
    )
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def suggested_plan(
    root: str | None = None, *, store: api.StoreArg = None, scan_id: str | None = None
) -> Suggestion | None:
    """Automatic mode's suggestion for a scan (``None`` when the root is in manual mode).

    Candidates are the outermost *safe* matches of a pattern group (never protected, never an
    entry a person already decided on, or inside one), as of the scan's time.

    Raises:
        ConfigInvalid: the store's ``config.toml`` is malformed.
    """
    st = api.open_store(store)
    info = views.resolve_scan(root, store=st, scan_id=scan_id)
    config = load_root_config(st, info.root)
    if not config.automatic:
        return None
    table = views.classified_as_of_scan(info, store=st)
    score = cleanliness(table, partial=info.partial).score

    def verdict(**found: Any) -> Suggestion:
        return Suggestion(info.root, info.scan_id, score, config.threshold, **found)

    if info.partial:
        return verdict(
            reason="the scan is partial, so the score is an estimate: "
            "scan without limits for a suggestion"
        )
    if score >= config.threshold:
        return verdict(reason=f"the score {score} is not below {config.threshold}")
    frame = views.browse_frame(table)
    decided = views.decided_rows(pa.array(frame["path"]), views.human_decisions(st, info.root))
    chosen = (
        np.asarray(table.column("group_root").fill_null(False), dtype=bool)
        & (frame["risk"] == "safe").to_numpy()
        & ~np.asarray(table.column("protected").fill_null(False), dtype=bool)
        & np.array([d is None for d in decided])
    )
    rows = frame[chosen].sort_values("path")
    outermost: list[int] = []
    last = None
    for index, path in zip(rows.index, rows["path"], strict=True):
        if last is not None and path.startswith(last.rstrip("/") + "/"):
            continue  # inside a candidate already listed
        outermost.append(index)
        last = path
    rows = rows.loc[outermost]
    if rows.empty:
        return verdict(reason="nothing is safe to suggest")
    covered = views.decided_rows(entry_paths(table), dict.fromkeys(rows["path"], "x"))
    reclaim, _ = freed_bytes(table, np.array([c is not None for c in covered]))
    digest = _digest(rows)
    with Ledger.open(st) as ledger:
        declined = ledger.declined_at(info.root, digest)
    candidates = [
        {"path": p, "kind": k, "bytes": None if pd.isna(b) else int(b), "group": g, "claim": c}
        for p, k, b, g, c in zip(
            rows["path"], rows["kind"], rows["bytes"], rows["group"], rows["claim"], strict=True
        )
    ]
    reason = (
        f"you declined this suggestion at {declined}; it returns when its candidates change"
        if declined
        else f"the score {score} is below {config.threshold} and "
        f"{counted(len(candidates), 'safe entry', 'safe entries')} could go"
    )
    return verdict(
        digest=digest,
        candidates=candidates,
        reclaim_bytes=reclaim,
        declined_at=declined,
        reason=reason,
    )


def suggestion_markdown(s: Suggestion, *, redact: bool = False) -> str:
    """The suggestion as Markdown (with ``redact``: counts and bytes only, no path or name)."""
    lines = [
        f"# Suggested plan for {'(redacted)' if redact else _cell(s.root)}",
        "",
        f"Snapshot `{s.scan_id}`, cleanliness score {s.score} (threshold {s.threshold}): "
        f"{s.reason}.",
        "",
    ]
    if not s.candidates:
        return "\n".join(lines)
    lines += [
        f"{counted(len(s.candidates), 'safe entry', 'safe entries')} would free "
        f"{human_bytes(s.reclaim_bytes)} ({exact_bytes(s.reclaim_bytes)}; each inode once). "
        "This is a suggestion: nothing has been decided or moved. To act on it, mark the "
        "entries `delete` (the widget, or `hygiene-nb annotate`), export a plan with "
        "`hygiene-nb plan`, review it, then run `hygiene-nb execute`. To dismiss it: "
        f"`hygiene-nb suggest ROOT --decline {s.digest}`.",
        "",
    ]
    if redact:
        groups: dict[str, list[int]] = {}
        for c in s.candidates:
            entry = groups.setdefault(str(c["group"]), [0, 0, 0])
            entry[0] += 1
            size = c["bytes"]
            if isinstance(size, int):
                entry[1] += size
            else:
                entry[2] += 1  # a size nobody could read: the sum is only a lower bound
        lines += ["| group | entries | bytes |", "|---|---|---|"]
        lines += [
            f"| {_cell(g)} | {n} | {'≥ ' if unknown else ''}{b} |"
            for g, (n, b, unknown) in sorted(groups.items())
        ]
    else:
        lines += ["| path | kind | bytes | group | why |", "|---|---|---|---|---|"]
        lines += [
            f"| <code>{_cell(c['path'])}</code> | {_cell(c['kind'])} | {_cell(c['bytes'])} "
            f"| {_cell(c['group'])} | {_cell(c['claim'])} |"
            for c in s.candidates
        ]
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    """Text safe inside Markdown (and the HTML it becomes): no markup, no table breaks.

    A file may be named ``a`<img onerror=…>`` or ``a|b``; the report renders Markdown as HTML.
    """
    text = html.escape(shown(str(value)), quote=True)  # control characters escaped visibly
    return text.replace("|", "&#124;").replace("`", "&#96;")


def decline(root: str, digest: str, *, store: api.StoreArg = None) -> Suggestion:
    """Decline the current suggestion for ``root`` (``digest`` must be the one shown).

    Raises:
        UsageError: there is no current suggestion, or ``digest`` is not it.
    """
    from hygiene_nb.errors import UsageError

    current = suggested_plan(root, store=store)
    if current is None or not current.candidates:
        raise UsageError(f"there is no suggestion for {root} to decline.")
    if current.digest != digest:
        raise UsageError(
            f"{digest} is not the current suggestion for {root} ({current.digest}); "
            "run `hygiene-nb suggest ROOT` to see it first."
        )
    with Ledger.open(api.open_store(store)) as ledger:
        ledger.decline_suggestion(current.root, digest)
    return suggested_plan(root, store=store) or current


@dataclass(frozen=True)
class SuggestResult:
    """What ``hygiene-nb suggest`` shows: automatic mode's verdict, or that the root is manual.

    Attributes:
        root: the root, absolute.
        suggestion: automatic mode's verdict; None when the root is in manual mode.
        config_path: in manual mode, the store's ``config.toml`` (where to turn it on).
        table_key: in manual mode, the key of the root's table in that file, as written there
            (None: it has none).
    """

    root: str
    suggestion: Suggestion | None
    config_path: str = ""
    table_key: str | None = None

    exit_code = 0  # a suggestion decides nothing, so nothing is left undone

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb suggest --json`` prints."""
        s = self.suggestion
        if s is None:
            return {"status": "done", "automatic": False}
        return {
            "status": "done",
            "automatic": True,
            "shown": s.shown,
            "digest": s.digest,
            "score": s.score,
            "threshold": s.threshold,
            "reason": s.reason,
            "declined_at": s.declined_at,
            "reclaim_bytes": s.reclaim_bytes,
            "candidates": s.candidates,
        }

    def to_text(self) -> str:
        """The suggestion's Markdown, or how to turn automatic mode on for the root."""
        if self.suggestion is not None:
            return suggestion_markdown(self.suggestion)
        key = self.table_key if self.table_key is not None else self.root
        table = f"[roots.{json.dumps(key)}]"  # a TOML basic string: JSON's escapes are TOML's
        where = f"{self.config_path} (readable and writable by you alone)"
        hint = (
            f"To turn automatic mode on, set `automatic = true` in its {table} table in {where}."
            if self.table_key is not None
            else f"To turn automatic mode on, add to {where}:\n  {table}\n  automatic = true"
        )
        return f"{self.root} is in manual mode: nothing is suggested. {hint}"


def suggestion_for(
    root: str, *, store: api.StoreArg = None, decline_digest: str | None = None
) -> SuggestResult:
    """Automatic mode's suggestion for ``root``'s latest scan, after declining ``decline_digest``.

    ``root`` may be relative (taken from the working directory).

    Raises:
        ConfigInvalid: the store's ``config.toml`` is malformed.
        UsageError: ``decline_digest`` is not the current suggestion's digest.
    """
    path = os.path.abspath(root)
    found = (
        decline(path, decline_digest, store=store)
        if decline_digest
        else suggested_plan(path, store=store)
    )
    if found is not None:
        return SuggestResult(path, found)
    st = api.open_store(store)
    return SuggestResult(
        path, None, str(st.root / "config.toml"), load_root_config(st, path).table_key
    )


# -- organization suggestions --------------------------------------------------------------

# category → (what it is, where it goes, names/extensions that say so, directories it belongs in)
ORGANIZE: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "logs": ("log file", "logs/{month}", (".log",), ("logs", "log", "Logs")),
    "exports": ("exported data", "exports/{month}",
                ("export", "output", "dump", "results_"), ("exports", "outputs", "output")),
    "scratch": ("scratch output", "scratch",
                ("scratch", "tmp_", "temp_", "untitled", "draft"), ("scratch",)),
}  # fmt: skip
_EXPORT_EXTS = (".csv", ".tsv", ".xlsx", ".xls", ".json", ".parquet", ".ipynb", ".txt")


def _category(name: str) -> str | None:
    lower = name.lower()
    stem, ext = posixpath.splitext(lower)
    if ext == ".log":
        return "logs"
    if ext in _EXPORT_EXTS and stem.startswith(ORGANIZE["exports"][2]):
        return "exports"
    if stem.startswith(ORGANIZE["scratch"][2]):
        return "scratch"
    return None


def organization_suggestions(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    under: str | None = None,
    annotations: Sequence[Annotation] | None = None,
) -> pd.DataFrame:
    """A tidy name and directory for each kept intermediate file that sits out of place.

    Logs, exports and scratch outputs outside a directory of their kind, not protected and not
    marked delete, are given ``<workspace>/logs/<YYYY-MM>/<name>`` (by the month last
    written), ``exports/<YYYY-MM>/…`` or ``scratch/…``. The workspace is the nearest directory
    holding a project marker (``pyproject.toml``, ``.git``…), else the root.

    ``annotations``: every annotation at or under the root, in path order, when read already.

    Returns:
        Columns ``path``, ``suggested``, ``category``, ``reason``; suggestions only.
    """
    st = api.open_store(store)
    info = views.resolve_scan(root, store=st, scan_id=scan_id)
    decisions = (
        views.human_decisions(st, info.root)
        if annotations is None
        else views.decisions_of(annotations)
    )
    scope = (under or info.root).rstrip("/") or "/"
    prefixes = ORGANIZE["exports"][2] + ORGANIZE["scratch"][2]
    with query_engine() as con:
        api.open_entries(con, info, store=st, now_ns=api.scan_time_ns(info))
        maybe = con.sql(
            TIDY_CANDIDATES.format(
                under=sql_literal(scope),
                below=_like_prefix(scope.rstrip("/") + "/"),
                prefixes=" OR ".join(
                    f"lower(name) LIKE {_like_prefix(p)} ESCAPE '!'" for p in prefixes
                ),
            )
        ).df()
        markers = {
            str(p)
            for (p,) in con.execute(
                TIDY_MARKERS.format(markers=", ".join(sql_literal(m) for m in PROJECT_MARKERS))
            ).fetchall()
        }
    return _tidy(maybe, markers, decisions, info.root)


# A superset of the files ``_category`` accepts, within the scope: unprotected files named
# like logs, exports or scratch outputs (the case-folding test is repeated in Python), and
# none inside a directory a pattern group takes whole (a virtualenv, node_modules, a build
# output: moving a file out of a package breaks it, and the directory goes or stays whole).
TIDY_CANDIDATES = f"""
    SELECT {PATH_SQL} AS path, parent, name, mtime_ns AS latest_mtime_ns FROM entries
    WHERE kind = 'file' AND NOT coalesce(protected, false)
      AND NOT ("group" IS NOT NULL AND NOT coalesce(group_root, false))
      AND (lower(name) LIKE '%.log' OR {{prefixes}})
      AND (parent = {{under}} OR parent LIKE {{below}} ESCAPE '!')
"""
TIDY_MARKERS = (
    "SELECT DISTINCT parent FROM entries WHERE parent IS NOT NULL AND name IN ({markers})"
)


def _like_prefix(text: str) -> str:
    """A quoted LIKE pattern (escape ``!``) of what starts with ``text``, taken literally."""
    escaped = text.replace("!", "!!").replace("%", "!%").replace("_", "!_")
    return sql_literal(escaped + "%")


def organize(
    table: pa.Table,
    frame: pd.DataFrame,
    decisions: dict[str, str],
    root: str,
    *,
    under: str | None = None,
) -> pd.DataFrame:
    """``organization_suggestions`` over an already classified table and its browse frame."""
    protected = np.asarray(table.column("protected").fill_null(False), dtype=bool)
    grouped = np.asarray(pc.is_valid(table.column("group")), dtype=bool)
    own = np.asarray(table.column("group_root").fill_null(False), dtype=bool)
    protected = protected | (grouped & ~own)  # inside a directory a group takes whole
    markers = set(frame.loc[frame["name"].isin(PROJECT_MARKERS), "parent"].dropna())
    scope = (under or root).rstrip("/") + "/"
    lower = frame["name"].str.lower()
    prefixes = ORGANIZE["exports"][2] + ORGANIZE["scratch"][2]
    # a cheap superset of what _category accepts, so the loop in _tidy stays short
    chosen = (
        (frame["kind"] == "file").to_numpy()
        & ~protected
        & (lower.str.endswith(".log") | lower.str.startswith(prefixes)).to_numpy()
        & frame["path"].str.startswith(scope).to_numpy()
    )
    # each file's own mtime from the table, exact: the frame's column is float (steps of
    # 256 ns) wherever some directory has no newest time (an excluded one)
    mtimes = table.column("mtime_ns").take(pa.array(np.flatnonzero(chosen), pa.int64()))
    maybe = frame[chosen].assign(latest_mtime_ns=mtimes.to_numpy(zero_copy_only=False))
    return _tidy(maybe, markers, decisions, root)


def _tidy(
    maybe: pd.DataFrame, markers: set[str], decisions: dict[str, str], root: str
) -> pd.DataFrame:
    """Suggestions for the candidate files ``maybe``, given the directories with a marker.

    ``maybe`` has ``path``, ``parent``, ``name`` and ``latest_mtime_ns``. A file goes by the
    month it was last written, in UTC, counted in whole seconds (a file written in the last
    second of a month belongs to that month).
    """
    paths = maybe["path"].tolist()
    parents = maybe["parent"].tolist()
    over = views.decisions_above(decisions, set(parents), exact=set(paths))
    decided = views.decided_rows(pa.array(paths, pa.string()), over)
    seconds = maybe["latest_mtime_ns"].to_numpy(dtype=np.int64) // 10**9
    months = seconds.astype("datetime64[s]").astype("datetime64[M]").astype(str)
    workspaces = _Workspaces(markers, root)
    found: dict[str, list[str]] = {"path": [], "suggested": [], "category": [], "reason": []}
    for path, parent, name, month, decision in zip(
        paths, parents, maybe["name"].tolist(), months.tolist(), decided.tolist(), strict=True
    ):
        if decision == "delete":
            continue
        category = _category(name)
        if category is None:
            continue
        what, target, _, homes = ORGANIZE[category]
        if parent[parent.rfind("/") + 1 :] in homes:
            continue  # already where it belongs
        rel = f"{target.format(month=month)}/{name}"  # a name holds no "/"
        suggested = posixpath.join(workspaces.of(parent), rel)
        if suggested == path:
            continue
        found["path"].append(path)
        found["suggested"].append(suggested)
        found["category"].append(category)
        found["reason"].append(
            f"{what} outside a {homes[0]}/ directory of its workspace: {rel}"
            + (" (by the month it was last written)" if "{month}" in target else "")
        )
    columns = ["path", "suggested", "category", "reason"]
    # text columns as pandas infers them from text; none at all: an empty frame of those names
    return pd.DataFrame(found, columns=columns) if found["path"] else pd.DataFrame(columns=columns)


class _Workspaces:
    """The workspace of a directory: the nearest at or above it (within ``root``) with a marker.

    Each directory on the way up is looked at once, however many candidates sit below it.
    """

    def __init__(self, markers: set[str], root: str) -> None:
        self.markers, self.root = markers, root
        self.known: dict[str, str] = {}

    def of(self, directory: str) -> str:
        """The workspace of ``directory``."""
        passed = []
        current = directory
        while True:
            found = self.known.get(current)
            if found is not None:
                break
            if current in self.markers:
                found = current
                break
            if current == self.root or current in ("/", ""):
                found = self.root
                break
            passed.append(current)
            current = os.path.dirname(current)
        self.known.update(dict.fromkeys(passed, found))
        return found
