"""What the browser tests share: a Jupyter server on loopback that reaches nothing else.

JupyterLab (``jupyter lab``) or Notebook 7 (``jupyter notebook``) with a fixed token, no news,
no update check and a read-only extension manager; every Jupyter config, runtime, workspace and
settings directory and HOME inside the test's tmp dir; the app exposed as ``window.jupyterapp``
so a test can run all cells. And the script that counts what each plotly figure drew.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from hygiene_nb.notebook.demo import DEMO_DIR_ENV

TOKEN = "e2e-token"

KERNEL_CONNECTED = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  return !!(w && w.sessionContext && w.sessionContext.session &&
            w.sessionContext.session.kernel &&
            w.sessionContext.session.kernel.connectionStatus === 'connected');
}"""

# per figure: how many of its SVG marks (bars, boxes, lines, slices) have a non-empty shape
PLOTLY_MARKS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(plot => {
  const marks = plot.querySelectorAll(
    ['path.point', 'g.point path', 'path.js-line', 'g.slice path', '.annotation-text']
      .map(s => '.plot-container svg ' + s).join(', '));
  const drawn = Array.from(marks).filter(m => {
    const d = m.getAttribute('d');
    if (m.tagName === 'path') return !!d && d !== 'M0,0Z' && !d.includes('NaN');
    return m.getBoundingClientRect().width > 0;
  });
  return [plot.id, drawn.length];
})"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, server: subprocess.Popen[bytes], timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if server.poll() is not None:
            raise RuntimeError(f"the Jupyter server exited with {server.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise TimeoutError(f"the Jupyter server never listened on port {port}")


def jupyter_env(base: Path, demo_dir: Path) -> dict[str, str]:
    """The server's environment, with every Jupyter state dir and HOME in ``base``."""
    dirs = {
        "HOME": base / "home",
        "JUPYTER_CONFIG_DIR": base / "config",
        "JUPYTER_RUNTIME_DIR": base / "runtime",
        "JUPYTERLAB_WORKSPACES_DIR": base / "workspaces",
        "JUPYTERLAB_SETTINGS_DIR": base / "settings",
    }
    for path in dirs.values():
        path.mkdir(parents=True)
    # no "Get notified about Jupyter news?" toast over the page (user settings, in base only)
    notification = dirs["JUPYTERLAB_SETTINGS_DIR"] / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    return {**os.environ, **{k: str(v) for k, v in dirs.items()}, DEMO_DIR_ENV: str(demo_dir)}


def start_jupyter(
    app: str, root_dir: Path, port: int, env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """``jupyter lab`` or ``jupyter notebook`` (Notebook 7) serving ``root_dir`` on loopback."""
    exposed = {"lab": "LabApp", "notebook": "JupyterNotebookApp"}[app]
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [
        str(jupyter),
        app,
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.root_dir={root_dir}",
        f"--IdentityProvider.token={TOKEN}",
        f"--{exposed}.expose_app_in_browser=True",
        # JupyterLab's server extension runs under either app: no news, no update check
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
