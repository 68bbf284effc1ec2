"""Helpers of the fleet tests: the CLI in a subprocess, real trees and what os.walk says of them,
a local S3 endpoint (moto's server), and listings of a dataset to compare before and after."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# what the publishing and reading processes see: moto accepts any key; no instance metadata
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def hnb_command(*args: str) -> list[str]:
    """The argv of ``hygiene-nb ARGS`` in this interpreter."""
    return [sys.executable, "-m", "hygiene_nb", *args]


def hnb_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This process's environment (the tests' isolated HOME and store), plus ``extra``."""
    return {**os.environ, **(extra or {})}


def hnb_json(
    *args: str, extra_env: Mapping[str, str] | None = None, timeout: float = 120
) -> tuple[int, dict[str, Any], str]:
    """Run ``hygiene-nb ARGS --json``: its exit code, its one JSON object and its stderr.

    Fails the test on anything but exactly one JSON line, or on a traceback.
    """
    done = subprocess.run(
        hnb_command(*args, "--json"),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=hnb_env(extra_env),
    )
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    return done.returncode, json.loads(lines[0]), done.stderr


def hnb_error(
    *args: str, extra_env: Mapping[str, str] | None = None, timeout: float = 120
) -> tuple[int, str, str]:
    """Run ``hygiene-nb ARGS --json`` expecting an error: its exit code, code and message."""
    code, out, _ = hnb_json(*args, extra_env=extra_env, timeout=timeout)
    assert out["status"] in ("error", "refused") and code != 0, out
    return code, out["error"]["code"], out["error"]["message"]


def tree_state(top: Path) -> dict[str, Any]:
    """Everything below ``top``, directories included (mode, size, mtime, bytes): what a
    refused command must leave as it was."""
    out: dict[str, Any] = {}
    for path in sorted(top.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() else None
        out[str(path.relative_to(top))] = (st.st_mode, st.st_size, st.st_mtime_ns, data)
    return out


def make_tree(root: Path, sizes: Mapping[str, int], seed: int = 0) -> Path:
    """Regular files of ``sizes`` (relative path → bytes) under ``root``, of random content."""
    import random

    rng = random.Random(seed)
    for relative, size in sizes.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(rng.randbytes(size))
    return root


def walked(root: Path) -> dict[str, int]:
    """What ``os.walk`` and ``lstat`` say of a tree without hard links or symlinks: its regular
    files, directories (the root included), apparent bytes and allocated bytes of every entry."""
    top = os.lstat(root)
    out = {"files": 0, "dirs": 1, "bytes": top.st_size, "alloc": top.st_blocks * 512}
    for here, dirs, files in os.walk(root):
        for name in dirs + files:
            st = os.lstat(os.path.join(here, name))
            out["bytes"] += st.st_size
            out["alloc"] += st.st_blocks * 512
        out["dirs"] += len(dirs)
        out["files"] += len(files)
    return out


def dirs_to_depth(root: Path, depth: int) -> int:
    """How many directories lie at most ``depth`` levels below ``root`` (the root included)."""
    count = 0
    for here, _dirs, _files in os.walk(root):
        if len(Path(here).relative_to(root).parts) <= depth:
            count += 1
    return count


def local_listing(top: Path) -> dict[str, tuple[int, int, str]]:
    """Every file below ``top``: relative path → (size, mtime_ns, sha256)."""
    out = {}
    for path in sorted(top.rglob("*")):
        if path.is_file():
            st = path.stat()
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            out[str(path.relative_to(top))] = (st.st_size, st.st_mtime_ns, digest)
    return out


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def moto_server(log: Path) -> Iterator[str]:
    """moto's S3 server on 127.0.0.1 (a free port) for the block: its endpoint URL."""
    port = free_port()
    with open(log, "wb") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            env=hnb_env(S3_ENV),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                assert server.poll() is None, log.read_text()
                try:
                    socket.create_connection(("127.0.0.1", port), 0.2).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "moto's server did not start in 60 s"
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:  # pragma: no cover -- a server that hangs on exit
                server.kill()
                server.wait()


def s3_filesystem(endpoint: str) -> Any:
    """pyarrow's S3 filesystem on the endpoint, allowed to create buckets."""
    import pyarrow.fs as pafs

    return pafs.S3FileSystem(
        endpoint_override=endpoint.removeprefix("http://"),
        scheme="http",
        access_key=S3_ENV["AWS_ACCESS_KEY_ID"],
        secret_key=S3_ENV["AWS_SECRET_ACCESS_KEY"],
        region=S3_ENV["AWS_REGION"],
        allow_bucket_creation=True,
    )


def s3_listing(fs: Any, prefix: str) -> dict[str, tuple[int, int, str]]:
    """Every object below ``prefix``: key → (size, mtime_ns, sha256)."""
    import pyarrow.fs as pafs

    out = {}
    selector = pafs.FileSelector(prefix, recursive=True, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.File:
            with fs.open_input_stream(info.path) as stream:
                digest = hashlib.sha256(stream.read()).hexdigest()
            out[info.path] = (info.size, info.mtime_ns or 0, digest)
    return dict(sorted(out.items()))
