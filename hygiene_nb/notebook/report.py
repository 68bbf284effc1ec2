"""The audit report: papermill runs the packaged notebook, nbconvert writes offline HTML.

``make_report`` is the one entry point (the CLI, cron and systemd call it). It writes
``<out>/<root-slug>/<scan-id>.ipynb`` (the executed notebook) and ``.html`` (no code, every
figure drawn offline from plotly.js inlined once). Two runs over the same snapshot, rules and
ledger give byte-identical HTML: figures carry fixed ids, ages are measured at the scan's time,
and the injected-parameters cell is left out. A failing cell still writes both files (papermill
marks where it failed) and raises ``ReportFailed``.

The report reads the store and writes only its own files. Inside the scanned root (``make
audit`` on a home that holds this checkout) it adds new files and never replaces one.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from types import ModuleType
from typing import Any

import nbformat
from jupyter_client.manager import AsyncKernelManager
from traitlets.config import Config

from hygiene_nb import api
from hygiene_nb.config import load_root_config
from hygiene_nb.errors import ReportFailed, UsageError
from hygiene_nb.notebook.demo import REPORT_ENV
from hygiene_nb.pathnames import within
from hygiene_nb.scan.index import ScanInfo, find_scan, root_slug
from hygiene_nb.store import Store, write_private_file

__all__ = [
    "REDACTED_NOTEBOOK",
    "REPORT_NOTEBOOK",
    "ReportResult",
    "classify_ahead",
    "make_report",
    "report_paths",
]

REPORT_NOTEBOOK = "notebooks/audit_report.ipynb"  # inside the package
# A report runs its views one after another in one kernel, beside this command, and its
# memory is summed over both: each of its queries gets this much working memory (unless the
# user set HYGIENE_NB_QUERY_MEMORY), under half the default. Its largest, the diff of two
# 1M-entry scans, is then joined in three passes (``query.changes.join_passes``): the process
# tree peaked at 566-571 MiB on the 1M bench tree, against 607-611 at 256MB (two passes) and
# 714-716 at the default (one), about 0.3 s slower than at 256MB (2026-12-07).
QUERY_MEMORY_VARIABLE = "HYGIENE_NB_QUERY_MEMORY"
REPORT_QUERY_MEMORY = "200MB"
REDACTED_NOTEBOOK = "notebooks/audit_report_redacted.ipynb"


@dataclass(frozen=True)
class ReportResult:
    """Where a report was written and what it was made from."""

    scan_id: str
    root: str
    notebook: str
    html: str
    suggested_plan: str | None = None  # automatic mode's Markdown, when it suggested a plan

    exit_code = 0  # a failing cell raises ReportFailed (exit 1) instead

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb report --json`` prints."""
        return {
            "status": "done",
            "scan_id": self.scan_id,
            "root": self.root,
            "html": self.html,
            "notebook": self.notebook,
            "suggested_plan": self.suggested_plan,
        }


def report_paths(out: Path, info: ScanInfo, *, redact: bool = False) -> tuple[Path, Path]:
    """``<out>/<root-slug>/<scan-id>.ipynb`` and ``.html`` (``<out>/redacted/…`` if redacted)."""
    folder = out / ("redacted" if redact else root_slug(info.root))
    return folder / f"{info.scan_id}.ipynb", folder / f"{info.scan_id}.html"


def _scrub(notebook: nbformat.NotebookNode) -> None:
    """Remove what a redacted notebook must not carry: papermill's paths, error details."""
    meta = notebook.metadata.get("papermill", {})
    for key in ("input_path", "output_path"):
        if key in meta:
            meta[key] = "(redacted)"
    meta["parameters"] = {k: v for k, v in meta.get("parameters", {}).items() if k == "scan_id"}
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                output["evalue"] = "(redacted)"
                output["traceback"] = [f"{output.get('ename', 'Error')}: (redacted)"]


def _html(notebook: nbformat.NotebookNode, title: str) -> str:
    """The notebook as self-contained HTML without code, with stable ids."""
    from nbconvert import HTMLExporter  # after the kernel stopped: not held while it runs

    config = Config()
    config.TemplateExporter.exclude_input = True
    config.TemplateExporter.exclude_input_prompt = True
    config.TemplateExporter.exclude_output_prompt = True
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_cell_tags = {"injected-parameters"}
    notebook.metadata["title"] = title
    with as_file(files("hygiene_nb.notebook") / "templates") as templates:
        exporter = HTMLExporter(
            config=config,
            extra_template_basedirs=[str(templates)],
            template_name="hygiene_offline",
        )
        body, _ = exporter.from_notebook_node(notebook)
    return body  # no random ids to rename: figures carry fixed ids (a test compares reruns)


def make_report(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    out: str | os.PathLike[str] = "reports",
    scan: bool = False,
    redact: bool = False,
    timeout: int = 900,
    progress: bool = False,
) -> ReportResult:
    """Run the audit notebook on a snapshot and write its ``.ipynb`` and ``.html``.

    Args:
        root: the scanned root (default: the root of ``scan_id``, else of the latest scan).
        store: the store.
        scan_id: the snapshot (default: the latest of ``root``).
        out: the reports directory (``<root-slug>/<scan-id>.*`` go inside it).
        scan: scan ``root`` first and report on that new snapshot.
        redact: categories, counts, bytes, scores, plan ids and expiry only: no path, file name,
            user name or note anywhere in either file (written to ``<out>/redacted/``).
        timeout: seconds any one cell may run, and the classification ahead of the kernel
            (``classify_ahead``).
        progress: say on stderr what the report is doing: the scan's live line (``scan``),
            each stage, and a bar of the notebook's cells as they run.

    Raises:
        SnapshotNotFound: no snapshot matches.
        UsageError: ``--scan`` without a root, or with a snapshot id.
        ReportFailed: a cell failed (both files are written all the same).
    """
    st = api.open_store(store)
    say = _say if progress else _quiet
    if scan:
        if root is None or scan_id is not None:
            raise UsageError("--scan needs ROOT and no --snapshot: it reports on the new scan.")
        info = api.scan_root(root, store=st, progress=progress)
    else:
        info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    nb_path, html_path = report_paths(Path(out), info, redact=redact)
    inside = within(nb_path.parent, info.root)
    if inside:  # e.g. `make audit` on a home that holds this checkout: add files, replace none
        for target in (nb_path, html_path):
            if os.path.lexists(target):
                raise UsageError(
                    f"{target} exists inside the scanned root {info.root}, and a report never "
                    "replaces a file there: give --out outside the root, or move the old "
                    "report away yourself."
                )
    nb_path.parent.mkdir(parents=True, exist_ok=True)
    env = kernel_environment()
    if redact:  # paths reach the kernel through its environment, never as notebook parameters
        template = REDACTED_NOTEBOOK
        parameters: dict[str, str] = {"scan_id": info.scan_id}
        env |= dict(zip(REPORT_ENV, (info.root, str(st.root)), strict=True))
        title = f"Workspace audit (redacted) {info.scan_id}"
    else:
        template = REPORT_NOTEBOOK
        parameters = {"root": info.root, "store": str(st.root), "scan_id": info.scan_id}
        title = f"Workspace audit: {info.root} ({info.scan_id})"
    say(f"classifying the scans of {'the root' if redact else info.root} not classified yet")
    classify_ahead(st, info, timeout=timeout)
    say("running the audit notebook")
    executed, failure = _execute(
        template, parameters, env, cwd=nb_path.parent, timeout=timeout, progress=progress
    )
    say("writing the notebook and its HTML")
    if redact:
        _scrub(executed)
    write_private_file(nb_path, nbformat.writes(executed).encode(), exclusive=inside)
    write_private_file(html_path, _html(executed, title).encode(), exclusive=inside)
    suggested = (
        _write_suggestion(st, info, nb_path, redact=redact, exclusive=inside)
        if failure is None
        else None
    )
    if failure is not None:
        where = "the HTML" if redact else str(html_path)
        raise ReportFailed(
            f"a cell of the report failed ({'details redacted' if redact else failure}); "
            f"see {where} for where. Fix the cause (or report it), then run the report again."
        )
    return ReportResult(info.scan_id, info.root, str(nb_path), str(html_path), suggested)


def _say(text: str) -> None:
    """One line on stderr about what the report is doing (``make_report(progress=True)``)."""
    sys.stderr.write(f"report: {text}…\n")
    sys.stderr.flush()


def _quiet(text: str) -> None:
    """What ``make_report`` says when it is asked for no progress: nothing."""


def classify_ahead(st: Store, info: ScanInfo, *, timeout: int) -> bool:
    """Classify and keep the report's scans in a process of its own (``notebook.ahead``).

    Before the kernel starts, so a classification's working memory is never held beside the
    kernel's: on the 1M bench tree with one scan not yet classified, the report's process tree
    peaked at 572-575 MiB instead of 615. It runs with ``-P`` (nothing is imported from the
    current directory) and gets ``timeout`` seconds, then SIGTERM (it removes what it was
    writing), then SIGKILL. Whatever stops it (a store that cannot keep a file, a signal, the
    timeout), the report goes on: the kernel's views classify what is not kept, as they would
    without it. Returns whether every scan is kept.
    """
    from hygiene_nb.notebook.ahead import PARENT_VARIABLE

    if not sys.executable:
        return False  # an embedding interpreter: no Python to start
    argv = [sys.executable, "-P", "-m", "hygiene_nb.notebook.ahead", str(st.root), info.scan_id]
    env = os.environ | {PARENT_VARIABLE: str(os.getpid())}
    try:
        child = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
        )
    except OSError:
        return False
    try:
        return child.wait(timeout=timeout) == 0
    except subprocess.TimeoutExpired:
        return False
    finally:
        if child.poll() is None:  # the timeout, or the command interrupted while it ran
            child.terminate()
            try:
                child.wait(timeout=_AHEAD_GRACE)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()


_AHEAD_GRACE = 10  # seconds a stopped classification gets to remove what it was writing


def kernel_environment() -> dict[str, str]:
    """What a report's kernel gets in its environment besides the command's own."""
    env = {"PLOTLY_RENDERER": "plotly_mimetype+notebook", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    if not os.environ.get(QUERY_MEMORY_VARIABLE):  # a value the user set is kept
        env[QUERY_MEMORY_VARIABLE] = REPORT_QUERY_MEMORY
    return env


def _write_suggestion(
    st: Store, info: ScanInfo, nb_path: Path, *, redact: bool, exclusive: bool
) -> str | None:
    """Automatic mode: the suggested plan's Markdown beside the report, when there is one."""
    if not load_root_config(st, info.root).automatic:
        return None  # manual mode (what suggested_plan says first), without loading pandas
    from hygiene_nb.query import suggest

    found = suggest.suggested_plan(store=st, scan_id=info.scan_id)
    if found is None or not found.shown:
        return None
    path = nb_path.with_name(f"{info.scan_id}.suggested-plan.md")
    markdown = suggest.suggestion_markdown(found, redact=redact).encode()
    write_private_file(path, markdown, exclusive=exclusive)
    return str(path)


class _LocalKernelManager(AsyncKernelManager):
    """The kernel talks over local sockets, not TCP (no port, no "unencrypted TCP" warning).

    The socket files sit beside the kernel's connection file, in Jupyter's runtime directory.
    """

    def __init__(self, **kwargs: object) -> None:
        super().__init__(**kwargs)
        self.transport = "ipc"


# The kernel a report starts is the command's own, so it takes the command's process settings
# (``hygiene_nb._process``) before its first cell: among them, jsonschema's IRI checker left
# out, which plotly's notebook renderer would otherwise build a grammar for (about 1 s).
_KERNEL_ARGUMENTS = ["--IPKernelApp.exec_lines=import hygiene_nb._process"]


def _execute(
    template: str,
    parameters: dict[str, str],
    env: dict[str, str],
    *,
    cwd: Path,
    timeout: int,
    progress: bool = False,
) -> tuple[nbformat.NotebookNode, Exception | None]:
    """Run a packaged notebook with papermill; the executed notebook and the failure, if any.

    ``progress``: papermill's bar of the cells run so far, on stderr.
    """
    with (
        tempfile.TemporaryDirectory(prefix="hygiene-nb-report-") as scratch,
        as_file(files("hygiene_nb.notebook") / template) as source,
    ):
        running = Path(scratch) / "report.ipynb"
        # the kernel's temporary files (its queries' spill directories) go in the scratch
        # directory, which goes when the report is written: so the kernel is stopped at once
        # after its last cell (whatever it wrote is complete by then), not shut down in turn
        # (its interpreter freeing all it held: about 0.6 s at 1M entries)
        kernel_env = env | {"TMPDIR": scratch}
        failure = _run(
            source, running, parameters, kernel_env, cwd=cwd, timeout=timeout, progress=progress
        )
        return nbformat.read(running, as_version=4), failure


# papermill's I/O module imports the client of every remote storage it can read and write
# notebooks on (S3 through boto3, HDFS through pyarrow, Azure, GCS, GitHub), each where it is
# installed. A report reads and writes local files only, so those clients are recorded as
# absent while papermill loads and importable again after: the command holds 99 MiB with them
# and 50 MiB without while its kernel runs (measured 2026-12-07, the dev install, which has
# boto3). papermill then names the missing dependency should a remote path reach it, for the
# rest of the process: a session that imported papermill this way (a first ``make_report``)
# and then wants it to read from S3 imports it in a new process. Like ``_run``'s environment,
# this is for one report at a time, not beside other threads that import these clients.
_REMOTE_CLIENTS = ("boto3", "pyarrow", "gcsfs", "azure", "github")


def _papermill() -> ModuleType:
    """papermill, imported (the first time) without its remote storage clients."""
    if "papermill" in sys.modules:
        return sys.modules["papermill"]
    absent = [name for name in _REMOTE_CLIENTS if name not in sys.modules]
    for name in absent:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import papermill
    finally:
        for name in absent:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
    return papermill  # type: ignore[no-any-return]


def _run(
    source: Path,
    running: Path,
    parameters: dict[str, str],
    env: dict[str, str],
    *,
    cwd: Path,
    timeout: int,
    progress: bool = False,
) -> Exception | None:
    """Execute ``source`` into ``running`` with ``env`` in the kernel's environment."""
    pm = _papermill()

    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)  # the kernel inherits them
    try:
        pm.execute_notebook(
            str(source),
            str(running),
            parameters=parameters,
            kernel_name="python3",
            cwd=str(cwd),
            progress_bar=progress,
            log_output=False,
            # written once at the end, and before it raises for a failed cell (then with that
            # cell marked): not around each of the ~30 cells, a 5 MB file each time (about
            # 3 s of a 1M-entry report)
            request_save_on_cell_execute=False,
            execution_timeout=timeout,
            kernel_manager_class=_LocalKernelManager,
            shutdown_kernel="immediate",
            extra_arguments=_KERNEL_ARGUMENTS,
        )
    except pm.PapermillExecutionError as exc:
        failure: Exception = exc  # papermill saved the notebook with the failing cell marked
        return failure
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return None
