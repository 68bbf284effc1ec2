"""End to end in a real browser: JupyterLab runs notebooks/annotate.ipynb on the demo store.

Playwright drives Debian's chromium (``/usr/bin/chromium``; no ``playwright install``): a
click on a row's ``delete`` button must reach the kernel and land in the SQLite ledger, and a
click on a treemap sector must drill the panel into that directory. The recipe: JupyterLab
on loopback with a fixed token, no news, no update check and a read-only extension manager (so
nothing reaches the network); every Jupyter config, runtime, workspace and settings directory
and HOME inside the test's tmp dir; Run All through ``window.jupyterapp`` (exposed by
``--LabApp.expose_app_in_browser``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.notebook.demo import DEMO_DIR_ENV, ensure_demo
from hygiene_nb.query import views

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "annotate.ipynb"
TOKEN = "e2e-token"
TIMEOUT_MS = 120_000
WIDTH = 1000  # the window's width: every row on one line at it
ARTIFACTS_ENV = "HYGIENE_NB_ARTIFACTS"  # where screenshots go (default: the test's tmp dir)

CLOSE_LEFT_AREA = """() => {
  const app = window.jupyterapp;
  if (!app.shell.leftCollapsed) app.commands.execute('application:toggle-left-area');
}"""

# per row: how far its parts' tops spread, its height, what spills over its right edge, and
# which of its texts are cut (their content wider than their box)
ROW_GEOMETRY = r"""rows => rows.map(r => {
  const box = r.getBoundingClientRect();
  const kids = [...r.children].map(c => c.getBoundingClientRect());
  const cut = [...r.querySelectorAll('button, span')]
    .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflow !== 'visible')
    .map(e => e.textContent || e.title);
  return {
    spread: Math.max(...kids.map(k => k.top)) - Math.min(...kids.map(k => k.top)),
    height: box.height,
    spill: Math.max(...kids.map(k => k.right)) - box.right,
    cut: cut,
    text: r.innerText.replace(/\s+/g, ' '),
  };
})"""

KERNEL_CONNECTED = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!(w && w.sessionContext && w.sessionContext.session &&
            w.sessionContext.session.kernel &&
            w.sessionContext.session.kernel.connectionStatus === 'connected');
}"""


def sector(page, label: str):
    """The treemap box labelled exactly ``label``."""
    return page.locator("g.slice").filter(
        has=page.locator("text.slicetext", has_text=re.compile(f"^{re.escape(label)}$"))
    )


def shot(target: Any, where: Path, name: str) -> None:
    """A screenshot of the page (or of one element) for a person to look at."""
    where.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(where / f"{name}.png"))


def check_one_line(page: Any, count: int) -> None:
    """Every listed row on one line at the window's width, none of its texts cut."""
    found = page.locator(".hygiene-row").evaluate_all(ROW_GEOMETRY)
    assert len(found) == count and count > 0
    button = page.locator(".hygiene-row button").first.bounding_box()
    assert button is not None
    for row in found:
        assert row["spread"] < 8 and row["height"] < 2 * button["height"], row
        assert row["spill"] <= 1 and not row["cut"], row


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, server: subprocess.Popen[bytes], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {server.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"jupyter lab never listened on port {port}")


def lab_env(base: Path, demo_dir: Path) -> dict[str, str]:
    """The test's environment, with every Jupyter state dir and HOME in ``base``."""
    dirs = {
        "HOME": base / "home",
        "JUPYTER_CONFIG_DIR": base / "config",
        "JUPYTER_RUNTIME_DIR": base / "runtime",
        "JUPYTERLAB_WORKSPACES_DIR": base / "workspaces",
        "JUPYTERLAB_SETTINGS_DIR": base / "settings",
    }
    for path in dirs.values():
        path.mkdir(parents=True)
    # no "Get notified about Jupyter news?" toast over the panel (user settings, in base only)
    notification = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return {**os.environ, **{k: str(v) for k, v in dirs.items()}, DEMO_DIR_ENV: str(demo_dir)}


def start_lab(root_dir: Path, port: int, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [
        str(jupyter),
        "lab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root_dir}",
        f"--IdentityProvider.token={TOKEN}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.extension_manager=readonly",
        "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
    ]
    with log.open("wb") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(cmd, cwd=root_dir, env=env, stdout=out, stderr=subprocess.STDOUT)


def stop(server: subprocess.Popen[bytes]) -> None:
    server.terminate()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(timeout=10)


@pytest.mark.slow
def test_deciding_and_drilling_in_jupyterlab_writes_the_ledger(
    tmp_path: Path, chromium: Callable[[], AbstractContextManager[Any]]
) -> None:
    from playwright.sync_api import expect

    shots = Path(os.environ.get(ARTIFACTS_ENV) or tmp_path / "artifacts")
    demo = ensure_demo(tmp_path / "demo")  # built before the server; the kernel reuses it
    root, store = str(demo.root), str(demo.store)
    assert views.human_decisions(store, root) == {}
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(NOTEBOOK, served / NOTEBOOK.name)
    log = tmp_path / "lab.log"
    port = free_port()
    server = start_lab(served, port, lab_env(tmp_path / "lab", tmp_path / "demo"), log)
    try:
        wait_for_port(port, server)
        with chromium() as browser:
            context = browser.new_context(viewport={"width": WIDTH, "height": 1400})
            context.grant_permissions(["clipboard-read", "clipboard-write"])
            page = context.new_page()
            page.set_default_timeout(30_000)
            errors: list[str] = []
            page.on(
                "console",
                lambda m: errors.append(m.text) if m.type == "error" else None,
            )
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(
                f"http://127.0.0.1:{port}/lab/tree/{NOTEBOOK.name}?token={TOKEN}",
                timeout=TIMEOUT_MS,
            )
            page.wait_for_function(KERNEL_CONNECTED, timeout=TIMEOUT_MS)
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            # the summary is the panel's last widget but one: when it shows, the panel is drawn
            summary = page.locator(".widget-html").filter(has_text=re.compile(r"^Plan now"))
            expect(summary).to_be_visible(timeout=TIMEOUT_MS)
            expect(summary).to_contain_text("0 delete")
            # the button's name starts with its icon glyph, so not an exact match
            expect(page.get_by_role("button", name=re.compile(r"Export plan$"))).to_be_visible()

            # the notebook at the window's width: the file browser closed
            page.evaluate(CLOSE_LEFT_AREA)
            page.wait_for_timeout(500)
            rows = page.locator(".hygiene-row")
            expect(rows.first).to_be_visible()
            check_one_line(page, rows.count())
            shot(page, shots, "widget-rows")
            panel = page.locator(".jp-OutputArea-output").filter(has=rows.first)
            shot(panel, shots, "widget-panel")  # docs/images/widget.png
            assert errors == [], errors

            # exact names: JupyterLab has its own "Delete the cell" button
            cache_row = rows.filter(has=page.get_by_role("button", name=".cache/", exact=True))
            # an icon button: its name is the icon's glyph, its title says what it does
            cache_row.locator("button[title^='delete']").click()
            expect(
                page.locator(".widget-label").filter(has_text=re.compile(r"^delete: 1 entry$"))
            ).to_be_visible()
            expect(summary).to_contain_text("1 delete")
            assert views.human_decisions(store, root) == {str(demo.root / ".cache"): "delete"}

            # the treemap outlines the decided box in black once the kernel redrew it
            expect(sector(page, ".cache").locator("path.surface")).to_have_css(
                "stroke", "rgb(0, 0, 0)"
            )

            # a batch on entries that are not all safe: the confirmation first, then cancel
            page.get_by_role("checkbox", name="select all listed").check()
            page.get_by_role("button", name="delete selected", exact=True).click()
            confirm = page.locator(".hygiene-confirm")
            expect(confirm).to_be_visible()
            expect(confirm).to_contain_text("not safe")
            shot(page, shots, "widget-confirm")
            confirm.get_by_role("button", name="cancel", exact=True).click()
            expect(confirm).to_be_hidden()
            assert views.human_decisions(store, root) == {str(demo.root / ".cache"): "delete"}

            # export: two labelled commands, each copied with one click
            page.get_by_role("button", name=re.compile(r"Export plan$")).click()
            export = page.locator(".hygiene-export")
            expect(export).to_contain_text("1. dry run")
            expect(export).to_contain_text("2. execute")
            commands = export.locator(".hygiene-command pre")
            expect(commands).to_have_count(2)
            dry_run = commands.first.inner_text()
            assert dry_run.startswith("hygiene-nb execute ") and "--execute" not in dry_run
            export.get_by_role("button", name="copy").first.click()
            assert page.evaluate("navigator.clipboard.readText()") == dry_run
            boxes = commands.evaluate_all(
                "els => els.map(e => [e.scrollHeight, e.clientHeight, e.scrollWidth])"
            )
            line = page.evaluate(
                "getComputedStyle(document.querySelector('.hygiene-export pre')).lineHeight"
            )
            assert all(h < 2 * float(line.rstrip("px")) for h, _, _ in boxes), (boxes, line)
            inside = export.evaluate(
                "e => [...e.querySelectorAll('pre')].every(p => "
                "p.getBoundingClientRect().right <= e.getBoundingClientRect().right + 1)"
            )
            assert inside, "a command runs past the export's edge"
            shot(export, shots, "widget-export")
            assert errors == [], errors

            # a protected entry marked delete says why on its row, still on one line
            ssh_row = rows.filter(has=page.get_by_role("button", name=".ssh/", exact=True))
            ssh_row.locator("button[title^='delete']").click()
            expect(ssh_row).to_contain_text("⚠ protected")
            expect(export).to_contain_text("Decisions changed since the last export")
            status = page.locator(".hygiene-status")
            expect(status).to_contain_text("not a plan candidate: ")
            whole = status.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
            assert whole, "the status line is cut"
            check_one_line(page, rows.count())
            shot(page, shots, "widget-reason")

            # drill in: a click on the `projects` box reaches the kernel, which lists its
            # children and redraws the treemap one level down
            sector(page, "projects").click(force=True)
            expect(page.get_by_role("button", name="projects", exact=True)).to_be_visible()
            expect(page.get_by_role("button", name="analysis/", exact=True)).to_be_visible()
            expect(page.get_by_role("button", name=".cache/", exact=True)).to_have_count(0)
            page.wait_for_timeout(1500)  # plotly.js's zoom (750 ms) and the redraw after it
            shot(page, shots, "widget-drill")
            assert errors == [], errors
    except BaseException:
        print(f"--- jupyter lab log (tail of {log}) ---")
        print("\n".join(log.read_text(errors="replace").splitlines()[-60:]))
        raise
    finally:
        stop(server)
