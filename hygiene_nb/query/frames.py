"""Frames for display: a classified snapshot to browse, its treemap, a summary's tables.

The explore notebook, the annotation widget and the report draw these; none reads the disk.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import api
from hygiene_nb.classify.content import CONTENT_COLUMNS, MIXED, RISK_ORDER
from hygiene_nb.classify.filetypes import (
    CATEGORIES,
    EXTENSION_SQL,
    OTHER,
    category_of,
    category_sql,
    extension_of,
)
from hygiene_nb.classify.queries import PATH_SQL, sql_literal
from hygiene_nb.formatting import human_bytes, noun_for, percent
from hygiene_nb.models import GroupStats, SizedEntry, Summary
from hygiene_nb.query.breakdowns import id_names, owner_label
from hygiene_nb.query.history import resolve_scan
from hygiene_nb.query.review import decided_rows, human_decisions
from hygiene_nb.scan.arrays import one_chunk
from hygiene_nb.scan.owners import UNKNOWN_OWNER
from hygiene_nb.scan.snapshot import entry_paths, query_engine

__all__ = [
    "BROWSE_COLUMNS",
    "CATEGORY_COLORS",
    "COLOUR_BY",
    "NO_FILES",
    "OWNER_COLORS",
    "SIZE_BY",
    "TREEMAP_ROWS",
    "ColourBy",
    "FrameIndex",
    "SizeBy",
    "TableIndex",
    "browse_frame",
    "content_split",
    "entries_frame",
    "groups_frame",
    "owners_frame",
    "owners_line",
    "risk_frame",
    "totals_frame",
    "treemap_holders",
    "treemap_nodes",
    "treemap_of",
    "types_frame",
]

# -- browsing a classified snapshot (the explore notebook and the annotation widget) -----------

BROWSE_COLUMNS = [
    "path",
    "parent",
    "name",
    "kind",
    "bytes",
    "alloc",
    "files",
    "latest_mtime_ns",
    "risk",
    "rule",
    "group",
    "claim",
    "confidence",
    "error",
    "partial",
    "content_risk",
    *CONTENT_COLUMNS,
]


def browse_frame(table: pa.Table) -> pd.DataFrame:
    """A classified snapshot as the frame the browser and the treemap read.

    ``bytes``/``alloc``/``files`` are recursive for a directory (missing where its subtree could
    not be read: unknown, never zero) and the entry's own for anything else, missing for an
    excluded entry (counted nowhere, so the treemap gives it no area);
    ``latest_mtime_ns`` is the newest modification inside a directory, else the entry's own.
    """
    is_dir = pc.equal(table.column("kind").cast(pa.string()), "dir")
    counted = pc.invert(pc.fill_null(table.column("excluded"), False))

    def sized(values: pa.ChunkedArray) -> pd.Series:
        out: pd.Series = (
            pc.if_else(counted, values, pa.nulls(1, values.type)[0]).to_pandas().astype("Int64")
        )
        return out

    frame = pd.DataFrame(
        {
            "path": entry_paths(table).to_pandas(),
            "parent": table.column("parent").cast(pa.string()).to_pandas(),
            "name": table.column("name").to_pandas(),
            "kind": table.column("kind").cast(pa.string()).to_pandas(),
            "bytes": sized(pc.if_else(is_dir, table.column("tree_bytes"), table.column("size"))),
            "alloc": sized(pc.if_else(is_dir, table.column("tree_alloc"), table.column("alloc"))),
            "files": sized(
                pc.if_else(is_dir, table.column("tree_files"), pa.scalar(1, pa.int64()))
            ),
            "latest_mtime_ns": pc.if_else(
                is_dir, table.column("tree_latest_mtime_ns"), table.column("mtime_ns")
            ).to_pandas(),
        }
    )
    for column in ("risk", "rule", "group", "claim", "confidence", "error", "partial"):
        frame[column] = _plain(table.column(column)).to_pandas()
    # what a directory holds, by risk (classify.content): rows read before it was kept have none
    kept = "content_risk" in table.column_names
    frame["content_risk"] = _plain(table.column("content_risk")).to_pandas() if kept else None
    for column in CONTENT_COLUMNS:
        frame[column] = table.column(column).to_pandas().astype("Int64") if kept else pd.NA
    return frame[BROWSE_COLUMNS]


# the columns ``browse_frame`` reads: what it shows as it is, and what it derives the rest from
_BROWSE_READS = frozenset(BROWSE_COLUMNS) | {
    "excluded",
    "size",
    "mtime_ns",
    "tree_bytes",
    "tree_alloc",
    "tree_files",
    "tree_latest_mtime_ns",
}


def _plain(values: pa.ChunkedArray) -> pa.ChunkedArray:
    """Dictionary-encoded strings as plain ones."""
    return values.cast(values.type.value_type) if pa.types.is_dictionary(values.type) else values


def content_split(row: Any) -> str:
    """What a directory holds, as shares of its bytes ("safe 99.6 % · caution 0.4 %")."""
    split = {r: getattr(row, f"content_{r}", None) for r in RISK_ORDER}
    known = {r: int(b) for r, b in split.items() if b is not None and not pd.isna(b) and b > 0}
    total = sum(known.values())
    if not total:
        return ""
    parts = sorted(known.items(), key=lambda kv: -kv[1])
    return " · ".join(f"{r} {percent(b / total)}" for r, b in parts)


class _ParentIndex:
    """Rows by parent directory: ``codes`` (each row's parent, -1 for none) over ``texts``.

    Rows come in row order, so what is read through it is exactly what filtering every row by
    parent gives. ``rows`` makes the frame of the rows at some positions.
    """

    def __init__(self, codes: np.ndarray[Any, Any], texts: Sequence[str | None]) -> None:
        order = np.argsort(codes, kind="stable")
        self._order = order
        self._bounds = np.searchsorted(codes[order], np.arange(-1, len(texts) + 1))
        self._top = order[self._bounds[0] : self._bounds[1]]
        # a text stands for two codes only where the parents repeat it (Arrow's dictionary may)
        self._codes: dict[str, list[int]] = {}
        for code, text in enumerate(texts):
            if text is not None:
                self._codes.setdefault(str(text), []).append(code)

    def _positions(self, parents: Iterable[str]) -> np.ndarray[Any, np.dtype[np.intp]]:
        bounds = self._bounds
        found = [
            self._order[bounds[c + 1] : bounds[c + 2]]
            for p in parents
            for c in self._codes.get(p, ())
        ]
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.intp)

    def rows(self, positions: np.ndarray[Any, np.dtype[np.intp]]) -> pd.DataFrame:
        """The browse frame of the rows at ``positions``, indexed by them."""
        raise NotImplementedError

    def children(self, *parents: str) -> pd.DataFrame:
        """The rows whose parent is one of ``parents`` (``frame["parent"].isin(parents)``)."""
        return self.rows(self._positions(parents))

    def named(self, path: str) -> pd.DataFrame:
        """The rows whose path is ``path`` (``frame[frame["path"] == path]``)."""
        near = np.union1d(self._positions([os.path.dirname(path)]), self._top)
        rows = self.rows(near)
        return rows[rows["path"] == path]


class FrameIndex(_ParentIndex):
    """A browse frame's rows by parent directory: one directory's rows without a pass over all.

    The widget's listing and ``treemap_nodes`` read one at every drill-in.
    """

    def __init__(self, frame: pd.DataFrame) -> None:
        self.frame = frame
        codes, parents = pd.factorize(frame["parent"])  # -1: no parent (the root's row)
        super().__init__(codes, list(parents))

    def rows(self, positions: np.ndarray[Any, np.dtype[np.intp]]) -> pd.DataFrame:
        """The rows of the frame at ``positions``."""
        return self.frame.iloc[positions]


class TableIndex(_ParentIndex):
    """A classified table's rows by parent directory, each directory's read as a frame when asked.

    What ``FrameIndex(browse_frame(table))`` gives (``children``, ``named``: the same rows, the
    same index of row numbers), without the frame of every row: the rows asked for are taken
    from ``table`` and made a browse frame then. For all rows it keeps only their order by
    parent (8 bytes a row) and each parent's text once. The widget lists and draws through
    one; at 1M entries the whole frame was about 480 MB.
    """

    frame = None  # there is no whole frame (``treemap_nodes`` reads through ``children``)

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        # what a browse frame reads (a drill-in takes only these columns' rows)
        self._read = table.select([c for c in table.column_names if c in _BROWSE_READS])
        parents = table.column("parent")
        if not pa.types.is_dictionary(parents.type):
            parents = pc.dictionary_encode(parents)
        encoded = one_chunk(parents)
        codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64)
        super().__init__(codes, encoded.dictionary.cast(pa.string()).to_pylist())

    def rows(self, positions: np.ndarray[Any, np.dtype[np.intp]]) -> pd.DataFrame:
        """The browse frame of the rows at ``positions``, indexed by them."""
        frame = browse_frame(self._read.take(pa.array(positions, type=pa.int64())))
        frame.index = pd.Index(positions, dtype=np.int64)
        return frame


def _other_id(parent: str) -> str:
    return parent.rstrip("/") + "/(other)"


def _colour_of(row: Any) -> dict[str, str]:
    """A node's colour word (what a directory holds: a risk, or ``mixed``) and its hover text."""
    word = str(row.content_risk if isinstance(row.content_risk, str) else row.risk)
    split = content_split(row) if row.kind == "dir" else ""
    return {
        "risk": word,
        "split": (f"{word}: {split}" if word == MIXED else split) or word,
        "verdict": f"{row.risk} ({row.rule})",
    }


ColourBy = Literal["risk", "owner", "type"]
COLOUR_BY: tuple[ColourBy, ...] = ("risk", "owner", "type")
# A treemap's areas: apparent bytes, or files inside (a directory's tree_files; a file is 1)
SizeBy = Literal["bytes", "files"]
SIZE_BY: tuple[SizeBy, ...] = ("bytes", "files")
NO_FILES = "no files"  # a directory holding no file bytes, coloured by type
# One fixed colour per file category (the treemap by type and the type-mix chart).
CATEGORY_COLORS: dict[str, str] = {
    "image": "#4e79a7",
    "video": "#e15759",
    "audio": "#b07aa1",
    "archive": "#9c755f",
    "document": "#59a14f",
    "code": "#76b7b2",
    "data": "#f28e2b",
    "database": "#edc948",
    "disk image": "#ff9da7",
    "package": "#8cd17d",
    "log": "#d37295",
    "object/binary": "#499894",
    OTHER: "#bab0ac",
    NO_FILES: "#eeeeee",
}
assert set(CATEGORIES) | {OTHER, NO_FILES} == set(CATEGORY_COLORS)
# Owners take these in order of the bytes they hold in the view; the rest share the last.
OWNER_COLORS = (
    "#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#b07aa1",
    "#edc948", "#76b7b2", "#ff9da7", "#9c755f", "#499894",
)  # fmt: skip
MORE_OWNERS_COLOR = "#d9d9d9"


def _colour_nodes(
    nodes: pd.DataFrame,
    under: str,
    colour_by: ColourBy,
    holders: Mapping[str, str] | None,
    kinds: Mapping[str, tuple[str, str]],
) -> None:
    """Add ``colour`` (the owner or category a node is coloured by) and ``hue`` (its colour)."""
    if colour_by == "risk":
        return
    words: list[str] = []
    for node_id in nodes["id"]:
        kind, name = kinds.get(str(node_id), ("", ""))
        if not kind or node_id == under:  # an "(other)" bucket, the view's own root
            words.append("")
        elif holders is not None and node_id in holders:
            words.append(holders[node_id])
        elif colour_by == "type":
            words.append(category_of(extension_of(name)) if kind == "file" else NO_FILES)
        else:
            words.append(UNKNOWN_OWNER)
    nodes["colour"] = words
    if colour_by == "type":
        palette = CATEGORY_COLORS
    else:  # owners in order of the bytes they colour: the children first, then the rest
        first = nodes["parent"] == under
        ranked = (
            nodes[first & (nodes["colour"] != "")].groupby("colour")["bytes"].sum().reset_index()
        )
        ranked = ranked.sort_values(["bytes", "colour"], ascending=[False, True])
        order = list(ranked["colour"])
        order += sorted({w for w in words if w and w not in order})
        palette = {w: OWNER_COLORS[i] for i, w in enumerate(order) if i < len(OWNER_COLORS)}
    nodes["hue"] = ["" if not w else palette.get(w, MORE_OWNERS_COLOR) for w in nodes["colour"]]


def treemap_nodes(
    frame: pd.DataFrame | None,
    under: str,
    *,
    decisions: dict[str, str] | None = None,
    max_nodes: int = 2000,
    children: int = 50,
    index: FrameIndex | TableIndex | None = None,
    levels: int = 2,
    colour_by: ColourBy = "risk",
    holders: Mapping[str, str] | None = None,
    size_by: SizeBy = "bytes",
) -> pd.DataFrame:
    """Treemap nodes for the directory ``under``: its children and their children.

    At most ``children`` children are named (the largest), each directory child names at most
    as many of its own as keeps the view within ``max_nodes``; the rest of each level is one
    ``(other)`` node, so areas always add up. A node's bytes are recursive; a directory whose
    subtree could not be read has no bytes (shown as 0 area, risk ``unknown``).
    ``size_by``: what the areas are and what "largest" ranks by: ``bytes``, or ``files`` (the
    files inside a directory, its ``tree_files``; a file or other entry counts 1). Both are
    on every node either way, each at least the sum of what is drawn inside it.

    ``index``: a ``FrameIndex`` of ``frame``, to read only the rows drawn (the same nodes); or
    a ``TableIndex``, with no ``frame`` (None).
    ``levels``: 1 for the children only (what the widget draws), each as big as with 2 (at
    least the sum of its own children).
    ``colour_by``: ``risk`` (what it holds, below), ``owner`` or ``type``. By owner or type a
    node takes the word ``holders`` gives for its path (``treemap_holders``: for a directory
    the owner or category holding most of its bytes); without one, a file takes its own
    category by type (a directory ``no files``) and ``owner unknown`` by owner. Categories
    have fixed colours (``CATEGORY_COLORS``); owners take ``OWNER_COLORS`` in order of the
    bytes of the children they colour.

    Returns:
        Columns ``id`` (the path; ``…/(other)`` for a bucket), ``label``, ``parent``, ``bytes``,
        ``files``,
        ``risk`` (the colour: for a directory what it holds, a risk or ``mixed``; empty for
        buckets), ``split`` (what it holds, as text: a directory's shares by risk, ``mixed:``
        first where they are mixed; else its risk), ``verdict`` (the entry's
        own risk and rule: what removing it whole means), ``decision`` (the covering human
        decision, or None); by owner or type also ``colour`` (the owner or category) and
        ``hue`` (its colour; both empty for ``(other)`` buckets and the root). ``attrs``:
        ``colour_by`` and ``size_by``.

    Raises:
        ValueError: ``index`` was built from another frame, neither is given, or ``colour_by``
            or ``size_by`` is unknown.
    """
    if index is not None and index.frame is not frame:
        raise ValueError("index was built from another frame")
    if frame is None and index is None:
        raise ValueError("treemap_nodes needs a frame or an index")
    _check(colour_by, size_by)
    decisions = decisions or {}
    per_child = max(1, (max_nodes - 2 - children) // max(1, children) - 1)
    rows: list[dict[str, object]] = []
    kinds: dict[str, tuple[str, str]] = {}  # a named node's kind and name (colour by type)

    def level(parent: str, kids: pd.DataFrame, keep: int) -> list[str]:
        kids = kids.assign(
            b=kids["bytes"].fillna(0).astype("int64"), n=kids["files"].fillna(0).astype("int64")
        )
        rank = "b" if size_by == "bytes" else "n"
        kids = kids.sort_values([rank, "name"], ascending=[False, True])
        named, rest = kids.head(keep), kids.iloc[keep:]
        for row in named.itertuples():
            kinds[str(row.path)] = (str(row.kind), str(row.name))
            rows.append(
                {
                    "id": row.path,
                    "label": row.name,
                    "parent": parent,
                    "bytes": row.b,
                    "files": row.n,
                    **_colour_of(row),
                }
            )
        if len(rest):
            rows.append(
                {
                    "id": _other_id(parent),
                    "label": f"({len(rest)} more)",
                    "parent": parent,
                    "bytes": int(rest["b"].sum()),
                    "files": int(rest["n"].sum()),
                    "risk": "",
                    "split": "",
                    "verdict": "",
                }
            )
        return [p for p, k in zip(named["path"], named["kind"], strict=True) if k == "dir"]

    if index is None:
        assert frame is not None  # checked above
        me = frame[frame["path"] == under]
        top = level(under, frame[frame["parent"] == under], children)
        grand = frame[frame["parent"].isin(top)]
    else:
        me = index.named(under)
        top = level(under, index.children(under), children)
        grand = index.children(*top)
    if levels > 1:
        for directory, kids in grand.groupby("parent", sort=False):
            level(str(directory), kids, per_child)
    nodes = pd.DataFrame(
        rows, columns=["id", "label", "parent", "bytes", "files", "risk", "split", "verdict"]
    ).astype({"bytes": "int64", "files": "int64"})
    # a parent is at least the sum of what is drawn inside it (branchvalues="total"), in
    # bytes and in files, whichever the areas are
    for column in ("bytes", "files"):
        inner = {str(p): int(b) for p, b in nodes.groupby("parent")[column].sum().items()}
        if levels == 1:  # what the second level would add up to: all of it, named or "(other)"
            sizes = grand[column].fillna(0).astype("int64").groupby(grand["parent"]).sum()
            for parent, size in sizes.items():
                inner[str(parent)] = inner.get(str(parent), 0) + int(size)
        nodes[column] = [
            max(int(b), inner.get(i, 0)) for i, b in zip(nodes["id"], nodes[column], strict=True)
        ]
    nodes = nodes.astype({"bytes": "int64", "files": "int64"})
    own = int(me["bytes"].fillna(0).iloc[0]) if len(me) else 0
    own_files = int(me["files"].fillna(0).iloc[0]) if len(me) else 0
    first = nodes["parent"] == under
    root = {
        "id": under,
        "label": under.rstrip("/").rsplit("/", 1)[-1] or "/",
        "parent": "",
        "bytes": max(own, int(nodes.loc[first, "bytes"].sum())),
        "files": max(own_files, int(nodes.loc[first, "files"].sum())),
        **(
            _colour_of(next(me.itertuples()))
            if len(me)
            else {"risk": "", "split": "", "verdict": ""}
        ),
    }
    nodes = pd.concat([pd.DataFrame([root]), nodes], ignore_index=True)
    if len(me):
        kinds[under] = (str(me["kind"].iloc[0]), str(me["name"].iloc[0]))
    _colour_nodes(nodes, under, colour_by, holders, kinds)
    covering = decided_rows(pa.array(nodes["id"], pa.string()), decisions)
    nodes["decision"] = [
        None if i.endswith("/(other)") else d for i, d in zip(nodes["id"], covering, strict=True)
    ]
    nodes.attrs["colour_by"] = colour_by
    nodes.attrs["size_by"] = size_by
    return nodes


def _check(colour_by: str, size_by: str) -> None:
    if colour_by not in COLOUR_BY:
        raise ValueError(f"colour_by must be one of {', '.join(COLOUR_BY)}, not {colour_by!r}")
    if size_by not in SIZE_BY:
        raise ValueError(f"size_by must be one of {', '.join(SIZE_BY)}, not {size_by!r}")


# -- tables of a summary, for display ------------------------------------------------------


def totals_frame(summary: Summary, *, redact: bool = False) -> pd.DataFrame:
    """The summary's totals as a two-column table (``what``, ``value``); unknowns stay missing.

    With ``redact`` the root's path is left out.
    """
    score = summary.cleanliness
    rows: list[tuple[str, object]] = [
        *([] if redact else [("root", summary.root)]),
        ("snapshot", summary.scan_id),
        ("scanned at", summary.scanned_at),
        ("apparent bytes", summary.tree_bytes),
        ("allocated bytes", summary.tree_alloc),
        ("files", summary.files),
        ("directories", summary.dirs),
        ("symlinks", summary.symlinks),
        ("unreadable entries", summary.errors),
        ("excluded entries", summary.excluded),
        ("partial scan (totals are lower bounds)", summary.partial),
        ("filesystem free bytes", summary.fs_free),
        ("cleanliness score (0-100)", score.score if score and not score.no_score else None),
    ]
    return pd.DataFrame(rows, columns=["what", "value"]).astype({"value": object})


def entries_frame(entries: Sequence[SizedEntry]) -> pd.DataFrame:
    """Ranked entries (largest first): path, kind, bytes, files, holds, risk, rule, claim.

    ``holds``: what a directory holds (a risk, or ``mixed``: the treemap's colour), else the
    entry's own risk; ``risk``, ``rule`` and ``claim``: its own verdict, as a whole.
    """
    return pd.DataFrame(
        [
            {
                "path": e.path,
                "kind": e.kind,
                "bytes": e.bytes,
                "files": e.files,
                "holds": e.holds or e.risk,
                "risk": e.risk,
                "rule": e.rule,
                "claim": e.claim,
            }
            for e in entries
        ],
        columns=["path", "kind", "bytes", "files", "holds", "risk", "rule", "claim"],
    ).astype({"files": "Int64"})


def groups_frame(groups: Sequence[GroupStats], *, redact: bool = False) -> pd.DataFrame:
    """Pattern groups: places found (outermost only), bytes, files, largest place.

    With ``redact`` the largest place (a path) is left out.
    """
    frame = pd.DataFrame(
        [
            {
                "group": g.group,
                "places": g.count,
                "bytes": g.bytes,
                "files": g.files,
                "largest": g.entries[0].path if g.entries else None,
            }
            for g in sorted(groups, key=lambda g: (-g.bytes, g.group))
        ],
        columns=["group", "places", "bytes", "files", "largest"],
    )
    return frame.drop(columns=["largest"]) if redact else frame


def risk_frame(summary: Summary) -> pd.DataFrame:
    """Bytes and entries per risk level, with what deleting safe (then + caution) would free."""
    rows = []
    for level, stats in summary.risk.items():
        freed = summary.reclaimable.get(level)
        rows.append(
            {
                "risk": level,
                "bytes": stats.bytes,
                "alloc": stats.alloc,
                "entries": stats.entries,
                "reclaimable_cumulative": freed.bytes if freed else None,
            }
        )
    return pd.DataFrame(rows).astype({"reclaimable_cumulative": "Int64"})


def owners_line(owners: pd.DataFrame) -> str:
    """How many owners hold a snapshot's entries, naming none: ``3 owners`` (redacted reports)."""
    count = len(owners)
    return f"{count} {noun_for(count, 'owner')}" + (
        " (by group)" if owners.attrs.get("by") == "group" else ""
    )


def owners_frame(owners: pd.DataFrame, *, top: int = 10, redact: bool = False) -> pd.DataFrame:
    """``views.by_owner`` for display: the ``top`` owners, sizes in human units.

    Columns ``owner``, ``size``, ``files``, ``share`` (of the snapshot's bytes),
    ``reclaimable (safe + caution)``, ``largest in`` (the root's child where the owner holds
    most, its full path: ``attrs["root"]`` is the root, so a table shows it relative to that)
    and ``held there`` (the owner's bytes in it). With ``redact`` no owner is named nor
    numbered: one row, ``owners`` (how many), and their ``size`` and ``files`` together.
    """
    if redact:
        return pd.DataFrame(
            [
                {
                    "owners": len(owners),
                    "size": human_bytes(int(owners["bytes"].sum()) if len(owners) else 0),
                    "files": int(owners["files"].sum()) if len(owners) else 0,
                }
            ]
        )
    shown = owners.head(top)
    rows = []
    for owner, size, files, share, freed, tops in zip(
        shown["owner"],
        shown["bytes"],
        shown["files"],
        shown["share"],
        shown["reclaimable_caution"],
        shown["top_dirs"],
        strict=True,
    ):
        rows.append(
            {
                "owner": owner,
                "size": human_bytes(int(size)),
                "files": int(files),
                "share": percent(share),
                "reclaimable (safe + caution)": human_bytes(int(freed)),
                "largest in": str(tops[0]["path"]) if tops else None,
                "held there": human_bytes(int(tops[0]["bytes"])) if tops else None,
            }
        )
    columns = [
        "owner",
        "size",
        "files",
        "share",
        "reclaimable (safe + caution)",
        "largest in",
        "held there",
    ]
    frame = pd.DataFrame(rows, columns=columns)
    frame.attrs["root"] = owners.attrs.get("root")  # tables show "largest in" relative to it
    return frame


def types_frame(types: pd.DataFrame, *, top: int = 15, redact: bool = False) -> pd.DataFrame:
    """``views.by_type`` for display: the ``top`` types, sizes in human units.

    Columns: the type (``category``, or ``extension`` and ``category``), ``files``, ``size``,
    ``share`` (of all files' bytes) and ``largest`` (its largest file), left out with
    ``redact``.
    """
    keys = ["extension", "category"] if "extension" in types else ["category"]
    frame = types.head(top)
    shown = frame[keys].copy()
    shown["files"] = frame["files"].astype("int64")
    shown["size"] = [human_bytes(int(b)) for b in frame["bytes"]]
    shown["share"] = [percent(x) for x in frame["share"]]
    if not redact:
        shown["largest"] = [e[0] if len(e) else "" for e in frame["examples"]]
    return shown.reset_index(drop=True)


# What a treemap ranks children by (``size_by``), as browse_frame counts it.
_SHOWN: dict[SizeBy, str] = {
    "bytes": "coalesce(CASE WHEN coalesce(excluded, false) THEN NULL WHEN kind = 'dir' "
    "THEN tree_bytes ELSE size END, 0)",
    "files": "coalesce(CASE WHEN coalesce(excluded, false) THEN NULL WHEN kind = 'dir' "
    "THEN tree_files ELSE 1 END, 0)",
}
# The rows a treemap of ``under`` draws: the directory, its children, and the children of the
# directories among its ``children`` largest by ``order`` (``_SHOWN[size_by]``: the same order
# treemap_nodes ranks them in). One query, both sizes of every row read.
TREEMAP_ROWS = f"""
    WITH named AS (
        SELECT {PATH_SQL} AS path, kind FROM entries WHERE parent = {{under}}
        ORDER BY {{order}} DESC, name ASC LIMIT {{children}})
    SELECT parent, name, kind, size, alloc, mtime_ns, tree_bytes, tree_alloc, tree_files,
           tree_latest_mtime_ns, partial, error, excluded, risk, rule, "group", claim,
           confidence, content_risk, {", ".join(CONTENT_COLUMNS)}
    FROM entries
    WHERE parent = {{under}} OR {PATH_SQL} = {{under}}
       OR parent IN (SELECT path FROM named WHERE kind = 'dir')
"""


def _holders_sql(under: str, colour_by: ColourBy) -> str:
    """Per child (and grandchild) of ``under``: the owner id or category with the most bytes.

    One query over the rows under ``under``: each counted entry adds its own size (by type,
    files only; a hard-linked file at each name), grouped by the child (and the grandchild) it
    lies in and by uid or category; the largest key of each is kept (ties: the smallest key).
    """
    prefix = under.rstrip("/") + "/"
    start = len(prefix) + 1
    rest = f"substr(parent, {start})"
    key = "CAST(uid AS STRING)" if colour_by == "owner" else category_sql(EXTENSION_SQL)
    kinds = "" if colour_by == "owner" else "AND kind = 'file'"
    here = f"parent = {sql_literal(under)}"
    return f"""
        WITH rows_under AS (
            SELECT CASE WHEN {here} THEN name ELSE split_part({rest}, '/', 1) END AS c1,
                   CASE WHEN {here} THEN NULL
                        WHEN split_part({rest}, '/', 2) = '' THEN name
                        ELSE split_part({rest}, '/', 2) END AS c2,
                   coalesce({key}, '') AS key, coalesce(size, 0) AS size
            FROM entries
            WHERE NOT coalesce(excluded, false) {kinds}
              AND ({here} OR substr(parent, 1, {len(prefix)}) = {sql_literal(prefix)})),
        sums AS (
            SELECT c1, NULL AS c2, key, sum(size) AS bytes FROM rows_under GROUP BY c1, key
            UNION ALL
            SELECT c1, c2, key, sum(size) AS bytes FROM rows_under
            WHERE c2 IS NOT NULL GROUP BY c1, c2, key)
        SELECT c1, c2, key FROM (
            SELECT c1, c2, key, row_number() OVER (
                       PARTITION BY c1, c2 ORDER BY bytes DESC, key) AS nth
            FROM sums) ranked
        WHERE nth = 1
    """


def treemap_holders(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    under: str | None = None,
    colour_by: Literal["owner", "type"] = "owner",
) -> dict[str, str]:
    """Who or what holds most of the bytes of each child and grandchild of ``under``.

    By ``owner``: the owner (its recorded name, else ``uid N``) whose entries add the most
    bytes inside it (an entry its own size; a directory holding nothing but itself: its own
    owner). By ``type``: the category of the files holding the most bytes (a directory
    without files is absent). One query over the rows under ``under``. Keys are paths, as the
    treemap's ``id``; the words go to ``treemap_nodes(holders=…)``.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    with query_engine() as con:
        api.open_entries(con, info, store=store, classified=False)
        return _holders(con, info, under or info.root, colour_by)


def _holders(con: Any, info: Any, under: str, colour_by: ColourBy) -> dict[str, str]:
    found = con.execute(_holders_sql(under, colour_by)).fetchall()
    names = id_names(info, "user")
    base = under.rstrip("/")
    held: dict[str, str] = {}
    for c1, c2, key in found:
        path = f"{base}/{c1}" if c2 is None else f"{base}/{c1}/{c2}"
        if colour_by == "owner":
            held[path] = owner_label(int(key) if key else None, names, "user")
        else:
            held[path] = str(key)
    return held


def treemap_of(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    under: str | None = None,
    children: int = 50,
    colour_by: ColourBy = "risk",
    size_by: SizeBy = "bytes",
) -> pd.DataFrame:
    """Treemap nodes of a snapshot (classified as of the scan), from ``under`` (default: root).

    Only the rows the treemap draws are read (``TREEMAP_ROWS``), from the snapshot's file and
    its kept verdicts. ``colour_by`` ``owner`` or ``type`` colours each node by the owner or
    category holding most of its bytes (``treemap_holders``, one more query over the rows
    under ``under``): a directory's colour is what is inside it, not who owns the directory.
    ``size_by`` ``files`` sizes the boxes by the files inside and names the children holding
    the most files (``treemap_nodes``).
    """
    _check(colour_by, size_by)
    info = resolve_scan(root, store=store, scan_id=scan_id)
    top = under or info.root
    holders: dict[str, str] | None = None
    with query_engine() as con:
        api.open_entries(con, info, store=store, now_ns=api.scan_time_ns(info))
        rows = con.sql(
            TREEMAP_ROWS.format(
                under=sql_literal(top), children=int(children), order=_SHOWN[size_by]
            )
        ).to_arrow_table()
        if colour_by != "risk":
            holders = _holders(con, info, top, colour_by)
    return treemap_nodes(
        browse_frame(rows),
        top,
        decisions=human_decisions(store, info.root),
        children=children,
        colour_by=colour_by,
        holders=holders,
        size_by=size_by,
    )
