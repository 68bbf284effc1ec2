"""Execute: dry run, whole-plan refusals, per-item skips, single use, crash safety, verify."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.errors import HygieneError, Refused
from hygiene_nb.executor import (
    Confirmation,
    execute_plan,
    list_store_batches,
    restore_batch,
    verify_receipt,
)
from hygiene_nb.executor.batches import TREE_NAME, read_manifest
from hygiene_nb.executor.fileops import DIR_FLAGS, LocalFileOps
from hygiene_nb.executor.hooks import CHECKPOINTS, COPY_ONLY, checkpoint
from hygiene_nb.store import Store
from tests.executor.helpers import (
    assert_a_kill_at_loses_nothing,
    confirm_for,
    make_plan,
    snapshot_of,
)
from tests.helpers import write


def test_dry_run_creates_nothing(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log")
    store = Store(world["store"])
    before = snapshot_of(world["root"], world["canary"], store.quarantine, store.receipts)
    result = execute_plan(plan.plan_path, store=store)
    assert result.status == "dry-run"
    assert sorted(m.path for m in result.moved) == sorted(
        [str(world["root"] / "web" / "node_modules"), str(world["root"] / "web" / "app.log")]
    )
    assert "--acknowledge-risk quarantine" in result.confirm_command
    assert {(m.dest.quarantine, m.dest.method) for m in result.moved} == {
        (str(store.quarantine), "rename")
    }
    assert snapshot_of(world["root"], world["canary"], store.quarantine, store.receipts) == before


def test_execute_moves_into_a_batch_and_verifies(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log")
    store = Store(world["store"])
    canary = snapshot_of(world["canary"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    assert result.status == "done" and result.skipped == []
    assert not (world["root"] / "web" / "node_modules").exists()
    batch = store.quarantine / str(result.batch_id)
    moved = batch / "tree" / str(world["root"] / "web" / "node_modules").lstrip("/")
    assert (moved / "pkg" / "index.js").stat().st_size == 3000
    fd = os.open(batch, DIR_FLAGS)
    try:
        doc = read_manifest(fd)
    finally:
        os.close(fd)
    assert doc is not None and {i["state"] for i in doc["items"]} == {"moved"}
    assert verify_receipt(str(result.receipt_path)).status == "verified"
    assert snapshot_of(world["canary"]) == canary
    receipt = json.loads(Path(str(result.receipt_path)).read_text())
    assert oct(os.stat(str(result.receipt_path)).st_mode & 0o777) == "0o600"
    assert receipt["plan_id"] == plan.plan_id and receipt["authorization_id"].startswith("auth-")


def refuse(world: dict[str, Path], plan_path: str, confirm: Confirmation | None) -> str:
    store = Store(world["store"])
    before = snapshot_of(world["root"], world["canary"], store.quarantine)
    with pytest.raises(Refused) as info:
        execute_plan(plan_path, store=store, confirm=confirm)
    assert snapshot_of(world["root"], world["canary"], store.quarantine) == before
    return info.value.code


def test_whole_plan_refusals_touch_nothing(world: dict[str, Path], tmp_path: Path) -> None:
    plan = make_plan(world, "web/node_modules")
    ok = confirm_for(plan)
    assert refuse(world, plan.plan_path, Confirmation(ok.plan_id, ok.plan_digest, None)) == (
        "acknowledgement-missing"
    )
    wrong_id = Confirmation("plan-20260101T000000Z-00000000", ok.plan_digest, "quarantine")
    assert refuse(world, plan.plan_path, wrong_id) == "confirmation-mismatch"
    wrong_digest = Confirmation(ok.plan_id, "sha256:" + "0" * 64, "quarantine")
    assert refuse(world, plan.plan_path, wrong_digest) == "plan-digest-mismatch"
    # the same plan, edited and re-sealed with a fresh digest: not what the store issued
    from hygiene_nb.plan.schema import plan_digest

    doc = json.loads(Path(plan.plan_path).read_text())
    doc["candidates"][0]["note"] = "edited"
    doc["plan_digest"] = plan_digest(doc)
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(doc))
    edited.chmod(0o600)
    assert refuse(world, str(edited), ok) == "plan-digest-mismatch"
    # a plan from another store
    other = tmp_path / "other-store"
    api.scan_root(world["root"], store=other)
    api.annotate([str(world["root"] / "web" / "app.log")], store=other, decision="delete")
    foreign = api.make_plan(world["root"], store=other)
    assert refuse(world, foreign.plan_path, confirm_for(foreign)) == "plan-not-issued"


def test_an_expired_plan_is_refused(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    plan = make_plan(world, "web/node_modules", ttl=60)
    later = datetime.now(UTC) + timedelta(seconds=61)
    monkeypatch.setattr("hygiene_nb.executor.authorize.utc_now", lambda: later)
    assert refuse(world, plan.plan_path, confirm_for(plan)) == "plan-expired"


def test_a_plan_acts_at_most_once(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log")
    store = Store(world["store"])
    execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    write(world["root"] / "web" / "app.log", 40)  # the same name again
    assert refuse(world, plan.plan_path, confirm_for(plan)) == "plan-already-executed"
    assert (world["root"] / "web" / "app.log").exists()


def test_two_concurrent_executions_of_one_plan_move_once(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log", "data/scratch.bin")
    store = Store(world["store"])
    outcomes: list[str] = []

    def run() -> None:
        try:
            result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
            outcomes.append(result.status)
        except HygieneError as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["done", "plan-already-executed"]
    assert len(list(store.quarantine.iterdir())) == 1


def test_a_replaced_root_is_refused(world: dict[str, Path], tmp_path: Path) -> None:
    plan = make_plan(world, "web/app.log")
    os.rename(world["root"], tmp_path / "moved-away")
    write(world["root"] / "web" / "app.log", 40)
    assert refuse(world, plan.plan_path, confirm_for(plan)) == "root-replaced"


@pytest.mark.parametrize("mode", [0o620, 0o602])
def test_a_plan_file_others_can_write_is_refused(world: dict[str, Path], mode: int) -> None:
    plan = make_plan(world, "web/app.log")
    os.chmod(plan.plan_path, mode)
    assert refuse(world, plan.plan_path, confirm_for(plan)) == "plan-untrusted"


def test_a_symlinked_plan_file_is_refused(world: dict[str, Path], tmp_path: Path) -> None:
    plan = make_plan(world, "web/app.log")
    link = tmp_path / "link.json"
    link.symlink_to(plan.plan_path)
    assert refuse(world, str(link), confirm_for(plan)) == "plan-untrusted"


def test_changed_items_are_skipped_and_the_others_move(world: dict[str, Path]) -> None:
    root = world["root"]
    write(root / "x" / "grows", 10)
    write(root / "x" / "goes", 10)
    write(root / "x" / "fifo-later", 10)
    write(root / "x" / "sub" / "deep", 10)
    write(root / "y" / "marked", 10)
    write(root / "z" / "swapped" / "f", 10)
    plan = make_plan(
        world,
        "x/grows",
        "x/goes",
        "x/fifo-later",
        "x/sub",
        "y/marked",
        "z/swapped/f",
        "data/scratch.bin",
    )
    (root / "x" / "grows").write_bytes(b"more than before")
    (root / "x" / "goes").unlink()
    (root / "x" / "fifo-later").unlink()
    os.mkfifo(root / "x" / "fifo-later")
    os.utime(root / "x" / "sub" / "deep", ns=(1, 1))
    write(root / "y" / ".hygiene-nb-keep", 0)
    os.rename(root / "z" / "swapped", world["root"].parent / "elsewhere")
    (root / "z" / "swapped").symlink_to(world["root"].parent / "elsewhere")
    store = Store(world["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    codes = {Path(s.path).name: s.code for s in result.skipped}
    assert codes == {
        "grows": "changed-since-review",
        "goes": "gone",
        "fifo-later": "special-file",
        "sub": "changed-since-review",
        "marked": "now-protected",
        "f": "symlink-on-path",
    }
    assert [m.path for m in result.moved] == [str(root / "data" / "scratch.bin")]
    assert result.status == "partial"
    assert (world["root"].parent / "elsewhere" / "f").exists()  # never reached through the link


def test_cli_exit_codes_for_refused_and_partial(world: dict[str, Path]) -> None:
    root = world["root"]
    write(root / "x" / "grows", 10)
    plan = make_plan(world, "x/grows", "web/app.log")
    (root / "x" / "grows").write_bytes(b"changed")
    base = [
        sys.executable,
        "-m",
        "hygiene_nb",
        "execute",
        plan.plan_path,
        "--store",
        str(world["store"]),
        "--json",
    ]
    refused = subprocess.run([*base, "--execute"], capture_output=True, text=True)
    assert refused.returncode == 3
    assert json.loads(refused.stdout)["error"]["code"] == "confirmation-mismatch"
    done = subprocess.run(
        [*base, "--execute", "--confirm-plan-id", plan.plan_id, "--plan-digest",
         plan.plan_digest, "--acknowledge-risk", "quarantine"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode == 4
    out = json.loads(done.stdout)
    assert out["status"] == "partial" and out["skipped"][0]["code"] == "changed-since-review"


def test_cli_dry_run_says_which_quarantine_takes_the_items(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log")
    shown = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "execute", plan.plan_path, "--store",
         str(world["store"])], capture_output=True, text=True,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    quarantine = Store(world["store"]).quarantine
    assert f"into {quarantine}: 2 items, moved by rename" in shown.stdout
    assert not quarantine.exists() or list(quarantine.iterdir()) == []


def test_an_unexpected_error_still_writes_the_receipt_then_surfaces(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.errors import PlanAlreadyExecuted

    plan = make_plan(world, "web/node_modules", "web/app.log")
    store = Store(world["store"])

    def broken(*_: object) -> None:
        raise RuntimeError("a bug in a check")

    monkeypatch.setattr("hygiene_nb.executor.moves.check_candidate", broken)
    with pytest.raises(RuntimeError, match="a bug in a check"):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (receipt,) = [json.loads(p.read_text()) for p in store.receipts.glob("*.json")]
    assert [(i["outcome"], i["code"]) for i in receipt["items"]] == [("skipped", "aborted")] * 2
    assert "a bug in a check" in receipt["aborted"]
    assert (world["root"] / "web" / "app.log").exists()
    monkeypatch.undo()
    with pytest.raises(PlanAlreadyExecuted):  # the plan was used up, as after any abort
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))


def test_an_unexpected_error_mid_move_says_where_the_items_may_be(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.executor import moves

    plan = make_plan(world, "web/node_modules", "web/app.log")
    store = Store(world["store"])
    real, calls = moves._move, []

    def breaks_on_second(*args: Any) -> Any:
        calls.append(1)
        if len(calls) == 2:
            raise RuntimeError("a bug after the first move")
        return real(*args)

    monkeypatch.setattr(moves, "_move", breaks_on_second)
    with pytest.raises(RuntimeError):
        execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (receipt,) = [json.loads(p.read_text()) for p in store.receipts.glob("*.json")]
    batch = receipt["batch_id"] or next(iter(store.quarantine.iterdir())).name
    assert all(f"hygiene-nb restore {batch}" in i["message"] for i in receipt["items"])
    (info,) = list_store_batches(store)
    assert info.items == 1  # the one that moved before the error, though never recorded moved
    monkeypatch.undo()
    assert restore_batch(store, batch, execute=True).status == "done"
    assert (world["root"] / "web" / "node_modules").is_dir()
    assert (world["root"] / "web" / "app.log").exists()


HOSTILE = [
    b"with space",
    b"new\nline",
    b"-leading-dash",
    b"tab\there",
    b"quote'\"s",
    b"n" * 255,
    b"caf\xe9",
    b"\xff\xfe",
]


def test_hostile_names_move_and_verify(world: dict[str, Path]) -> None:
    root = world["root"]
    hostile = os.fsencode(root) + b"/hostile"
    os.mkdir(hostile)
    for name in HOSTILE:
        with open(hostile + b"/" + name, "wb") as handle:
            handle.write(name)
    api.scan_root(root, store=world["store"])
    api.annotate([hostile + b"/" + n for n in HOSTILE], store=world["store"], decision="delete")
    plan = api.make_plan(root, store=world["store"])
    assert plan.candidates == len(HOSTILE)
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert result.skipped == [] and os.listdir(hostile) == []
    assert verify_receipt(str(result.receipt_path)).status == "verified"
    batch_tree = os.fsencode(world["store"]) + b"/quarantine/" + str(result.batch_id).encode()
    for name in HOSTILE:
        inside = batch_tree + b"/" + TREE_NAME + hostile + b"/" + name
        with open(inside, "rb") as handle:
            assert handle.read() == name


def test_a_hard_link_moves_one_name_and_leaves_the_other(world: dict[str, Path]) -> None:
    root = world["root"]
    write(root / "links" / "a", data=b"shared bytes")
    os.link(root / "links" / "a", root / "links" / "b")
    plan = make_plan(world, "links/a")
    assert plan.reclaim_bytes == 0  # the other name keeps the bytes: deleting frees nothing
    execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert (root / "links" / "b").read_bytes() == b"shared bytes"
    assert not (root / "links" / "a").exists()


def test_verify_reports_reappeared_and_tampered_receipts(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log")
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    write(world["root"] / "web" / "app.log", 1)
    checked = verify_receipt(str(result.receipt_path))
    assert checked.status == "mismatch"
    assert checked.reappeared == [str(world["root"] / "web" / "app.log")]
    receipt = Path(str(result.receipt_path))
    doc = json.loads(receipt.read_text())
    doc["moved"] = 99
    receipt.write_text(json.dumps(doc))
    with pytest.raises(HygieneError) as info:
        verify_receipt(str(receipt))
    assert info.value.code == "receipt-tampered"


def test_checkpoints_are_inert_unless_a_test_names_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT", raising=False)
    for name in CHECKPOINTS:
        checkpoint(name)  # would kill this process if it were not inert
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "no-such-checkpoint:kill")
    for name in CHECKPOINTS:
        checkpoint(name)


ALWAYS_REACHED = [c for c in CHECKPOINTS if c not in ("after-claim", "before-rollback", *COPY_ONLY)]


@pytest.mark.parametrize("point", [*ALWAYS_REACHED, "after-claim"])
def test_a_kill_at_any_checkpoint_loses_nothing(world: dict[str, Path], point: str) -> None:
    plan = make_plan(world, "web/node_modules", "web/app.log", "data/scratch.bin")
    assert_a_kill_at_loses_nothing(world, plan, point)
    # and the killed plan can never act again
    assert refuse(world, plan.plan_path, confirm_for(plan)) == "plan-already-executed"


def test_quarantine_list_reports_manifest_states(world: dict[str, Path]) -> None:
    from hygiene_nb.executor import list_store_batches

    plan = make_plan(world, "web/node_modules", "web/app.log")
    store = Store(world["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    (info,) = list_store_batches(store)
    assert (info.batch_id, info.items, info.manifest) == (result.batch_id, 2, "ok")
    assert info.bytes == result.bytes
    manifest = store.quarantine / str(result.batch_id) / "manifest.json"
    saved = manifest.read_bytes()
    manifest.unlink()  # lost: the layout still says what is there
    (info,) = list_store_batches(store)
    assert (info.manifest, info.items) == ("incomplete", 2)
    manifest.write_bytes(b'{"schema": "something-else"}')
    assert list_store_batches(store)[0].manifest == "invalid"
    manifest.write_bytes(saved)
    assert list_store_batches(store)[0].manifest == "ok"


def test_restore_and_purge_commands_keep_the_contract(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    store = Store(world["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    batch = str(result.batch_id)

    def cli(*args: str) -> tuple[int, dict[str, Any]]:
        done = subprocess.run(
            [sys.executable, "-m", "hygiene_nb", *args, "--store", str(world["store"]), "--json"],
            capture_output=True, text=True,
        )  # fmt: skip
        return done.returncode, json.loads(done.stdout)

    write(world["root"] / "web" / "app.log", data=b"new one")
    code, out = cli("restore", batch, "--execute")
    assert code == 4 and out["status"] == "partial"
    assert [b["code"] for b in out["blocked"]] == ["target-occupied"]
    assert out["restored"] == [{"path": str(world["root"] / "data" / "scratch.bin")}]
    assert (world["root"] / "web" / "app.log").read_bytes() == b"new one"
    code, out = cli("purge", batch)
    assert code == 0 and out["would_destroy"] == {"items": 1, "files": 1, "bytes": 40}
    code, out = cli("purge", batch, "--execute", "--confirm-batch-id", batch)
    assert code == 3 and out["error"]["code"] == "acknowledgement-missing"
    code, out = cli(
        "purge",
        batch,
        "--execute",
        "--confirm-batch-id",
        batch,
        "--acknowledge-risk",
        "permanent-delete",
    )
    assert code == 0 and not (store.quarantine / batch).exists()


def test_nfc_and_nfd_twins_are_different_entries(world: dict[str, Path]) -> None:
    import unicodedata

    root = world["root"]
    nfc, nfd = unicodedata.normalize("NFC", "café"), unicodedata.normalize("NFD", "café")
    write(root / "twins" / nfc, data=b"composed")
    write(root / "twins" / nfd, data=b"decomposed")
    plan = make_plan(world, f"twins/{nfd}")
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert [m.path for m in result.moved] == [str(root / "twins" / nfd)]
    assert (root / "twins" / nfc).read_bytes() == b"composed"
    assert not (root / "twins" / nfd).exists()


def test_overlapping_plans_never_move_anything_twice(world: dict[str, Path]) -> None:
    root, store_path = world["root"], world["store"]
    api.scan_root(root, store=store_path)
    api.annotate(
        [str(root / "web" / "app.log"), str(root / "data" / "scratch.bin")],
        store=store_path,
        decision="delete",
    )
    first = api.make_plan(root, store=store_path)
    api.annotate([str(root / "data" / "keep.txt")], store=store_path, decision="delete")
    second = api.make_plan(root, store=store_path)  # overlaps the first in two items
    store = Store(store_path)
    execute_plan(first.plan_path, store=store, confirm=confirm_for(first))
    result = execute_plan(second.plan_path, store=store, confirm=confirm_for(second))
    assert [m.path for m in result.moved] == [str(root / "data" / "keep.txt")]
    assert sorted(s.code for s in result.skipped) == ["gone", "gone"]


def test_verify_reports_items_missing_from_their_batch(world: dict[str, Path]) -> None:
    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    batch = Path(world["store"]) / "quarantine" / str(result.batch_id)
    (batch / "tree" / str(world["root"] / "web" / "app.log").lstrip("/")).unlink()
    checked = verify_receipt(str(result.receipt_path))
    assert checked.status == "mismatch"
    assert checked.missing_from_batch == [str(world["root"] / "web" / "app.log")]


def test_a_forged_plan_naming_home_is_refused_even_if_registered(world: dict[str, Path]) -> None:
    from hygiene_nb.ledger import IssuedPlan, Ledger
    from hygiene_nb.plan.schema import plan_digest

    plan = make_plan(world, "web/app.log")
    home = Path(os.environ["HOME"])
    home.mkdir(exist_ok=True)
    doc = json.loads(Path(plan.plan_path).read_text())
    forged_root = home.parent
    st = os.lstat(forged_root)
    doc["root"] = {"path": str(forged_root), "dev": st.st_dev, "inode": st.st_ino}
    hst = os.lstat(home)
    doc["candidates"][0].update(
        path=str(home), kind="dir", dev=hst.st_dev, inode=hst.st_ino, tree_bytes=0,
        tree_alloc=0, tree_files=0,
        fingerprint={"count": 0, "bytes": 0, "newest_mtime_ns": 0, "sha256": "sha256:" + "0" * 64},
    )  # fmt: skip
    doc["plan_id"] = "plan-20260101T000000Z-0f0f0f0f"
    doc["plan_digest"] = plan_digest(doc)
    forged = world["root"].parent / "forged.json"
    forged.write_text(json.dumps(doc))
    forged.chmod(0o600)
    with Ledger.open(Store(world["store"])) as ledger:  # as if the store had issued it
        ledger.record_plan(
            IssuedPlan(
                doc["plan_id"],
                doc["plan_digest"],
                str(forged_root),
                "s",
                str(forged),
                doc["created_at"],
                doc["expires_at"],
                1,
                0,
                "issued",
            )
        )
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")
    assert refuse(world, str(forged), confirm) == "candidate-forbidden"
    assert home.exists()


def test_a_permission_error_on_the_way_is_a_skip(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno as errno_mod

    from hygiene_nb.fs import fingerprint

    plan = make_plan(world, "web/app.log", "data/scratch.bin")
    real = fingerprint.open_dir_at  # the seam every walk from the root's handle goes through

    def denied(fd: int, name: bytes) -> int:
        if name == b"web":
            raise PermissionError(errno_mod.EACCES, "Permission denied")
        return real(fd, name)

    monkeypatch.setattr(fingerprint, "open_dir_at", denied)
    result = execute_plan(plan.plan_path, store=Store(world["store"]), confirm=confirm_for(plan))
    assert [(s.path, s.code) for s in result.skipped] == [
        (str(world["root"] / "web" / "app.log"), "permission-denied")
    ]
    assert (world["root"] / "web" / "app.log").exists()
    assert [m.path for m in result.moved] == [str(world["root"] / "data" / "scratch.bin")]


class RaceOps(LocalFileOps):
    """Real moves, with a race acted out just before the move of ``victim``."""

    def __init__(self, victim: bytes, race: Any) -> None:
        self.victim, self.race = victim, race

    def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        if src == self.victim and self.race is not None:
            race, self.race = self.race, None
            race()
        super().rename_noreplace(src_dir, src, dst_dir, dst)


def test_a_directory_that_gains_an_entry_just_before_its_move_is_put_back(
    world: dict[str, Path],
) -> None:
    root = world["root"]
    write(root / "proj" / "mine" / "thesis.tex", data=b"years of work")
    plan = make_plan(world, "web/node_modules")
    smuggle = lambda: os.rename(root / "proj" / "mine", root / "web" / "node_modules" / "mine")  # noqa: E731
    result = execute_plan(
        plan.plan_path,
        store=Store(world["store"]),
        confirm=confirm_for(plan),
        ops=RaceOps(b"node_modules", smuggle),
    )
    assert result.moved == []
    assert [s.code for s in result.skipped] == ["changed-since-review"]
    assert "put back" in result.skipped[0].message
    assert (root / "web" / "node_modules" / "mine" / "thesis.tex").read_bytes() == b"years of work"


def test_an_arrival_that_cannot_be_put_back_is_held_and_the_run_finishes(
    world: dict[str, Path],
) -> None:
    root = world["root"]
    plan = make_plan(world, "web/app.log", "data/scratch.bin")

    def swap_and_reoccupy() -> None:
        os.rename(root / "web" / "app.log", root / "web" / "old.log")
        write(root / "web" / "app.log", data=b"an impostor")  # swapped in

    class Reoccupy(RaceOps):
        def rename_noreplace(self, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
            super().rename_noreplace(src_dir, src, dst_dir, dst)
            if src == b"app.log" and not (root / "web" / "app.log").exists():
                write(root / "web" / "app.log", data=b"someone else")  # the place is taken again

    result = execute_plan(
        plan.plan_path,
        store=Store(world["store"]),
        confirm=confirm_for(plan),
        ops=Reoccupy(b"app.log", swap_and_reoccupy),
    )
    assert [m.path for m in result.moved] == [str(root / "data" / "scratch.bin")]
    (skip,) = result.skipped
    assert skip.code == "changed-since-review" and "held in the batch" in skip.message
    assert (root / "web" / "old.log").exists()  # the planned file never moved
    assert result.receipt_path is not None and Path(result.receipt_path).exists()


def test_a_batch_being_filled_cannot_be_purged(world: dict[str, Path]) -> None:
    from hygiene_nb.executor import purge_batch
    from hygiene_nb.executor.batches import claim_batch

    store = Store(world["store"]).ensure()
    batch = claim_batch(store.quarantine, plan_id="p", plan_digest="d", ops=LocalFileOps())
    try:
        with pytest.raises(HygieneError) as info:
            purge_batch(
                store,
                batch.batch_id,
                execute=True,
                confirm_batch_id=batch.batch_id,
                acknowledge_risk="permanent-delete",
                include_incomplete=True,
            )
        assert info.value.code == "batch-busy"
    finally:
        batch.close()


def test_a_refusal_creates_no_store(world: dict[str, Path], tmp_path: Path) -> None:
    plan = make_plan(world, "web/app.log")
    fresh = tmp_path / "no-store-here"
    with pytest.raises(Refused) as info:
        execute_plan(plan.plan_path, store=Store(fresh), confirm=confirm_for(plan))
    assert info.value.code == "plan-not-issued"
    assert not fresh.exists()


def test_a_tampered_manifest_cannot_restore_outside_the_root(
    world: dict[str, Path], tmp_path: Path
) -> None:
    from hygiene_nb.executor import restore_batch

    plan = make_plan(world, "web/app.log")
    store = Store(world["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
    batch = store.quarantine / str(result.batch_id)
    outside = tmp_path / "outside" / "deep" / ".bashrc"
    doc = json.loads((batch / "manifest.json").read_text())
    doc["items"][0]["original_b64"] = base64.b64encode(os.fsencode(outside)).decode()
    doc["items"][0]["original"] = str(outside)
    (batch / "manifest.json").write_text(json.dumps(doc))
    moved = batch / "tree" / str(world["root"] / "web" / "app.log").lstrip("/")
    relocated = batch / "tree" / str(outside).lstrip("/")
    relocated.parent.mkdir(parents=True)
    os.rename(moved, relocated)
    restored = restore_batch(store, str(result.batch_id), execute=True)
    assert restored.restored == []
    assert [b.code for b in restored.blocked] == ["target-unusable"]
    assert not (tmp_path / "outside").exists()


def test_a_forged_candidate_that_is_home_by_identity_is_refused(
    world: dict[str, Path], tmp_path: Path
) -> None:
    from hygiene_nb.ledger import IssuedPlan, Ledger
    from hygiene_nb.plan.schema import plan_digest

    plan = make_plan(world, "web/app.log")
    home = Path(os.environ["HOME"])
    home.mkdir(exist_ok=True)
    doc = json.loads(Path(plan.plan_path).read_text())
    hst = os.lstat(home)
    # the text says web/app.log, the identity is the home directory's
    doc["candidates"][0].update(dev=hst.st_dev, inode=hst.st_ino)
    doc["plan_id"] = "plan-20260101T000000Z-0e0e0e0e"
    doc["plan_digest"] = plan_digest(doc)
    forged = tmp_path / "forged-identity.json"
    forged.write_text(json.dumps(doc))
    forged.chmod(0o600)
    with Ledger.open(Store(world["store"])) as ledger:
        ledger.record_plan(
            IssuedPlan(
                doc["plan_id"],
                doc["plan_digest"],
                doc["root"]["path"],
                "s",
                str(forged),
                doc["created_at"],
                doc["expires_at"],
                1,
                0,
                "issued",
            )
        )
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")
    assert refuse(world, str(forged), confirm) == "candidate-forbidden"
