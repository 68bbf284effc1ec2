"""Results → what a person reads on a terminal, or the single ``--json`` object.

Every number, date and path a person reads goes through ``hygiene_nb.formatting`` (binary
units, thousands separators, escaped names); the JSON objects keep the exact values.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from hygiene_nb.formatting import (
    counted,
    display_path,
    exact_bytes,
    human_bytes,
    human_date,
    human_datetime,
    noun_for,
    percent,
    shown,
    signed_bytes,
    thousands,
)

if TYPE_CHECKING:  # names for the checker only: the executor is the CLI's to load, and
    # rendering loads neither the models nor the scan index (`--help` starts without them)
    import pandas as pd

    from hygiene_nb.api import AnnotateResult, PlanResult
    from hygiene_nb.executor import (
        BatchInfo,
        ExecuteResult,
        PurgeResult,
        RecoverResult,
        RestoreResult,
        VerifyResult,
    )
    from hygiene_nb.executor.records import Moved
    from hygiene_nb.models import SizedEntry, Summary
    from hygiene_nb.notebook.report import ReportResult
    from hygiene_nb.scan.index import ScanInfo

__all__ = [
    "BREAKDOWNS",
    "annotate_result",
    "batches",
    "batches_json",
    "breakdown_json",
    "counted",
    "emit_json",
    "execute_result",
    "human_bytes",
    "noun_for",
    "plan_result",
    "prune_json",
    "purge_result",
    "recover_result",
    "render_breakdown",
    "render_prune",
    "render_rule_forgotten",
    "render_rule_remembered",
    "render_rules",
    "render_scan",
    "render_snapshots",
    "render_summary",
    "report_result",
    "restore_result",
    "rule_forgotten_json",
    "rule_remembered_json",
    "rules_json",
    "scan_json",
    "shown",
    "snapshots_json",
    "summary_json",
    "verification_line",
    "verify_result",
]


def emit_json(obj: dict[str, Any]) -> None:
    r"""Print one JSON object on stdout (and nothing else), always valid UTF-8.

    A path argument that is not valid UTF-8 reaches Python as lone surrogates; written as they
    are, they would put raw bytes like 0xff on stdout. JSON's own escape (``\udcff``) keeps
    them, and ``json.loads`` gives the same string back.
    """
    text = json.dumps(obj, ensure_ascii=False, sort_keys=True)
    sys.stdout.write(text.encode("utf-8", "backslashreplace").decode("utf-8") + "\n")


def scan_json(info: ScanInfo) -> dict[str, Any]:
    """The ``scan`` JSON object (``scan --json``; its keys are listed in docs/commands.md)."""
    return {
        "status": "done",
        "scan_id": info.scan_id,
        "root": info.root,
        "entries": info.entries,
        "tree_bytes": info.tree_bytes,
        "tree_alloc": info.tree_alloc,
        "tree_files": info.tree_files,
        "partial": info.partial,
        "errors": info.errors,
        "snapshot_path": info.path,
        "seconds": info.options.get("seconds"),
        "walker": info.walker,
    }


def _entries(n: int) -> str:
    return counted(n, "entry", "entries")


def render_scan(info: ScanInfo) -> str:
    """A few lines on what a scan found and where it went."""
    lines = [
        f"scanned {shown(info.root)}: {_entries(info.entries)} in"
        f" {info.options.get('seconds', 0):.1f} s ({info.walker} walker)",
        f"  {human_bytes(info.tree_bytes)} apparent, {human_bytes(info.tree_alloc)} on disk,"
        f" {counted(info.tree_files or 0, 'file')}",
        f"  snapshot {info.scan_id} → {shown(info.path)}",
    ]
    if info.errors:
        lines.append(
            f"  {_entries(info.errors)} could not be read: sizes unknown, not zero"
            " (see `hygiene-nb summary`)."
        )
    if info.partial:
        lines.append(
            "  partial: part of the tree was not read (budget or errors); totals are lower bounds."
        )
    return "\n".join(lines)


def render_snapshots(scans: list[ScanInfo]) -> str:
    """A table of scans, oldest first."""
    if not scans:
        return "no snapshots yet: run `hygiene-nb scan ROOT`."
    lines = [f"{'scan id':<27} {'started (UTC)':<20} {'entries':>10} {'apparent':>10}  root"]
    for s in scans:
        flag = " (partial)" if s.partial else ""
        lines.append(
            f"{s.scan_id:<27} {human_datetime(s.started_at, seconds=True):<20} {s.entries:>10,} "
            f"{human_bytes(s.tree_bytes):>10}  {shown(s.root)}{flag}"
        )
    return "\n".join(lines)


def snapshots_json(scans: list[ScanInfo]) -> dict[str, Any]:
    """What ``hygiene-nb snapshots --json`` prints: every field of every scan."""
    return {"status": "done", "snapshots": [vars(s) for s in scans]}


def prune_json(removed: list[ScanInfo], *, dry_run: bool) -> dict[str, Any]:
    """What ``hygiene-nb snapshots prune --json`` prints."""
    return {
        "status": "dry-run" if dry_run else "done",
        "removed": [{"scan_id": s.scan_id, "root": s.root, "path": s.path} for s in removed],
    }


def render_prune(removed: list[ScanInfo], *, dry_run: bool) -> str:
    """What pruning removed (or would remove)."""
    verb = "would remove" if dry_run else "removed"
    if not removed:
        return "nothing to prune (the latest snapshot of every root always stays)."
    lines = [f"{verb} {counted(len(removed), 'snapshot')}:"]
    lines += [
        f"  {s.scan_id}  {human_datetime(s.started_at, seconds=True)}  {shown(s.root)}"
        for s in removed
    ]
    return "\n".join(lines)


def _entry_line(e: SizedEntry) -> str:
    note = ""
    if e.error:
        note = f"  [{e.error}: unknown]"
    elif e.partial:
        note = "  [partial]"
    elif e.nlink > 1 and e.kind == "file":
        note = f"  [{thousands(e.nlink)} hard links]"
    # a directory shows what it holds, as the treemap colours it; its own verdict beside
    word = e.holds or e.risk
    risk = f"{word:<8} " if word else ""
    if e.holds and e.holds != e.risk and e.rule != "no-rule":
        note += f"  [as a whole: {e.risk}, {e.rule}]"
    return f"  {human_bytes(e.bytes):>10}  {risk}{e.kind:<7} {shown(e.path)}{note}"


def _risk_lines(s: Summary) -> list[str]:
    lines = ["\nrisk mix (own bytes, hard links once):"]
    for level, stats in s.risk.items():
        count = f"{stats.entries:>9,} {noun_for(stats.entries, 'entry', 'entries')}"
        lines.append(f"  {level:<9} {human_bytes(stats.bytes):>10}  {count}")
    safe, caution = s.reclaimable.get("safe"), s.reclaimable.get("caution")
    if safe and caution:
        lines.append(
            f"  freed by deleting every safe entry: {human_bytes(safe.bytes)}"
            f" ({human_bytes(safe.alloc)} on disk); with caution entries too:"
            f" {human_bytes(caution.bytes)}"
        )
    if s.cleanliness and s.cleanliness.no_score:
        lines.append(f"  no score: {s.cleanliness.no_score}")
    elif s.cleanliness:
        c = s.cleanliness
        est = " (estimate: the scan was partial)" if c.estimate else ""
        lines.append(
            f"  cleanliness {c.score}/100{est}: {thousands(c.cleanable)} cleanable,"
            f" {thousands(c.intermediate)} intermediate, {thousands(c.pending)} pending of"
            f" {counted(c.counted, 'file')}"
            " outside protected and dependency directories"
        )
    lines.append(f"  not modified for a year or more: {human_bytes(s.stale_bytes)}")
    if s.groups:
        lines.append("\npattern groups (outermost matches; nested ones counted once):")
        for g in s.groups:
            word = noun_for(g.count, "entry", "entries") + ","
            lines.append(f"  {g.group:<15} {g.count:>7,} {word:<8} {human_bytes(g.bytes):>10}")
    return lines


def render_summary(s: Summary) -> str:
    """The human summary: totals, risk mix, groups, score, largest entries."""
    lines = [
        f"{shown(s.root)} — snapshot {s.scan_id}"
        f" ({human_datetime(s.scanned_at, seconds=True)} UTC)",
        f"  {human_bytes(s.tree_bytes)} apparent, {human_bytes(s.tree_alloc)} allocated on disk"
        f" (hard links counted once)",
        f"  {_entries(s.entries)}: {counted(s.files, 'file')},"
        f" {counted(s.dirs, 'directory', 'directories')}, {counted(s.symlinks, 'symlink')},"
        f" {s.others:,} other",
        f"  filesystem: {human_bytes(s.fs_free)} free of {human_bytes(s.fs_total)}",
    ]
    if s.errors:
        lines.append(f"  {_entries(s.errors)} unreadable: subtrees unknown, not empty")
    if s.excluded:
        lines.append(f"  {_entries(s.excluded)} excluded (not descended, not counted)")
    if s.partial:
        lines.append("  PARTIAL: totals are lower bounds (budget or unreadable entries)")
    lines += _risk_lines(s)
    for title, rows in (
        ("largest direct children", s.children),
        ("largest directories", s.largest_dirs),
        ("largest files", s.largest_files),
    ):
        if rows:
            lines.append(f"\n{title}:")
            lines += [_entry_line(e) for e in rows]
    return "\n".join(lines)


def summary_json(s: Summary) -> dict[str, Any]:
    """The ``summary`` JSON object (``summary --json``; its keys are listed in docs/commands.md)."""
    data = asdict(s)
    data["status"] = "done"
    data["cleanliness_detail"] = data["cleanliness"]
    data["cleanliness"] = s.cleanliness.score if s.cleanliness else None
    # with nothing to count there is no score: null, and the reason beside it
    data["cleanliness_reason"] = s.cleanliness.no_score if s.cleanliness else None
    if s.cleanliness and s.cleanliness.no_score:
        data["cleanliness"] = data["cleanliness_detail"]["score"] = None
    data["largest"] = [
        {
            "path": e.path,
            "bytes": e.bytes,
            "kind": e.kind,
            "risk": e.risk,
            "rule": e.rule,
            "claim": e.claim,
            "confidence": e.confidence,
            "path_b64": e.path_b64,
        }
        for e in s.largest
    ]
    for group in data["groups"]:
        group["entries"] = [
            {"path": e["path"], "bytes": e["bytes"], "risk": e["risk"], "claim": e["claim"],
             "path_b64": e["path_b64"]}
            for e in group["entries"]
        ]  # fmt: skip
    listed = [e for k in ("largest", "largest_files", "largest_dirs", "children") for e in data[k]]
    listed += [e for group in data["groups"] for e in group["entries"]]
    for entry in listed:
        if entry["path_b64"] is None:  # only where a name is not valid UTF-8, as in a plan
            del entry["path_b64"]
    return data


def verification_line(verification: dict[str, Any], status: str) -> str:
    """One line on project verification around an execution (or what it will be)."""
    if verification.get("mode") != "commands":
        return "verification: static-only (no verify command configured for this root)"
    commands = "; ".join(" ".join(c) for c in verification.get("commands", []))
    if status == "dry-run":
        return (
            f"verification: `{commands}` runs before (a failure refuses the plan) and after (a "
            "failure rolls everything back)"
        )
    if status == "rolled-back":
        back = verification.get("rollback", {})
        blocked = back.get("blocked", [])
        return (
            f"verification FAILED after the move: rolled back, "
            f"{counted(back.get('restored', 0), 'item')} restored"
            + (
                f", {len(blocked)} blocked (still in quarantine; see the receipt)"
                if blocked
                else ""
            )
        )
    return f"verification: `{commands}` passed before and after"


def rule_remembered_json(group: str, decision: str, filled: int) -> dict[str, Any]:
    """What ``hygiene-nb rules remember --json`` prints."""
    return {"status": "done", "group": group, "decision": decision, "filled": filled}


def render_rule_remembered(group: str, decision: str, filled: int) -> str:
    """The rule now remembered, and how many entries it decided at once."""
    return f"remembered: {group} → {decision} ({counted(filled, 'entry', 'entries')} filled now)"


def rule_forgotten_json(group: str, removed: int) -> dict[str, Any]:
    """What ``hygiene-nb rules forget --json`` prints."""
    return {"status": "done", "group": group, "removed": removed}


def render_rule_forgotten(group: str, removed: int) -> str:
    """The rule forgotten, and how many of its decisions were taken back."""
    return f"forgot {group}: {counted(removed, 'rule-made decision')} taken back"


def rules_json(rules: dict[str, str]) -> dict[str, Any]:
    """What ``hygiene-nb rules list --json`` prints: pattern group → decision."""
    return {"status": "done", "rules": rules}


def render_rules(rules: dict[str, str]) -> str:
    """One line per remembered rule."""
    return "\n".join(f"{g:<16} {d}" for g, d in rules.items()) or "no remembered rules"


def annotate_result(result: AnnotateResult) -> str:
    """One line per annotation, then what was removed and which paths do not exist now."""
    text = "\n".join(
        f"{a.decision or '-':<7} {shown(a.path)}  {shown(a.note or '')}" for a in result.annotations
    )
    if result.removed:
        text += f"\n{counted(result.removed, 'annotation')} removed (no decision and no note left)."
    for path in result.missing:
        text += (
            f"\nnote: {shown(path)} does not exist now (a plan leaves out what is not in its scan)"
        )
    return text.strip()


def plan_result(result: PlanResult) -> str:
    """Where the plan and its list are, and how to dry-run and confirm it (or why not)."""
    if result.candidates:
        then = (
            "  nothing was moved. Dry run, then confirm:\n"
            f"    {shown(result.dry_run_command)}\n    {shown(result.confirm_command)}"
        )
    elif result.plan["summary"]["delete_count"]:
        then = (
            "  nothing to execute: every delete decision under the root was left out"
            " (the list says why)."
        )
    else:
        then = (
            "  nothing to execute: there is no delete decision under the root"
            " (`hygiene-nb annotate PATH --decision delete`, or the notebook's widget)."
        )
    return "\n".join(
        [
            f"plan {result.plan_id}: {counted(result.candidates, 'candidate')}, "
            f"{human_bytes(result.reclaim_bytes)} freed by deleting, "
            f"{thousands(result.excluded)} excluded (see the list)",
            f"  plan: {shown(result.plan_path)}",
            f"  list: {shown(result.markdown_path)}",
            f"  expires: {result.expires_at}",
            then,
        ]
    )


def report_result(result: ReportResult) -> str:
    """Where the report and its notebook went (and automatic mode's suggestion, if any)."""
    text = f"report: {shown(result.html)}\nnotebook: {shown(result.notebook)}"
    if result.suggested_plan:
        text += f"\nsuggested plan (automatic mode; nothing was moved): {result.suggested_plan}"
    return text


# -- the executor's results --------------------------------------------------------------------


def execute_result(result: ExecuteResult) -> str:
    """What a dry run would move and where, or what a run moved, skipped and recorded."""
    verb = "would move" if result.status == "dry-run" else "moved"
    lines = [
        f"{verb} {thousands(len(result.moved))} of {counted(result.candidates, 'item')}, "
        f"{human_bytes(result.bytes)} ({exact_bytes(result.bytes)})"
    ]
    lines += [f"  {verb:<10} {shown(m.path)}{_by_rule(m)}" for m in result.moved]
    lines += [f"  skip {s.code:<18} {shown(s.path)}: {shown(s.message)}" for s in result.skipped]
    if result.status == "dry-run":
        lines += _destinations(result.moved)
        lines += ["", shown(result.warning), "To confirm:", f"  {shown(result.confirm_command)}"]
    else:
        lines += [f"batch: {result.batch_id}", f"receipt: {shown(result.receipt_path or '')}"]
        if result.plan_state == "issued":
            lines.append(
                f"nothing moved, so plan {result.plan_id} is not used up: fix what the skips "
                "say, then run the same command again"
            )
    lines.append(verification_line(result.verification, result.status))
    return "\n".join(lines)


def _by_rule(moved: Moved) -> str:
    """A mark on an item a remembered rule decided (not a person)."""
    return "  (decided by a remembered rule)" if moved.decided_by == "rule" else ""


def _destinations(moved: list[Moved]) -> list[str]:
    """One line per quarantine a dry run would use, with its item count."""
    counts = Counter((m.dest.quarantine, m.dest.method) for m in moved if m.dest.quarantine)
    how = {"rename": "moved by rename", "copy": "copied, verified, then removed from their place"}
    return [
        f"  into {shown(where)}: {counted(n, 'item')}, {how.get(method, method)}"
        for (where, method), n in sorted(counts.items())
    ]


def verify_result(result: VerifyResult) -> str:
    """The verdict on a receipt, then one line per finding."""
    text = f"{result.status}: {counted(result.moved, 'moved item')} checked"
    text += "".join(f"\n  reappeared at its place: {shown(p)}" for p in result.reappeared)
    text += "".join(f"\n  missing from its batch: {shown(p)}" for p in result.missing_from_batch)
    text += "".join(f"\n  rolled back, yet not at its place: {shown(p)}" for p in result.not_back)
    text += "".join(f"\n  [{r['code']}] {shown(r['message'])}" for r in result.removal_interrupted)
    text += "".join(
        f"\n  changed in its batch after it was quarantined: {shown(p)}"
        for p in result.changed_in_quarantine
    )
    return text + (
        f"\nfree space on the root's filesystem changed by {signed_bytes(result.freed_bytes)}"
        f" ({exact_bytes(result.freed_bytes)}) during"
        " the execution (a quarantine on the same filesystem frees nothing until its batch is"
        " purged, and other programs' writes count too)"
    )


def recover_result(result: RecoverResult) -> str:
    """How many stopped executions were recovered, and what each one's records say now."""
    lines = []
    for p in result.plans:
        if p.status == "running":
            lines.append(f"  [still-running] {shown(p.message)}")
            continue
        lines.append(
            f"  plan {p.plan_id}: {thousands(p.moved)} moved, {thousands(p.skipped)} not moved,"
            " into "
            f"{', '.join(b['batch_id'] for b in p.batches) or 'no batch'}; "
            f"receipt {shown(p.receipt_path or '')}"
        )
        lines += [f"  [{r['code']}] {shown(r['message'])}" for r in p.leftovers]
        if p.status == "incomplete":
            lines.append(f"  [batch-unreadable] {shown(p.message)}")
    return "\n".join([f"recovered {counted(len(result.plans), 'stopped execution')}", *lines])


def batches_json(batches: list[BatchInfo]) -> dict[str, Any]:
    """What ``hygiene-nb quarantine list --json`` prints."""
    return {"status": "done", "batches": [b.to_json() for b in batches]}


def batches(found: list[BatchInfo]) -> str:
    """One line per quarantine batch, with what is wrong with it below."""
    text = "\n".join(
        f"{b.batch_id}  {human_datetime(b.created_at, seconds=True)}"
        f"  {thousands(b.items):>6} {noun_for(b.items, 'item'):<5}"
        f"  {human_bytes(b.bytes):>10}"
        f"  {b.manifest}"
        + "".join(f"\n  [{left['code']}] {shown(left['message'])}" for left in b.leftovers)
        + "".join(f"\n  {shown(p)}" for p in (b.problems if b.manifest == "invalid" else []))
        for b in found
    )
    return text or "no quarantine batches"


def restore_result(result: RestoreResult) -> str:
    """What was (or would be) put back, what stayed in the batch and why."""
    verb = "would restore" if result.status == "dry-run" else "restored"
    lines = [f"{verb} {counted(len(result.restored), 'item')} from {result.batch_id}"]
    lines += [f"  {shown(p)}" for p in result.restored]
    lines += [f"  {b.code:<20} {shown(b.path)}: {shown(b.message)}" for b in result.blocked]
    if result.status == "dry-run" and result.restored:
        lines.append(f"to restore: hygiene-nb restore {result.batch_id} --execute")
    return "\n".join(lines)


def purge_result(result: PurgeResult) -> str:
    """What purging would destroy and the command that does it, or what it destroyed."""
    w, batch_id = result.would_destroy, result.batch_id
    if result.status != "dry-run":
        return f"destroyed {batch_id}: {counted(w['items'], 'item')}, {human_bytes(w['bytes'])}"
    text = (
        f"purging {batch_id} would destroy {counted(w['items'], 'item')}, "
        f"{counted(w['files'], 'file')}, "
        f"{human_bytes(w['bytes'])} (manifest {result.manifest}). This cannot be "
        f"undone. To do it:\n  hygiene-nb purge {batch_id} --execute --confirm-batch-id "
        f"{batch_id} --acknowledge-risk permanent-delete"
        + " --include-changed"
        * bool(result.changed)
    )
    return text + "".join(f"\n  changed after it was quarantined: {p}" for p in result.changed)


# ``summary --by``: the breakdown views' frames (hygiene_nb.query.breakdowns) as a table or JSON.
BREAKDOWNS = ("owner", "group", "type", "category", "age")
_BREAKDOWN_TITLES = {
    "owner": "bytes by owner (user)",
    "group": "bytes by owner (group)",
    "type": "regular files by extension",
    "category": "regular files by category",
    "age": "regular files by modification age",
}


def _json_value(value: Any) -> Any:
    """One cell as JSON: timestamps as ISO-8601, numpy numbers as Python's, NaN/NA as null."""
    import pandas as pd

    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _json_value(v) for k, v in value.items()}
    if isinstance(value, pd.Timestamp):
        return value.isoformat()  # nanoseconds kept: a snapshot records them
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):
        return None
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    return value


def breakdown_json(frame: pd.DataFrame, by: str) -> dict[str, Any]:
    """The ``summary --by`` JSON object: ``root``, ``scan_id``, ``by``, ``partial``, the rows.

    ``partial``: the scan could not read everything, so the figures are lower bounds.
    """
    rows = [
        {str(column): _json_value(value) for column, value in record.items()}
        for record in frame.to_dict("records")
    ]
    return {
        "root": frame.attrs["root"],
        "scan_id": frame.attrs["scan_id"],
        "by": by,
        "partial": bool(frame.attrs.get("partial", False)),
        "rows": rows,
    }


def _table(header: list[str], rows: list[list[str]], left: set[int]) -> list[str]:
    """Columns padded to their widest cell: those in ``left`` left-aligned, the others right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        (
            "  "
            + "  ".join(
                cell.ljust(width) if i in left else cell.rjust(width)
                for i, (cell, width) in enumerate(zip(row, widths, strict=True))
            )
        ).rstrip()
        for row in [header, *rows]
    ]


def _owner_lines(records: list[dict[str, Any]], root: str) -> list[str]:
    header = ["owner", "bytes", "share", "files", "safe", "+caution", "newest", "oldest"]
    rows = [
        [
            shown(str(r["owner"])),
            human_bytes(int(r["bytes"])),
            percent(r["share"]),
            thousands(r["files"]),
            human_bytes(int(r["reclaimable_safe"])),
            human_bytes(int(r["reclaimable_caution"])),
            human_date(r["newest"]),
            human_date(r["oldest"]),
        ]
        for r in records
    ]
    table = _table(header, rows, {0, 6, 7})
    lines = [table[0]]
    for record, line in zip(records, table[1:], strict=True):
        lines.append(line)
        tops = [
            f"{display_path(d['path'], root)} {human_bytes(int(d['bytes']))}"
            for d in record["top_dirs"]
        ]
        if tops:
            lines.append("      in " + ", ".join(tops))
    return lines


def _type_lines(records: list[dict[str, Any]], root: str, by: str) -> list[str]:
    key, second = ("extension", "category") if by == "type" else ("category", "extensions")
    header = [key, second, "files", "bytes", "share", "largest"]
    rows = [
        [
            shown(str(r[key])),
            str(r[second]) if by == "type" else thousands(r[second]),
            thousands(r["files"]),
            human_bytes(int(r["bytes"])),
            percent(r["share"]),
            display_path(str(r["examples"][0]), root) if len(r["examples"]) else "",
        ]
        for r in records
    ]
    return _table(header, rows, {0, 1, 5} if by == "type" else {0, 5})


def _age_lines(records: list[dict[str, Any]], age_by: str | None) -> list[str]:
    header = [*([age_by] if age_by else []), "age", "files", "bytes", "share"]
    rows = [
        [
            *([shown(str(r[age_by]))] if age_by else []),
            str(r["bucket"]),
            thousands(r["files"]),
            human_bytes(int(r["bytes"])),
            percent(r["share"]),
        ]
        for r in records
    ]
    return _table(header, rows, {0, 1} if age_by else {0})


def render_breakdown(frame: pd.DataFrame, by: str, *, age_by: str | None = None) -> str:
    """``summary --by``: a title line, then the view's rows as a table in human units."""
    root = str(frame.attrs["root"])
    title = _BREAKDOWN_TITLES[by] + (f", per {age_by}" if by == "age" and age_by else "")
    lines = [f"{shown(root)} — snapshot {frame.attrs['scan_id']}: {title}"]
    records = [{str(k): v for k, v in r.items()} for r in frame.to_dict("records")]
    if by in ("owner", "group"):
        lines.append("  own bytes, hard links once; safe / +caution: what deleting them would free")
        lines += _owner_lines(records, root)
    elif by in ("type", "category"):
        lines.append("  own bytes, hard links once; largest: the largest such file")
        lines += _type_lines(records, root, by)
    else:
        lines.append("  own bytes, hard links once; age of the mtime when the scan finished")
        lines += _age_lines(records, age_by)
    if not records:
        lines.append("  (nothing to show)")
    if frame.attrs.get("partial"):
        lines.append("  PARTIAL: figures are lower bounds (budget or unreadable entries)")
    return "\n".join(lines)
