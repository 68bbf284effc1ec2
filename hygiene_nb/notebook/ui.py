r"""The annotation widget: browse a snapshot, decide keep / delete / unsure, export a plan.

``Annotator`` holds all the behaviour in plain methods (``open``, ``up``, ``decide``,
``set_note``, ``select_all``, ``decide_selected``, ``on_tree_click``, ``export_plan``); the
ipywidgets only call them, so the tests drive it without a browser. Every decision is written
to the ledger at once (``by: human``); nothing is kept only in widget state. Every row carries
its entry's exact path bytes: two names that display alike (``caf\xe9`` typed out, and the
byte 0xE9) are two rows, and a click on one never decides the other. A display text that two
entries share is refused, never guessed. The widget can
export a plan file and shows the command that would carry it out; it cannot execute anything.

A click costs what it touches, not the size of the tree or of the ledger: the plan summary is
kept as a tally (``plan.tally.PlanTally``) that a decision updates by the rows it covers, the
ledger is read again only when another connection wrote to it (``Ledger.data_version``), a
decision's digest is hashed from the row on screen (``scan.digests.SnapshotDigests``), a
directory's rows are taken from the snapshot table through an index by parent
(``views.TableIndex``: no frame of the whole snapshot is kept), and the listed rows are widgets
made once, shown again for each directory, and redrawn where a decision changed them.
"""

from __future__ import annotations

import html
import os
import sys
import weakref
from collections import Counter
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import ipywidgets as W
import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import api
from hygiene_nb import formatting as fmt
from hygiene_nb.bulk import without_collection
from hygiene_nb.classify.summary import RISKS
from hygiene_nb.errors import AmbiguousName, HygieneError
from hygiene_nb.ledger import DECISIONS, Annotation, Ledger, display_path
from hygiene_nb.notebook.figures import (
    RISK_COLORS,
    RISK_INK,
    treemap_decisions,
    treemap_key,
    treemap_trace,
)
from hygiene_nb.pathnames import raw_path
from hygiene_nb.plan.document import Exclusion, SnapshotIndex
from hygiene_nb.plan.schema import EXCLUSIONS
from hygiene_nb.plan.tally import PlanTally
from hygiene_nb.query import views
from hygiene_nb.query.frames import content_split
from hygiene_nb.query.suggest import organize
from hygiene_nb.scan.arrays import one_chunk
from hygiene_nb.scan.digests import SnapshotDigests
from hygiene_nb.scan.snapshot import entry_paths
from hygiene_nb.store import Store

__all__ = ["AGE_FILTERS", "SIZE_FILTERS", "SORTS", "Annotator"]

SORTS = ("bytes", "name", "age", "files")
SIZE_FILTERS = {
    "any size": 0,
    "≥ 1 MB": 10**6,
    "≥ 10 MB": 10**7,
    "≥ 100 MB": 10**8,
    "≥ 1 GB": 10**9,
}
AGE_FILTERS = {
    "any age": 0,
    "untouched 30 days": 30,
    "untouched 90 days": 90,
    "untouched 1 year": 365,
    "untouched 2 years": 730,
}
_ALL = "all"
_NS_PER_DAY = 86_400 * 10**9


# the verdict's text columns: a few distinct values each, so the widget holds them
# dictionary-encoded (1M entries: about 105 MB less, 75 MB of it the claims)
_ENCODED = ("risk", "rule", "group", "claim", "content_risk")


def _one_chunk_with_paths(table: pa.Table) -> pa.Table:
    """``table`` with its ``path`` column (``entry_paths``), each column in one chunk.

    The same values; the verdict's text columns (``_ENCODED``) dictionary-encoded (where the
    classification does not give them so already).
    Combined a column at a time, each column's chunks dropped as soon as it is combined, so
    the snapshot is never held twice (1M entries: about 300 MB less at the peak than
    combining the whole table at once). The caller passes its only reference to ``table``.
    """
    fields = [*table.schema, pa.field("path", pa.string())]
    paths = entry_paths(table, whole=True)  # in one chunk already: not copied below
    columns: list[Any] = [*table.columns, paths]
    del table, paths  # from here on each column's chunks are held only by ``columns``
    for i, field in enumerate(fields):
        column = one_chunk(columns[i])  # its chunks go as soon as it is combined
        if field.name in _ENCODED and pa.types.is_string(field.type):
            column = pc.dictionary_encode(column)
            fields[i] = field.with_type(column.type)
        columns[i] = column
    # what the chunks held goes back to the system: Arrow's allocator would keep it, and the
    # frames built next (Python objects) could not use it
    pa.default_memory_pool().release_unused()
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


class _Row:
    """The widgets of one listed row, made once and shown again for each entry listed there.

    ``show`` binds the row to an entry (a drill-in sets values, it makes no widgets);
    ``show_decision`` redraws what a decision changes. Every action uses the exact bytes of
    the entry shown now (``path_raw``).
    """

    def __init__(self, owner: Annotator) -> None:
        self.owner = owner
        self.path = ""  # for display only
        self.path_raw = b""  # what every action uses
        self.entry: Any = None
        self._showing = False  # values set by ``show`` are not a person's input
        self.check = W.Checkbox(
            value=False, indent=False, layout=W.Layout(width="28px", flex="0 0 auto")
        )
        self.check.observe(self._checked, names="value")
        # one line at 1,000 px: the name and the note give way first, the rest keeps its width
        self.name = W.Button(layout=W.Layout(flex="0 1 180px", min_width="90px"))
        self.name.on_click(lambda _b: owner.open(self.path_raw))
        self.info = W.HTML(layout=W.Layout(flex="0 0 auto", overflow="hidden"))
        self.buttons = {
            d: W.Button(
                description="",
                icon=_ICONS[d][0],
                tooltip=_ICONS[d][1],
                layout=W.Layout(width="34px", flex="0 0 auto"),
            )
            for d in (*DECISIONS, "clear")
        }
        for d, button in self.buttons.items():
            button.on_click(
                lambda _b, d=d: owner.decide([self.path_raw], None if d == "clear" else d)
            )
        self.note = W.Text(
            placeholder="note",
            continuous_update=False,
            layout=W.Layout(flex="1 1 120px", min_width="60px"),
        )
        self.note.observe(self._noted, names="value")
        self.box = W.HBox(
            [self.check, self.name, self.info, *self.buttons.values(), self.note],
            layout=W.Layout(flex_flow="row nowrap", align_items="center", width="100%"),
        )
        self.box.add_class("hygiene-row")  # what a browser test finds the rows by

    def _checked(self, change: dict[str, Any]) -> None:
        if not self._showing:
            self.owner.select(self.path_raw, bool(change["new"]))

    def _noted(self, change: dict[str, Any]) -> None:
        if not self._showing:
            self.owner.set_note(self.path_raw, str(change["new"]))

    def show(self, entry: Any) -> None:
        """Show the listed entry ``entry`` (a row of ``Annotator.listed``) in these widgets."""
        owner = self.owner
        self._showing = True
        try:
            self.entry = entry
            self.path = str(entry.path)
            exact = self.path_raw = owner.exact_of_row(int(entry.Index))
            self.check.value = exact in owner.selected
            name = f"{entry.name}/" if entry.kind == "dir" else str(entry.name)
            self.name.description = (
                fmt.middle_ellipsis(name[:-1], _NAME_CHARS - 1) + "/"
                if entry.kind == "dir"
                else fmt.middle_ellipsis(name, _NAME_CHARS)
            )
            self.name.tooltip = self.path
            self.name.disabled = entry.kind != "dir"
            self.note.value = owner.exact_notes.get(exact, "")
            self.show_decision()
        finally:
            self._showing = False

    def show_decision(self) -> None:
        """Redraw what a decision changes: its button's colour, and why a plan leaves it out."""
        owner, entry, exact = self.owner, self.entry, self.path_raw
        decision = owner.exact_decisions.get(exact)
        for d, button in self.buttons.items():
            button.button_style = _style(d) if decision == d else ""
        age = owner.age_days(entry.latest_mtime_ns)
        # a directory shows what it holds (the treemap's colour), its own verdict on hover
        holds = getattr(entry, "content_risk", None)
        risk = str(holds) if entry.kind == "dir" and isinstance(holds, str) else str(entry.risk)
        colour = RISK_COLORS.get(risk, RISK_COLORS[""])
        ink = RISK_INK.get(risk, RISK_INK[""])
        split = content_split(entry) if entry.kind == "dir" else ""
        about = [f"holds: {split}; as a whole: {entry.risk}" if split else f"risk: {entry.risk}"]
        if isinstance(entry.rule, str) and entry.rule:
            about.append(f"rule: {entry.rule}")
        if isinstance(entry.claim, str) and entry.claim:
            about.append(str(entry.claim))
        size_exact = fmt.exact_bytes(entry.bytes)
        files = fmt.counted(entry.files, "file") if entry.kind == "dir" else ""
        age_said = fmt.human_age(age)
        self.info.value = (
            "<div style='display:flex;white-space:nowrap;align-items:center;gap:6px'>"
            f"{_cell(fmt.human_bytes(entry.bytes), 68, 'size ' + size_exact, right=True)}"
            f"{_cell(files, 78, files)}"
            f"{_cell(age_said, 82, 'untouched for ' + age_said + ' at the scan')}"
            f"<span style='flex:0 0 74px;overflow:hidden;text-overflow:ellipsis'>"
            f"<span style='background:{colour};color:{ink};padding:0 4px;border-radius:3px' "
            f"title='{_attr(chr(10).join(about))}'>{html.escape(risk)}</span></span>"
            f"<span style='flex:0 0 118px;overflow:hidden;text-overflow:ellipsis'>"
            f"{self._why()}</span></div>"
        )

    def _why(self) -> str:
        """The mark of a decision a plan would leave out, its reason on hover ("" if none)."""
        owner, exact = self.owner, self.path_raw
        left = owner.left_out(exact)
        if left is not None:
            why = _attr("Not a plan candidate: " + left.message)
            return (
                f"<span style='color:#b35806' title='{why}'>"
                f"⚠ {html.escape(_short_reason(left.code))}</span>"
            )
        if exact in owner.stale:
            return (
                "<span style='color:#b35806' title='decided on what is no longer there (or "
                "before decisions recorded it): a plan leaves it out until you decide again'>"
                "⚠ stale</span>"
            )
        return ""


def _style(decision: str) -> str:
    return {"delete": "danger", "keep": "success", "unsure": "warning"}.get(decision, "")


# a decision button: its icon (Font Awesome, as JupyterLab ships it) and what it does
_ICONS = {
    "keep": ("check", "keep: never in a plan"),
    "delete": ("trash", "delete: a candidate of the plan you export (nothing moves here)"),
    "unsure": ("question", "unsure: decide later"),
    "clear": ("times", "clear: no decision"),
}
_NAME_CHARS = 24  # what the name button shows at its width; the full path is on hover
# a plan's reason codes, as short as the row's mark has room for (the full text on hover)
_SHORT_REASONS = {
    "contains-kept-entry": "keep inside",
    "incomplete-scan": "incomplete scan",
    "contains-mount": "mount inside",
    "not-in-snapshot": "not scanned",
    "changed-since-decision": "stale",
    "decided-by-agent": "by an agent",
    "outside-root": "outside root",
}


def _short_reason(code: str) -> str:
    return _SHORT_REASONS.get(code, code.replace("-", " "))


def _attr(text: str) -> str:
    return html.escape(text, quote=True)


def _cell(text: str, width: int, title: str, *, right: bool = False) -> str:
    align = "right" if right else "left"
    return (
        f"<span style='flex:0 0 {width}px;text-align:{align};overflow:hidden;"
        f"text-overflow:ellipsis' title='{_attr(title)}'>{html.escape(text)}</span>"
    )


def _figure_widget(traces: list[Any]) -> go.Figure:
    """Plotly's ``FigureWidget`` of ``traces``, its module imported without an IRI grammar.

    That module imports nbformat, and nbformat jsonschema, which registers a checker for the
    ``iri`` formats when ``rfc3987_syntax`` imports; that import compiles a parsing grammar,
    about 1.7 s of the first widget opened in a kernel (measured 2026-12-06). Where jsonschema
    is not loaded yet, ``rfc3987_syntax`` is recorded as absent while the module loads and the
    record removed afterwards: jsonschema then checks no IRI syntax in this kernel (nothing here
    validates that format), and ``import rfc3987_syntax`` still works as before.
    """
    if "jsonschema" not in sys.modules and "rfc3987_syntax" not in sys.modules:
        sys.modules["rfc3987_syntax"] = None  # type: ignore[assignment]
        try:
            widget = go.FigureWidget
        finally:
            if "rfc3987_syntax" in sys.modules and sys.modules["rfc3987_syntax"] is None:
                del sys.modules["rfc3987_syntax"]
    else:
        widget = go.FigureWidget
    figure: go.Figure = widget(traces)
    return figure


def _annotations_under(store: Store, root: str) -> list[Annotation]:
    """The annotations at or under ``root``, read through a connection of this thread's own."""
    with Ledger.open(store) as ledger:
        return ledger.annotations(under=root)


class Annotator:
    """Browse a classified snapshot and record decisions in the ledger (see the module doc).

    Args:
        root: the scanned root (default: the latest scan in the store).
        store: the store.
        scan_id: a specific scan (default: the latest of ``root``).
        page: how many entries of a directory to list at once.
        figure_widget: False to build a plain ``go.Figure`` (no front-end needed).
    """

    @without_collection
    def __init__(
        self,
        root: str | None = None,
        *,
        store: api.StoreArg = None,
        scan_id: str | None = None,
        page: int = 40,
        figure_widget: bool = True,
    ) -> None:
        self.store = api.open_store(store)
        self.info = views.resolve_scan(root, store=self.store, scan_id=scan_id)
        self.root = self.info.root
        # kept open for the widget's life: every write goes through it, so its data_version
        # changes only when someone else writes (then the tally reads the ledger again)
        self._ledger = Ledger.open(self.store)
        weakref.finalize(self, self._ledger.close)  # closed with the widget, never left open
        # the annotations are read on a thread of their own (its own connection: making 100k
        # of them is Python's work, loading the snapshot mostly Arrow's and DuckDB's), as of
        # this version: a write after it shows in the version, and the tally reads again
        self._ledger_version = self._ledger.data_version()
        reader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hygiene-nb-ledger")
        annotations = reader.submit(_annotations_under, self.store, self.root)
        reader.shutdown(wait=False)
        # paths computed once; one chunk, so the plan summary's index shares its buffers
        self.table = _one_chunk_with_paths(
            api.classify_snapshot(store=self.store, scan_id=self.info.scan_id, encoded=True)
        )
        # row → exact bytes, for the few names that are not valid UTF-8 (the ledger is keyed by
        # the bytes; the text shows them escaped, so it may read like another, literal name)
        odd_mask = pc.or_(
            pc.is_valid(self.table.column("name_raw")), pc.is_valid(self.table.column("parent_raw"))
        )
        odd_rows = np.flatnonzero(pc.fill_null(odd_mask, False).to_numpy(zero_copy_only=False))
        odd = self.table.take(pa.array(odd_rows, type=pa.int64())).to_pylist()
        self._raw: dict[int, bytes] = {
            int(i): raw_path(row) for i, row in zip(odd_rows, odd, strict=True)
        }
        self._paths = self.table.column("path")
        self._kinds = self.table.column("kind")
        # a directory's rows, as a browse frame, at each drill-in
        self._by_parent = views.TableIndex(self.table)
        # display text → every row showing it, where one of them is not valid UTF-8
        texts = sorted({row["path"] for row in odd})
        self._rows_of_text: dict[str, list[int]] = {}
        if texts:
            shown = pc.is_in(self._paths, value_set=pa.array(texts, pa.string()))
            for i in np.flatnonzero(pc.fill_null(shown, False).to_numpy(zero_copy_only=False)):
                self._rows_of_text.setdefault(self._path_at(int(i)), []).append(int(i))
        self.now_ns = api.scan_time_ns(self.info)
        self.page = page
        self.cwd = self.root  # the text shown; the exact bytes are ``cwd_raw``
        self.cwd_raw = os.fsencode(self.root)
        self.selected: set[bytes] = set()  # exact path bytes
        self.decisions: dict[str, str] = {}  # by display text, for the treemap and tidying
        self.notes: dict[str, str] = {}
        self.exact_decisions: dict[bytes, str] = {}  # by exact bytes: what the rows show
        self.exact_notes: dict[bytes, str] = {}
        self._organized: pd.DataFrame | None = None
        # built once, then kept: the rows in the order of their paths (the table's own path
        # column, read where a binary search compares), to find a path's row and its subtree;
        # sorted while the ledger is read and tallied, so that no click waits for it
        self._index = SnapshotIndex(self.table)
        self._index.sort_soon()
        # the directory digests, read once (computed once per snapshot, the first time)
        self._digests = SnapshotDigests(self.store, self.info)
        self._nodes: tuple[str, pd.DataFrame] | None = None  # cwd, its treemap nodes
        self._decided_nodes: tuple[tuple[str, int], pd.DataFrame] | None = None
        self._drawn: str | None = None  # the directory whose boxes the treemap shows
        self._version = 0  # counts decision changes
        self._load_ledger(annotations.result())
        self.rows: list[_Row] = []  # the rows listed now: the first ones of ``_pool``
        self._pool: list[_Row] = []
        self._crumbs: list[W.Button] = []  # the breadcrumb's buttons, made once
        self._crumb_targets: list[bytes] = []

        self.breadcrumb = W.HBox()
        self.up_button = W.Button(description="↑ up", layout=W.Layout(width="70px"))
        self.up_button.on_click(lambda _b: self.up())
        self.sort = W.Dropdown(
            options=SORTS, value="bytes", description="sort", layout=W.Layout(width="160px")
        )
        self.risk = W.Dropdown(
            options=(_ALL, *RISKS), value=_ALL, description="risk", layout=W.Layout(width="170px")
        )
        groups = sorted(
            g for g in pc.unique(self.table.column("group")).to_pylist() if g is not None
        )
        self.group = W.Dropdown(
            options=(_ALL, *groups), value=_ALL, description="group", layout=W.Layout(width="220px")
        )
        self.min_size = W.Dropdown(
            options=list(SIZE_FILTERS),
            value="any size",
            description="size",
            layout=W.Layout(width="180px"),
        )
        self.min_age = W.Dropdown(
            options=list(AGE_FILTERS),
            value="any age",
            description="age",
            layout=W.Layout(width="230px"),
        )
        for control in (self.sort, self.risk, self.group, self.min_size, self.min_age):
            control.observe(lambda _ch: self.refresh(), names="value")
        self.select_all_box = W.Checkbox(value=False, description="select all listed", indent=False)
        self.select_all_box.observe(lambda ch: self.select_all(bool(ch["new"])), names="value")
        self.batch_buttons = {
            d: W.Button(description=f"{d} selected", layout=W.Layout(width="auto"))
            for d in (*DECISIONS, "clear")
        }
        for d, button in self.batch_buttons.items():
            button.on_click(lambda _b, d=d: self.decide_selected(None if d == "clear" else d))
        # a batch on entries that are not all safe waits for this confirmation
        self.pending: tuple[list[bytes], str | None] | None = None
        self.confirm_text = W.HTML()
        self.confirm_button = W.Button(description="confirm", button_style="danger")
        self.confirm_button.on_click(lambda _b: self.confirm_batch())
        self.cancel_button = W.Button(description="cancel")
        self.cancel_button.on_click(lambda _b: self.cancel_batch())
        self.confirm_box = W.VBox(
            [self.confirm_text, W.HBox([self.confirm_button, self.cancel_button])],
            layout=W.Layout(display="none", border="1px solid #b35806", padding="4px"),
        )
        self.confirm_box.add_class("hygiene-confirm")
        self.listing = W.VBox()
        self.more = W.Label()
        self.summary = W.HTML()
        self.status = W.Label()
        self.status.add_class("hygiene-status")  # wraps (see ``_STATUS_STYLE``), never cut
        self.export_button = W.Button(
            description="Export plan", button_style="primary", icon="file-export"
        )
        self.export_button.on_click(lambda _b: self.export_plan())
        self.export_out = W.HTML()
        self.export_out.add_class("hygiene-export")
        self.export_out.layout.width = "100%"  # its commands scroll inside it, never past it
        self.legend = W.HTML()  # the treemap's key, drawn with it (``_redraw_tree``)
        self.tidy = W.HTML()  # organization suggestions under the current directory
        self.tidy_toggle = W.ToggleButton(
            value=False,
            description="tidying suggestions",
            tooltip="names and places for scattered logs, exports and scratch files",
        )
        self.tidy_toggle.observe(lambda _ch: self._tidy(), names="value")
        trace = treemap_trace(self.tree_nodes())
        # no path bar: the breadcrumb is the widget's. plotly.js draws the bar while it zooms
        # into a clicked box, from per-box border widths it reads as NaN (a console error
        # per frame), and the boxes drawn next are the clicked directory's anyway
        trace.pathbar = {"visible": False}
        self.fig: go.Figure = _figure_widget([trace]) if figure_widget else go.Figure([trace])
        self.fig.update_layout(margin={"t": 10, "l": 0, "r": 0, "b": 0}, height=420)
        if figure_widget:
            self.fig.data[0].on_click(self.on_tree_click)
        self.refresh()
        _ = self._index.order  # the sort started above is done before the widget is shown

    # -- state -------------------------------------------------------------------------------

    def _read_ledger(self) -> list[Annotation]:
        """The annotations under the root, noting the ledger's version they were read at."""
        self._ledger_version = self._ledger.data_version()  # first: a write after it shows
        return self._ledger.annotations(under=self.root)

    def _load_ledger(self, found: list[Annotation]) -> None:
        # the plan summary, kept as decisions change
        self._tally = PlanTally(self.table, found, root=self.root, index=self._index)
        self.decisions = {a.path: str(a.decision) for a in found if a.decision in DECISIONS}
        self.notes = {a.path: a.note for a in found if a.note}
        self.exact_decisions = {
            a.path_raw: str(a.decision) for a in found if a.decision in DECISIONS
        }
        self.exact_notes = {a.path_raw: a.note for a in found if a.note}
        self.stale = api.stale_decisions(found, self.info, store=self.store)

    def exact_of_row(self, row: int) -> bytes:
        """The exact path bytes of the snapshot row ``row``."""
        found = self._raw.get(row)
        return found if found is not None else self._path_at(row).encode()

    def _path_at(self, row: int) -> str:
        """The display text of the path of snapshot row ``row``."""
        return str(self._paths[row].as_py())

    def _row_of(self, path: str | bytes) -> int | None:
        """The row of ``path`` (exact bytes, or a display text only one entry shows)."""
        text = display_path(path) if isinstance(path, bytes) else path
        rows = self._rows_of_text.get(text)
        if rows is None:
            rows = self._index.named(text)
        if isinstance(path, bytes):
            rows = [i for i in rows if self.exact_of_row(i) == path]
        return rows[0] if len(rows) == 1 else None

    def exact(self, path: str | bytes) -> bytes:
        """The exact bytes ``path`` stands for.

        Bytes are taken as they are; a display text only when no two entries show it.

        Raises:
            AmbiguousName: two entries of the snapshot display as ``path``.
        """
        if isinstance(path, bytes):
            return path
        rows = self._rows_of_text.get(path)
        if rows is not None and len(rows) > 1:
            raise AmbiguousName(
                f"{len(rows)} entries display as {path}; act on its row (each row carries its "
                "exact name), or give the exact bytes"
            )
        if rows:
            return self.exact_of_row(rows[0])
        return path.encode("utf-8", "surrogateescape")

    def age_days(self, mtime_ns: Any) -> float | None:
        """Days between ``mtime_ns`` and the scan (None when unknown)."""
        if mtime_ns is None or pd.isna(mtime_ns):
            return None
        return max(0.0, (self.now_ns - int(mtime_ns)) / _NS_PER_DAY)

    def left_out(self, path: bytes) -> Exclusion | None:
        """Why the delete decision on ``path`` (exact bytes) cannot be a plan candidate now.

        None when it can (or it is no delete decision). The reasons the snapshot and the
        ledger give (``PlanTally.left_out``): protected, a keep inside, not read completely;
        what only the disk can say is known at export.
        """
        return self._tally.left_out(path)

    def listed(self) -> pd.DataFrame:
        """The current directory's children after the filters, in the chosen order (all pages)."""
        kids = self._by_parent.children(self.cwd)
        if self._raw and len(kids):  # a look-alike directory's children are not these
            mine = [os.path.dirname(self.exact_of_row(int(i))) == self.cwd_raw for i in kids.index]
            kids = kids[np.array(mine, dtype=bool)]
        if self.risk.value != _ALL:
            kids = kids[kids["risk"] == self.risk.value]
        if self.group.value != _ALL:
            kids = kids[kids["group"] == self.group.value]
        floor = SIZE_FILTERS[self.min_size.value]
        if floor:
            kids = kids[kids["bytes"].fillna(0) >= floor]
        days = AGE_FILTERS[self.min_age.value]
        if days:
            newest = self.now_ns - days * _NS_PER_DAY
            kids = kids[kids["latest_mtime_ns"].fillna(np.iinfo(np.int64).max) <= newest]
        key = self.sort.value
        if key == "name":
            return kids.sort_values("name")
        column = {"bytes": "bytes", "files": "files", "age": "latest_mtime_ns"}[key]
        ascending = key == "age"  # oldest first
        return kids.sort_values([column, "name"], ascending=[ascending, True], na_position="last")

    def tree_nodes(self) -> pd.DataFrame:
        """The treemap nodes of the current directory: itself and its children (≤ 2,000).

        Only one level, so every box is a leaf for plotly.js: a click on a box with drawn
        children zooms in the browser, and that animation's hover events replace the click in
        the widget's pending update before it reaches ``on_tree_click`` (seen in a real
        browser; the browser test pins it).
        """
        if self._nodes is None or self._nodes[0] != self.cwd:  # boxes: once per directory
            nodes = views.treemap_nodes(None, self.cwd, index=self._by_parent, levels=1)
            self._nodes = self.cwd, nodes
        key = (self.cwd, self._version)
        if self._decided_nodes is None or self._decided_nodes[0] != key:  # borders: per decision
            nodes = self._nodes[1].copy()
            covering = views.decided_rows(pa.array(nodes["id"], pa.string()), self.decisions)
            nodes["decision"] = [
                None if i.endswith("/(other)") else d
                for i, d in zip(nodes["id"], covering, strict=True)
            ]
            self._decided_nodes = key, nodes
        return self._decided_nodes[1]

    def plan_summary(self) -> dict[str, int]:
        """What a plan exported now would hold: counts and reclaimable bytes (never doubled).

        A tally of the ledger, kept as this widget decides; read again from the ledger only
        when another connection has written to it since.
        """
        if self._ledger.data_version() != self._ledger_version:
            self._tally.resync(self._read_ledger())
        return self._tally.summary()

    # -- actions (the widgets call these) ---------------------------------------------------

    def open(self, directory: str | bytes) -> None:
        """Make ``directory`` (a directory inside the root) the one listed and drawn.

        ``directory`` is exact bytes, or a display text no other entry shows.
        """
        shown = display_path(directory) if isinstance(directory, bytes) else directory
        if not isinstance(directory, bytes) and len(self._rows_of_text.get(directory, ())) > 1:
            self.status.value = (
                f"ambiguous-name: two entries display as {shown}; open it from its row"
            )
            return
        row = self._row_of(directory)
        if row is None or self._kinds[row].as_py() != "dir":
            self.status.value = f"{shown} is not a directory of this snapshot"
            return
        self.cwd = self._path_at(row)
        self.cwd_raw = self.exact_of_row(row)
        self.selected.clear()
        self.select_all_box.value = False
        self.status.value = ""  # what it said was about the directory left
        self.refresh()

    def up(self) -> None:
        """List the parent of the current directory (never above the root)."""
        if self.cwd != self.root:
            self.open(os.path.dirname(self.cwd_raw))

    def select(self, path: str | bytes, on: bool) -> None:
        """Add ``path`` to (or take it from) the selection a batch decision applies to."""
        try:
            exact = self.exact(path)
        except AmbiguousName as exc:
            self.status.value = f"{exc.code}: {exc.message}"
            return
        if on:
            self.selected.add(exact)
        else:
            self.selected.discard(exact)

    def select_all(self, on: bool = True) -> None:
        """Select (or unselect) every entry listed now, on every page."""
        self.selected = self._listed_exact() if on else set()
        for row in self.rows:
            row.check.value = row.path_raw in self.selected

    def _listed_exact(self) -> set[bytes]:
        return {self.exact_of_row(int(i)) for i in self.listed().index}

    def decide(self, paths: Iterable[str | bytes], decision: str | None) -> bool:
        """Write ``decision`` (None clears it) for ``paths`` to the ledger now, then redraw.

        ``paths`` are exact bytes (what the rows give), or display texts only one entry shows.

        Returns:
            Whether it was written (else the status line says why not).
        """
        paths = list(paths)
        if not paths:
            self.status.value = "nothing selected"
            return False
        try:
            exact = list(dict.fromkeys(self.exact(path) for path in paths))
            written = api.annotate(
                exact,
                store=self.store,
                decision=decision,
                set_note=False,
                snapshot=self.info.scan_id,  # what is on screen is what was decided
                digests=self._digests_of(exact),
                ledger=self._ledger,
            )
            self.stale.difference_update(exact)
        except HygieneError as exc:
            self.status.value = f"{exc.code}: {exc.message}"
            return False
        self._tallied(exact, written)
        self._version += 1  # the treemap's borders change
        self._organized = None  # a delete decision takes a file out of the suggestions
        for raw in exact:
            if decision is None:
                self.decisions.pop(display_path(raw), None)
                self.exact_decisions.pop(raw, None)
            else:
                self.decisions[display_path(raw)] = decision
                self.exact_decisions[raw] = decision
        if self.export_out.value:  # the plan shown holds the decisions before this one
            self.export_out.value = (
                "Decisions changed since the last export: <i>Export plan</i> again for a plan "
                "that holds them."
            )
        what = decision or "cleared"
        self.status.value = (
            f"{what}: {fmt.counted(len(exact), 'entry', 'entries')}"
            + self._why_not(exact, decision)
        )
        changed = set(exact)
        for row in self.rows:  # the listing stays: only these rows change
            if row.path_raw in changed:
                row.show_decision()
        self._redraw_tree()
        self._tidy()
        self._show_summary()
        return True

    def _why_not(self, exact: list[bytes], decision: str | None) -> str:
        """What the status line adds: which decisions a plan would leave out, and why."""
        if decision == "delete":
            left = [x for x in map(self.left_out, exact) if x is not None]
            if len(left) == 1 and len(exact) == 1:
                return f" · not a plan candidate: {left[0].message}"
            if left:
                codes = Counter(x.code for x in left)
                mix = ", ".join(f"{_short_reason(c)}: {n}" for c, n in codes.most_common())
                return f" · {len(left)} of them not plan candidates ({mix}; reasons on each row)"
        if decision == "keep":  # a keep inside a directory marked delete takes it out
            above = {a for raw in exact for a in _ancestors(raw, os.fsencode(self.root))}
            left = [
                x
                for a in sorted(above)
                if self.exact_decisions.get(a) == "delete"
                for x in [self.left_out(a)]
                if x is not None
            ]
            if left:
                return (
                    f" · the delete of {left[0].path} is no plan candidate now: {left[0].message}"
                )
        return ""

    def _tallied(self, exact: list[bytes], written: list[Annotation]) -> None:
        """Tally what was just written for ``exact``, as the ledger read under the root has it."""
        inside = self.root.rstrip("/") + "/"  # what ``annotations(under=root)`` matches
        here = [a for a in written if a.path == self.root or a.path.startswith(inside)]
        self._tally.update(here, gone=exact)

    def _digests_of(self, exact: list[bytes]) -> dict[bytes, str]:
        """The digests of these entries in the snapshot on screen, from its rows."""
        rows = [row for row in map(self._row_of, exact) if row is not None]
        return self._digests.of_rows(self.table.take(pa.array(rows, type=pa.int64())))

    def decide_selected(self, decision: str | None) -> bool:
        """Apply ``decision`` to every selected entry listed now (all pages), at once.

        Entries selected and then filtered out of view are left as they were: a batch acts
        only on what is listed, and the status line says how many it touched. When some of
        them are not ``safe``, nothing is written yet: the confirmation shows their risk mix
        (entries and bytes per risk) and waits for ``confirm_batch`` (or ``cancel_batch``).

        Returns:
            Whether it was written now.
        """
        self._hide_confirmation()
        listed = self._listed_exact()
        chosen = sorted(self.selected & listed)
        if not chosen:
            hidden = len(self.selected - listed)
            self.status.value = "nothing selected" + (" is listed now" if hidden else "")
            self._unselect()
            return False
        mix = self._risk_mix(chosen)
        if set(mix) - {"safe"}:
            self.pending = chosen, decision
            self.confirm_text.value = self._confirmation(chosen, decision, mix)
            self.confirm_box.layout.display = "flex"
            self.status.value = "confirm or cancel the batch: nothing is written yet"
            return False
        return self._apply_batch(chosen, decision)

    def confirm_batch(self) -> bool:
        """Write the batch the confirmation shows (see ``decide_selected``)."""
        if self.pending is None:
            self.status.value = "no batch is waiting for a confirmation"
            return False
        chosen, decision = self.pending
        self._hide_confirmation()
        return self._apply_batch(chosen, decision)

    def cancel_batch(self) -> None:
        """Drop the batch waiting for a confirmation: the ledger stays as it was."""
        waiting = self.pending is not None
        self._hide_confirmation()
        if waiting:
            self.status.value = "batch cancelled: nothing written (the selection stays)"

    def _hide_confirmation(self) -> None:
        self.pending = None
        self.confirm_text.value = ""
        self.confirm_box.layout.display = "none"

    def _apply_batch(self, chosen: list[bytes], decision: str | None) -> bool:
        hidden = len(self.selected - set(chosen))
        written = self.decide(chosen, decision)
        if written:
            what = decision or "cleared"
            extra = self.status.value.partition(" · ")[2]
            self.status.value = (
                f"{what}: {fmt.counted(len(chosen), 'listed entry', 'listed entries')}"
            )
            if hidden:
                self.status.value += f" ({hidden} selected but not listed now: left as they were)"
            if extra:
                self.status.value += f" · {extra}"
        self._unselect()
        return written

    def _unselect(self) -> None:
        self.selected.clear()
        self.select_all_box.value = False
        for row in self.rows:
            row.check.value = False

    def _risk_mix(self, chosen: list[bytes]) -> dict[str, tuple[int, int]]:
        """Risk → (entries, bytes) of ``chosen``, in the order of ``RISKS``.

        Each entry counts under its own verdict (what removing it whole means), with the
        bytes of all it holds.
        """
        listed = self.listed()
        exact = [self.exact_of_row(int(i)) for i in listed.index]
        pick = np.isin(np.array(exact, dtype=object), np.array(chosen, dtype=object))
        rows = listed[pick]
        mix: dict[str, tuple[int, int]] = {}
        for risk, size in zip(rows["risk"].astype(str), rows["bytes"].fillna(0), strict=True):
            n, b = mix.get(risk, (0, 0))
            mix[risk] = n + 1, b + int(size)
        order = {r: i for i, r in enumerate(RISKS)}
        return dict(sorted(mix.items(), key=lambda kv: order.get(kv[0], len(order))))

    def _confirmation(
        self, chosen: list[bytes], decision: str | None, mix: dict[str, tuple[int, int]]
    ) -> str:
        what = f"mark {decision}" if decision else "clear the decision of"
        items = "".join(
            f"<li><span style='background:{RISK_COLORS.get(r, RISK_COLORS[''])};"
            f"color:{RISK_INK.get(r, RISK_INK[''])};padding:0 4px'>{html.escape(r)}"
            f"</span> {fmt.counted(n, 'entry', 'entries')}, {fmt.human_bytes(b)} "
            f"<span style='color:#666'>({fmt.exact_bytes(b)})</span></li>"
            for r, (n, b) in mix.items()
        )
        unsafe = sum(n for r, (n, _) in mix.items() if r != "safe")
        return (
            f"<b>{html.escape(what)} {fmt.counted(len(chosen), 'listed entry', 'listed entries')}?"
            f"</b> {fmt.counted(unsafe, 'entry is', 'entries are')} not <i>safe</i>:"
            f"<ul style='margin:2px 0'>{items}</ul>"
            "Each entry counts under its own verdict (what removing it whole means). "
            "Nothing is written until you confirm; cancel leaves every decision as it is."
        )

    def set_note(self, path: str | bytes, note: str) -> None:
        """Write the note of ``path`` to the ledger now (an empty note clears it)."""
        try:
            exact = self.exact(path)
            written = api.annotate(
                [exact],
                store=self.store,
                note=note or None,
                set_decision=False,
                ledger=self._ledger,
            )
        except HygieneError as exc:
            self.status.value = f"{exc.code}: {exc.message}"
            return
        self._tallied([exact], written)  # a note rewrites who decided (``by``)
        text = display_path(exact)
        if note:
            self.notes[text] = note
            self.exact_notes[exact] = note
        else:
            self.notes.pop(text, None)
            self.exact_notes.pop(exact, None)
        self.status.value = f"note saved on {os.path.basename(text)}"

    def on_tree_click(self, trace: Any, points: Any, _state: Any = None) -> None:
        """A treemap click: drill into the clicked directory (or up, on the view's own root)."""
        if not points.point_inds:
            return
        node = str(trace.ids[points.point_inds[0]])
        if node == self.cwd:
            self.up()
        elif node.endswith("/(other)"):
            self.status.value = "that box holds the smaller entries; sort or filter to list them"
        else:
            self.open(node)

    def export_plan(self) -> api.PlanResult | None:
        """Write the plan file for the delete decisions; show where it is and how to run it."""
        try:
            result = api.make_plan(self.root, store=self.store, scan_id=self.info.scan_id)
        except HygieneError as exc:
            self.export_out.value = f"<b>{exc.code}</b>: {html.escape(exc.message)}"
            return None
        self.export_out.value = _export_html(result, self.plan_summary())
        return result

    # -- drawing -----------------------------------------------------------------------------

    def refresh(self) -> None:
        """Redraw the breadcrumb, the listing, the treemap and the plan summary."""
        self._hide_confirmation()  # what it listed may not be listed any more
        self._breadcrumb()
        listed = self.listed()
        entries = list(listed.head(self.page).itertuples())
        while len(self._pool) < len(entries):
            self._pool.append(_Row(self))
        for row, entry in zip(self._pool, entries, strict=False):
            row.show(entry)
        self.rows = self._pool[: len(entries)]
        self.listing.children = [row.box for row in self.rows]
        hidden = len(listed) - len(self.rows)
        self.more.value = f"… and {hidden} more (sort or filter to see them)" if hidden > 0 else ""
        self._redraw_tree()
        self._tidy()
        self._show_summary()

    def _show_summary(self) -> None:
        s = self.plan_summary()
        left = f", {s['excluded']} left out (⚠ on the row says why)" if s["excluded"] else ""
        self.summary.value = (
            f"<b>Plan now</b>: {fmt.thousands(s['delete_count'])} delete, "
            f"{fmt.thousands(s['keep_count'])} keep, "
            f"{fmt.thousands(s['unsure_count'])} unsure, "
            f"{fmt.thousands(s['unreviewed_count'])} unreviewed · "
            f"{fmt.counted(s['candidates'], 'candidate')} would reclaim "
            f"{fmt.human_bytes(s['reclaim_bytes'])} "
            f"({fmt.exact_bytes(s['reclaim_bytes'])}, each inode once){left}"
        )

    def tidy_suggestions(self) -> pd.DataFrame:
        """Organization suggestions for kept files under the current directory (suggestions)."""
        if self._organized is None:
            # the whole frame, made for this and not kept
            frame = views.browse_frame(self.table)
            self._organized = organize(self.table, frame, self.decisions, self.root)
        inside = self.cwd.rstrip("/") + "/"
        found = self._organized
        return found[found["path"].str.startswith(inside)]

    def _tidy(self) -> None:
        if not self.tidy_toggle.value:  # computed on demand: about a second on 1M entries
            self.tidy.value = ""
            return
        found = self.tidy_suggestions()
        if found.empty:
            self.tidy.value = ""
            return
        items = "".join(
            f"<li><code>{html.escape(os.path.relpath(p, self.cwd))}</code> → "
            f"<code>{html.escape(os.path.relpath(s, self.root))}</code>: {html.escape(r)}</li>"
            for p, s, r in zip(
                found["path"].head(10),
                found["suggested"].head(10),
                found["reason"].head(10),
                strict=True,
            )
        )
        more = f" (10 of {len(found)})" if len(found) > 10 else ""
        self.tidy.value = (
            f"<b>Tidying suggestions{more}</b> (suggestions only: nothing is moved)<ul>{items}</ul>"
        )

    def _breadcrumb(self) -> None:
        root = os.fsencode(self.root)
        rel = os.path.relpath(self.cwd_raw, root)
        parts = [] if rel == b"." else rel.split(b"/")
        targets = [root] + [os.path.join(root, *parts[: i + 1]) for i in range(len(parts))]
        self._crumb_targets = targets  # exact bytes: a look-alike directory is not this one
        while len(self._crumbs) < len(targets):  # made once, shown again for each directory
            place = len(self._crumbs)
            crumb = W.Button(layout=W.Layout(width="auto"))
            crumb.on_click(lambda _b, i=place: self.open(self._crumb_targets[i]))
            self._crumbs.append(crumb)
        for crumb, target in zip(self._crumbs, targets, strict=False):
            shown = display_path(target)
            crumb.description = self.root if target == root else os.path.basename(shown)
            crumb.tooltip = shown
        self.breadcrumb.children = [self.up_button, *self._crumbs[: len(targets)]]

    def _redraw_tree(self) -> None:
        nodes = self.tree_nodes()
        self.legend.value = _legend(nodes)
        trace = self.fig.data[0]
        if self._drawn == self.cwd:  # the same boxes: only what decisions change
            customdata, line = treemap_decisions(nodes)
            with self.fig.batch_update():
                trace.customdata = customdata
                trace.marker.line = line
            return
        new = treemap_trace(nodes)
        with self.fig.batch_update():
            for prop in ("ids", "labels", "parents", "values", "customdata", "marker"):
                trace[prop] = new[prop]
            trace.level = self.cwd
        self._drawn = self.cwd

    @property
    def widget(self) -> W.Widget:
        """The whole annotation panel, to display in a notebook."""
        header = W.HTML(
            _STATUS_STYLE + f"<b>{html.escape(self.root)}</b> · snapshot "
            f"{html.escape(self.info.scan_id)} "
            f"({html.escape(self.info.finished_at)})"
        )
        filters_layout = W.Layout(flex_flow="row wrap")
        filters = W.HBox(
            [self.sort, self.risk, self.group, self.min_size, self.min_age], layout=filters_layout
        )
        batch = W.HBox([self.select_all_box, *self.batch_buttons.values()], layout=filters_layout)
        parts: list[W.Widget] = [
            header,
            self.breadcrumb,
            filters,
            batch,
            self.confirm_box,
            self.listing,
            self.more,
            self.status,
            self.summary,
            W.HBox([self.export_button, self.tidy_toggle]),
            self.export_out,
            self.tidy,
        ]
        if isinstance(self.fig, W.DOMWidget):
            parts[2:2] = [self.fig, self.legend]
        return W.VBox(parts)


def _ancestors(raw: bytes, root: bytes) -> Iterable[bytes]:
    """The directories above ``raw`` up to ``root`` (itself included), nearest first."""
    parent = os.path.dirname(raw)
    while parent != raw and (parent == root or parent.startswith(root.rstrip(b"/") + b"/")):
        yield parent
        raw, parent = parent, os.path.dirname(parent)


def _legend(nodes: pd.DataFrame) -> str:
    """The treemap's key, the report's own (``treemap_key``): the fills drawn, the borders used."""
    key = treemap_key(nodes) or "&nbsp;"  # (pre-wrap keeps the two spaces between entries)
    return f"<div class='hygiene-legend' style='font-size:12px;white-space:pre-wrap'>{key}</div>"


# a label is one line cut to its width; the status line says why a plan leaves an entry out,
# which takes more than one line at times
_STATUS_STYLE = (
    "<style>.hygiene-status.widget-label{white-space:normal;height:auto;line-height:1.4;"
    "overflow:visible}</style>"
)
# the export wraps its sentences; a path or command is one line that scrolls sideways. The
# HTML widget's content box is a flex item, which grows to its widest line unless told not to
_STYLE = "<style>.hygiene-export .widget-html-content{min-width:0;overflow:hidden}</style>"
_BOX = "white-space:normal;max-width:100%;overflow:hidden"
_PRE = "white-space:pre;overflow-x:auto;max-width:100%;margin:2px 0;padding:4px;background:#f5f5f5"
_COPY_JS = (
    "const pre=this.parentElement.parentElement.querySelector('pre');"
    "navigator.clipboard.writeText(pre.innerText)"
    ".then(()=>{this.textContent='copied'},"
    "()=>{const r=document.createRange();r.selectNodeContents(pre);"
    "const s=getSelection();s.removeAllRanges();s.addRange(r);"
    "this.textContent='selected: Ctrl+C'})"
)


def _command(label: str, hint: str, command: str) -> str:
    """A labelled command with a copy button; one line, scrolled sideways, never wrapped."""
    return (
        "<div class='hygiene-command' style='margin:4px 0'>"
        f"<div><b>{html.escape(label)}</b> <span style='color:#666'>{html.escape(hint)}</span> "
        f"<button type='button' onclick=\"{_attr(_COPY_JS)}\">copy</button></div>"
        f"<pre style='{_PRE}'>{html.escape(command)}</pre></div>"
    )


def _export_html(result: api.PlanResult, summary: dict[str, int]) -> str:
    """What the export shows: what the plan holds, what it left out and why, how to run it."""
    excluded = result.plan.get("excluded", [])
    by_code: dict[str, list[dict[str, Any]]] = {}
    for item in excluded:
        by_code.setdefault(str(item["code"]), []).append(item)
    reasons = "".join(
        f"<li><b>{fmt.counted(len(items), 'entry', 'entries')}: {html.escape(code)}</b> · "
        f"{html.escape(EXCLUSIONS.get(code, ''))}<ul style='margin:0'>"
        + "".join(
            f"<li><code>{html.escape(str(it['path']))}</code>: {html.escape(str(it['message']))}"
            "</li>"
            for it in items[:3]
        )
        + (f"<li>… and {len(items) - 3} more (in the plan file)</li>" if len(items) > 3 else "")
        + "</ul></li>"
        for code, items in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    )
    head = (
        f"<div>Plan <code>{html.escape(result.plan_id)}</code>: "
        f"<b>{fmt.counted(result.candidates, 'candidate')}</b>, "
        f"<b>{fmt.human_bytes(result.reclaim_bytes)}</b> to reclaim "
        f"({fmt.exact_bytes(result.reclaim_bytes)}), "
        f"{fmt.thousands(result.excluded)} left out; expires <span style='white-space:nowrap'>"
        f"{html.escape(result.expires_at)}</span>.</div>"
        f"<div>File:</div><pre style='{_PRE}'>{html.escape(result.plan_path)}</pre>"
    )
    left = f"<div><b>Left out</b><ul style='margin:2px 0'>{reasons}</ul></div>" if reasons else ""
    if result.candidates == 0:
        why = (
            "no entry under the root is marked delete"
            if not summary["delete_count"]
            else "every delete decision was left out (the reasons are above)"
        )
        return (
            f"{_STYLE}<div style='{_BOX}'>{head}{left}<div><b>Nothing can be planned</b>: {why}; "
            "no command to run.</div></div>"
        )
    return (
        f"{_STYLE}<div style='{_BOX}'>{head}{left}<div>Review it, then run in a terminal, "
        "in this order (nothing has moved yet):</div>"
        + _command(
            "1. dry run", "checks every candidate again and moves nothing", result.dry_run_command
        )
        + _command("2. execute", "moves the candidates to the quarantine", result.confirm_command)
        + "</div>"
    )
