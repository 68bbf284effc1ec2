"""Every per-item code, in one table: where it is given, what it means, what to do next.

A plan leaves an entry out, an execution skips a candidate, a restore blocks an item, a listing
flags what a stopped run left: each says so with one of these codes, and the sentence after
the details (the second column) is the one here. ``plan.EXCLUSIONS``, the executor's skip
texts and ``docs/codes.md`` are all drawn from this table; a test checks that every code the
code emits is in it and that the docs show it.

Errors that refuse a whole command (``plan-expired``, ``batch-contains-mount``…) are not here:
they are the exceptions in ``hygiene_nb.errors``, each with its own code.
"""

from __future__ import annotations

from typing import Literal

__all__ = ["ITEM_CODES", "STAGES", "Stage", "codes_markdown", "texts_for"]

Stage = Literal["check", "plan", "execute", "restore", "quarantine"]
STAGES: tuple[Stage, ...] = ("check", "plan", "execute", "restore", "quarantine")
_SHOWN = {"check": "plan, execute"}  # the re-check's codes are given at both stages

# (stage, code) → what it means and what to do next (shown after the item's own details)
ITEM_CODES: dict[tuple[Stage, str], str] = {
    # -- check: the one re-check (``hygiene_nb.recheck``) that plan and execute both run ------
    ("check", "gone"): "it is no longer there; nothing to do",
    ("check", "symlink-on-path"): "a directory on its path is not a real directory any more (a "
    "symlink, say): scan again, review, then plan",
    ("check", "permission-denied"): "it cannot be read or moved with your permissions: check its "
    "permissions (or act as its owner), then plan again",
    ("check", "unreadable-now"): "it cannot be read now (an I/O error, say): check the disk, then "
    "scan and plan again",
    ("check", "contains-mount"): "another filesystem is mounted on it or inside it (a bind mount "
    "of the same filesystem counts; so does a mount that cannot be told apart), and nothing is "
    "ever moved or destroyed through a mount; it stays where it is: unmount it (`umount PATH`), "
    "then scan, review and plan again",
    ("check", "special-file"): "it is a fifo, socket or device: never planned, never moved",
    ("check", "changed-since-review"): "it changed since the snapshot you reviewed (the plan "
    "records what that was); it stays where it is: scan again, review, then plan",
    ("check", "now-protected"): "it is protected now, so it is neither planned nor moved",
    # -- plan: a decision that did not become a candidate ------------------------------------
    ("plan", "protected"): "it is protected and can never be planned",
    ("plan", "symlink"): "it is a symlink: plans never move links; remove it by hand if you "
    "mean to",
    ("plan", "incomplete-scan"): "part of it was not read (unreadable, budget cut, excluded or "
    "another filesystem): scan again without limits, review, then plan",
    ("plan", "contains-kept-entry"): "it contains an entry you marked keep: mark the parts to "
    "delete instead, or change that decision",
    ("plan", "not-in-snapshot"): "the snapshot has no such entry: scan again, review, then plan",
    ("plan", "changed-since-decision"): "what it was decided on is not what is there now: look "
    "at it again and decide again (`hygiene-nb annotate PATH --decision delete`), then plan",
    ("plan", "outside-root"): "it is not inside the plan's root: plan it from its own root",
    ("plan", "decided-by-agent"): "an agent wrote this decision, and an agent may only "
    "propose: review it and decide it yourself (`hygiene-nb annotate PATH --decision delete`, "
    "or the widget)",
    ("plan", "referenced-by"): "files of its project name it, so removing it could break them: "
    "change or remove those references first, or keep it",
    ("plan", "references-unchecked"): "its project could not be searched completely for "
    "references, so it stays: raise reference_max_files / reference_max_text_bytes for this "
    "root in the store's config.toml, or plan a smaller set",
    # -- execute: a candidate that was not moved (it is where it was) -------------------------
    ("execute", "decided-by-agent"): "the plan says an agent decided it, and an agent may only "
    "propose; decide it yourself, then plan again",
    ("execute", "move-failed"): "the move did not happen; it is where it was",
    ("execute", "aborted"): "not attempted; see `hygiene-nb quarantine list` and run a new plan "
    "for it",
    ("execute", "referenced-by"): "files of its project name it now; it stays where it is",
    ("execute", "references-unchecked"): "its project could not be searched completely for "
    "references now; it stays where it is",
    ("execute", "cross-device"): "it is on another filesystem than the store and no quarantine "
    "on its own filesystem can be used; pass --allow-copy to copy it into the store's "
    "quarantine (verified before the original is removed), nothing was copied",
    ("execute", "quarantine-untrusted"): "the quarantine at the top of its filesystem is a "
    "symlink, not ours or open to others; inspect it, fix or move it aside, then plan again. "
    "Nothing was moved",
    ("execute", "copy-unverifiable"): "it holds a symlink, a hard link, a special file, a mount "
    "or an extended attribute (an ACL) the copy cannot keep, so a copy could not be verified; "
    "the original was kept",
    ("execute", "copy-failed"): "the copy could not be made or verified; the original was kept",
    ("execute", "in-use"): "a program has it (or a file in it) open for writing, or whether one "
    "does could not be told; let that program finish or close it, then plan again",
    ("execute", "read-only-filesystem"): "its filesystem is mounted read-only, so nothing on it "
    "can be moved or removed; remount it read-write and plan again. Nothing was copied",
    # -- restore: an item that stays in its batch (or was back already) ----------------------
    ("restore", "already"): "it is back at its original path already; nothing to do",
    ("restore", "target-occupied"): "something is at its original path (a file, an empty "
    "directory, a dangling link); restore never overwrites: move that aside, then restore",
    ("restore", "target-unusable"): "a directory on the way to its original path is a link, a "
    "file or outside the plan's root now; fix the path, then restore",
    ("restore", "target-other-filesystem"): "another filesystem is mounted where it came from "
    "now; restore never changes filesystems silently: unmount it (or restore by hand), then "
    "restore",
    ("restore", "target-filesystem-unknown"): "whether its original place is still the "
    "filesystem it came from cannot be told; it stays in the batch",
    ("restore", "target-unsafe-parent"): "a directory on the way to its original path is owned "
    "by someone else now, or writable by others without the sticky bit; fix its owner or mode, "
    "then restore",
    ("restore", "batch-item-changed"): "what the batch holds is not what was moved there "
    "(another entry); inspect it in the batch before restoring it by hand",
    ("restore", "changed-in-quarantine"): "it was written to in the batch after it was "
    "quarantined (a program kept it open); it was restored with the new bytes, and a purge of "
    "such a batch needs --include-changed",
    ("restore", "missing-from-batch"): "the batch does not hold it any more; look for it with "
    "`hygiene-nb quarantine list`",
    ("restore", "not-in-batch"): "the batch records no item at that path; `hygiene-nb "
    "quarantine list` shows what it holds",
    ("restore", "restore-copy-failed"): "copying it back across filesystems failed or did not "
    "verify; the batch is as it was, try again once the cause is fixed",
    ("restore", "restore-failed"): "the move back did not happen; it stays in the batch",
    ("restore", "restore-leftover"): "an interrupted copy-back left a partial copy beside its "
    "original path; remove that copy, then restore again",
    ("restore", "batch-copy-left"): "it is back, but the batch's copy could not be removed; it "
    "is a duplicate that goes with the batch's purge",
    # -- quarantine list, verify, recover: what a stopped run left ----------------------------
    ("quarantine", "removal-interrupted"): "a run stopped while removing an original after its "
    "verified copy: the original waits beside its place in .hygiene-nb-removing-*, a duplicate "
    "of the copy; `hygiene-nb recover` puts it back",
    ("quarantine", "copy-not-moved"): "a copy in the batch is not the item (it was cut short, or "
    "its original had to stay); the original is in its place, the copy goes with the purge",
    ("quarantine", "still-running"): "the run that holds this plan is alive; let it finish, "
    "then run `hygiene-nb recover` again if it stops",
    ("quarantine", "batch-unreadable"): "the batch's manifest cannot be read, so its records "
    "cannot be finished from it; inspect the batch directory",
}


def texts_for(stage: Stage) -> dict[str, str]:
    """Code → its text, for the codes of one stage (plan and execute: with the re-check's)."""
    shared = ("check",) if stage in ("plan", "execute") else ()
    return {code: text for (where, code), text in ITEM_CODES.items() if where in (stage, *shared)}


def codes_markdown() -> str:
    """The table of ``docs/codes.md`` (generated: a test checks the doc holds it)."""
    lines = ["| code | where | what it means, and what to do next |", "|---|---|---|"]
    for (stage, code), text in sorted(ITEM_CODES.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        lines.append(f"| `{code}` | {_SHOWN.get(stage, stage)} | {text.replace('|', '/')} |")
    return "\n".join(lines)
