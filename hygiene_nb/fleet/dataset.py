"""A fleet dataset: where many hosts publish their scans, on a directory or an object store.

::

    DEST/hygiene-nb-fleet.json                          the marker: a fleet dataset, its version
    DEST/snapshots/host=H/root=R/scan=S/part-0.parquet  the snapshot, with ``row_no``
    DEST/classified/host=H/root=R/scan=S/part-0.parquet its verdicts, row for row, with ``row_no``
    DEST/dirs/host=H/root=R/scan=S/part-0.parquet       its directories to a depth, with sums
    DEST/published/host=H/root=R/scan=S.json            the completion marker, written last

A partition is visible only once its completion marker exists: readers list ``published/`` and
read the files each marker names, never a glob over DEST (DuckDB's ``**`` reads ``.``- and
``_``-prefixed directories too). On a directory, files are written under ``DEST/.staging/`` and
renamed into place; on an object store each object appears whole when its upload completes.
No file is shared between publishers: many hosts publish at once without a lock.

A DEST is a local path, ``file://PATH`` or ``s3://BUCKET/PREFIX`` (``pyarrow.fs``; credentials
from the usual ``AWS_*`` variables, the endpoint from ``--endpoint-url`` or
``$AWS_ENDPOINT_URL``).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from hygiene_nb.errors import FleetTooNew, FleetUnusable, HostInvalid, NotAFleet, UsageError
from hygiene_nb.store import FLEET_MARKER

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = [
    "FLEET_FORMAT",
    "TABLES",
    "Dest",
    "Partition",
    "check_host",
    "fleet_format_of",
    "open_dest",
]

FLEET_FORMAT = 1  # the layout and the markers; a newer one is refused (fleet-too-new)
TABLES = ("snapshots", "classified", "dirs")
_STAGING = ".staging"  # a directory DEST's temporary files, renamed into place when whole
_HOST = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,62}")
# names an engine reading the partition values would take for a number, a boolean or a null
_HOST_WORDS = frozenset(
    {"nan", "inf", "infinity", "true", "false", "null", "none", "na", "nat", "nil", "undefined"}
)


def check_host(host: str, option: str = "--host") -> str:
    """``host`` when a fleet can name a partition by it, else ``HostInvalid``.

    Letters, digits, ``.``, ``_`` and ``-``, starting with a letter, at most 63 characters,
    and none of the words DuckDB or Spark would read as a value rather than a name (``nan``,
    ``inf``, ``true``, ``null``…): a partition value must stay text in every engine.
    """
    if not _HOST.fullmatch(host) or host.lower() in _HOST_WORDS:
        raise HostInvalid(
            f"host name {host!r} cannot name a fleet partition: use letters, digits, '.', '_' "
            "and '-', starting with a letter (no '/', '=' or spaces, and not a word such as "
            f"'nan', 'true' or 'null'); give one with {option} NAME."
        )
    return host


def fleet_format_of(record: Any) -> int:
    """The ``fleet_format`` of a marker's record: a whole number from 1, else ``ValueError``.

    A JSON integer only: ``true``, ``"1"``, ``1.9`` or ``-7`` is not a format (Python's
    ``int()`` would take each for one).
    """
    value = record["fleet_format"]
    if type(value) is not int or value < 1:
        raise ValueError(f"its fleet_format is {str(value)[:20]!r}, not a format number")
    return min(value, 10**6)  # a larger one is as new as any: it is never printed whole


@dataclass(frozen=True)
class Partition:
    """One published scan's place: ``host=H/root=R/scan=S``."""

    host: str
    root: str  # the root's partition value (``hygiene_nb.scan.index.root_slug``)
    scan: str

    @property
    def key(self) -> str:
        """The Hive path of the partition."""
        return f"host={self.host}/root={self.root}/scan={self.scan}"

    def file(self, table: str) -> str:
        """The path, relative to DEST, of this partition's file of ``table``."""
        return f"{table}/{self.key}/part-0.parquet"

    @property
    def marker(self) -> str:
        """The path, relative to DEST, of the completion marker."""
        return f"published/host={self.host}/root={self.root}/scan={self.scan}.json"


_MARKER_PATH = re.compile(r"published/host=([^/]+)/root=([^/]+)/scan=([^/]+)\.json")


class Dest:
    """A fleet dataset's top, on a pyarrow filesystem."""

    def __init__(self, text: str, fs: pafs.FileSystem, base: str, *, local: bool) -> None:
        self.text = text  # as the person gave it, for messages
        self.fs = fs
        self.base = base.rstrip("/")
        self.local = local

    def path(self, relative: str) -> str:
        """The filesystem path of ``relative`` (to DEST)."""
        return f"{self.base}/{relative}"

    def _fail(self, what: str, exc: Exception) -> FleetUnusable:
        return FleetUnusable(
            f"cannot {what} in the fleet dataset {self.text}: {exc}; check that it is reachable "
            "and that you may write there (credentials, permissions, free space)."
        )

    # -- reading -----------------------------------------------------------------------------

    def exists(self, relative: str) -> bool:
        """Whether a file is at ``relative``."""
        import pyarrow.fs as pafs

        try:
            return bool(self.fs.get_file_info(self.path(relative)).type == pafs.FileType.File)
        except OSError as exc:
            raise self._fail("look", exc) from exc

    def read_bytes(self, relative: str) -> bytes:
        """The whole file at ``relative``."""
        try:
            with self.fs.open_input_stream(self.path(relative)) as stream:
                return bytes(stream.read())
        except OSError as exc:
            raise self._fail(f"read {relative}", exc) from exc

    def _listed(self, relative: str, *, recursive: bool) -> list[Any]:
        """What is below ``relative`` (its file infos; none when it is absent)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self.path(relative), recursive=recursive, allow_not_found=True)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as exc:
            raise self._fail(f"list {relative}", exc) from exc
        prefix = self.base + "/"
        return [i for i in infos if i.path.startswith(prefix)]

    def _relative(self, info: Any) -> str:
        return str(info.path[len(self.base) + 1 :])

    def files_under(self, relative: str) -> list[str]:
        """Every file below ``relative``, as paths relative to DEST (none when it is absent)."""
        import pyarrow.fs as pafs

        infos = self._listed(relative, recursive=True)
        return sorted(self._relative(i) for i in infos if i.type == pafs.FileType.File)

    def entries_under(self, relative: str) -> list[str]:
        """The names directly below ``relative`` (files and directories), relative to DEST."""
        return sorted(self._relative(i) for i in self._listed(relative, recursive=False))

    def is_empty(self) -> bool:
        """Whether nothing is at DEST yet (absent, or an empty directory or prefix).

        A ``.staging`` directory alone counts as empty: it is what a publish that was stopped
        while writing the fleet marker leaves, and the next publish must be able to go on.
        """
        import pyarrow.fs as pafs

        try:
            info = self.fs.get_file_info(self.base)
            if info.type == pafs.FileType.NotFound:
                return True
            if info.type != pafs.FileType.Directory:
                raise NotAFleet(f"{self.text} is a file, not a fleet dataset's directory.")
            listed = self.fs.get_file_info(pafs.FileSelector(self.base, recursive=False))
        except OSError as exc:
            raise self._fail("look", exc) from exc
        staging = self.path(_STAGING)
        return all(
            entry.path == staging and entry.type == pafs.FileType.Directory for entry in listed
        )

    def check_marker(self) -> dict[str, Any]:
        """The fleet marker's record, or why DEST is not a fleet dataset this code reads.

        Raises:
            NotAFleet: there is no marker, or it is not one.
            FleetTooNew: a newer hygiene-nb made it.
        """
        if not self.exists(FLEET_MARKER):
            raise NotAFleet(
                f"{self.text} is not a fleet dataset (no {FLEET_MARKER} at its top); publish "
                f"a scan into it first: `hygiene-nb publish {self.text} ROOT`."
            )
        try:
            record = json.loads(self.read_bytes(FLEET_MARKER))
            version = fleet_format_of(record)
        except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
            raise NotAFleet(
                f"{self.text}/{FLEET_MARKER} is not a fleet marker ({exc}); this is not a fleet "
                "dataset hygiene-nb made."
            ) from exc
        if version > FLEET_FORMAT:
            raise FleetTooNew(
                f"{self.text} is a fleet dataset in format {version}, and this hygiene-nb reads "
                f"format {FLEET_FORMAT}; upgrade hygiene-nb to read it (it is left unchanged)."
            )
        return dict(record)

    def published(self) -> list[tuple[Partition, str]]:
        """Every completion marker: its partition and its path relative to DEST, sorted."""
        found = []
        for relative in self.files_under("published"):
            match = _MARKER_PATH.fullmatch(relative)
            if match:
                found.append((Partition(*match.groups()), relative))
        return found

    # -- writing ------------------------------------------------------------------------------

    def fleet_above(self) -> str | None:
        """The fleet dataset DEST lies inside (not DEST itself), else None.

        On a directory, read as the kernel resolves the path; on an object store, each prefix
        above DEST within its bucket is asked for a marker.
        """
        if self.local:
            from hygiene_nb.store import fleet_marker_above

            parent = os.path.dirname(self.base)
            found = fleet_marker_above(parent) if parent != self.base else None
            return None if found is None else str(found)
        import pyarrow.fs as pafs

        bucket, _, prefix = self.base.partition("/")
        parts = prefix.split("/") if prefix else []
        for cut in range(len(parts) - 1, -1, -1):
            above = "/".join([bucket, *parts[:cut]])
            try:
                info = self.fs.get_file_info(f"{above}/{FLEET_MARKER}")
            except OSError as exc:
                raise self._fail("look", exc) from exc
            if info.type == pafs.FileType.File:
                return f"s3://{above}"
        return None

    def is_fleet_or_empty(self) -> bool:
        """True when DEST is a fleet dataset (its marker checked), False when it is new.

        Raises:
            NotAFleet: DEST holds something else.
            FleetTooNew: a newer hygiene-nb made it.
        """
        above = self.fleet_above()
        if above is not None:
            raise NotAFleet(
                f"{self.text} lies inside the fleet dataset {above}: a dataset holds no other; "
                f"publish into {above} itself."
            )
        if self.exists(FLEET_MARKER):
            self.check_marker()
            return True
        if not self.is_empty():
            if self.exists(FLEET_MARKER):  # another publisher made it a fleet dataset meanwhile
                self.check_marker()
                return True
            raise NotAFleet(
                f"{self.text} is not empty and is not a fleet dataset (no {FLEET_MARKER}); "
                "publish into a new or empty directory or prefix."
            )
        return False

    def ensure_marker(self) -> None:
        """Make DEST a fleet dataset if it is new (empty); check the marker if it is one.

        Raises:
            NotAFleet: DEST holds something else.
            FleetTooNew: a newer hygiene-nb made it.
        """
        if self.is_fleet_or_empty():
            return
        record = {"fleet_format": FLEET_FORMAT, "made_by": "hygiene-nb"}
        # every publisher writes the same bytes: two that race leave the same file
        self.put_bytes(FLEET_MARKER, json.dumps(record, sort_keys=True).encode() + b"\n")

    def _staging(self) -> Path:
        staging = Path(self.path(_STAGING))
        staging.mkdir(parents=True, exist_ok=True)
        return staging

    def put_bytes(self, relative: str, data: bytes) -> None:
        """Write ``data`` at ``relative``, visible only whole (replacing what was there)."""
        try:
            if self.local:
                tmp = self._staging() / f"{secrets.token_hex(8)}.tmp"
                try:
                    with open(tmp, "wb") as handle:
                        handle.write(data)
                        handle.flush()
                        os.fsync(handle.fileno())
                    self._into_place(tmp, relative)
                finally:
                    tmp.unlink(missing_ok=True)  # a failed write's own temporary file
            else:
                self._upload(relative, len(data), lambda stream: stream.write(data))
        except OSError as exc:
            raise self._fail(f"write {relative}", exc) from exc

    def put_file(self, relative: str, source: Path) -> None:
        """Copy the local file ``source`` to ``relative``, visible only whole."""
        try:
            if self.local:
                tmp = self._staging() / f"{secrets.token_hex(8)}.tmp"
                try:
                    shutil.copyfile(source, tmp)
                    with open(tmp, "rb+") as handle:
                        os.fsync(handle.fileno())
                    self._into_place(tmp, relative)
                finally:
                    tmp.unlink(missing_ok=True)  # a failed write's own temporary file
            else:
                with open(source, "rb") as handle:
                    size = os.fstat(handle.fileno()).st_size
                    self._upload(
                        relative, size, lambda stream: shutil.copyfileobj(handle, stream, 8 << 20)
                    )
        except OSError as exc:
            raise self._fail(f"write {relative}", exc) from exc

    def _upload(self, relative: str, size: int, write: Callable[[Any], object]) -> None:
        """Upload to a staging object, check its size, then copy it into place on the server.

        An upload that fails part-way can leave a short object behind (the stream completes
        what it was given when it closes): it is left only under ``.staging/``, which no reader
        lists, and removed; the object at ``relative`` is a server-side copy of one of the
        right size, so it is there whole or not at all.
        """
        import pyarrow.fs as pafs

        staged = self.path(f"{_STAGING}/{secrets.token_hex(8)}.tmp")
        try:
            with self.fs.open_output_stream(staged) as stream:
                write(stream)
            got = self.fs.get_file_info(staged)
            if got.type != pafs.FileType.File or got.size != size:
                raise OSError(f"the upload of {relative} is {got.size} bytes, not {size}")
            self.fs.copy_file(staged, self.path(relative))
        finally:
            with contextlib.suppress(OSError):
                self.fs.delete_file(staged)

    def clear_tables(self, part: Partition, tables: tuple[str, ...]) -> None:
        """Remove ``part``'s files of ``tables`` where they are (none is an error).

        Only a partition's own files, whose paths this class derives: what a publish of the
        whole scan left before it was stopped, when the scan is now published redacted.
        """
        import pyarrow.fs as pafs

        for table in tables:
            relative = part.file(table)
            try:
                if self.fs.get_file_info(self.path(relative)).type == pafs.FileType.File:
                    self.fs.delete_file(self.path(relative))
            except OSError as exc:
                raise self._fail(f"remove {relative}", exc) from exc

    def parquet_whole(self, relative: str) -> bool:
        """Whether the file at ``relative`` is there and ends in a Parquet footer that reads."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            with self.fs.open_input_file(self.path(relative)) as handle:
                pq.read_metadata(handle)
        except (OSError, pa.ArrowException):
            return False
        return True

    def _into_place(self, tmp: Path, relative: str) -> None:
        final = Path(self.path(relative))
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(tmp, final)  # noqa: TID251 - the fleet dataset's own file, atomically


def open_dest(dest: str, *, endpoint_url: str | None = None) -> Dest:
    """The fleet dataset at ``dest``: a local path, ``file://…`` or ``s3://bucket/prefix``.

    Raises:
        NotAFleet: a URL scheme other than ``file`` and ``s3``.
        FleetUnusable: the object store cannot be reached.
    """
    try:
        parts = urlsplit(dest)
    except ValueError as exc:  # an unclosed '[' and the like
        raise NotAFleet(
            f"{dest!r} is not a directory nor an s3://BUCKET/PREFIX URL ({exc})."
        ) from exc
    if parts.scheme in ("", "file"):
        import pyarrow.fs as pafs

        if parts.scheme and parts.netloc not in ("", "localhost"):
            raise NotAFleet(
                f"{dest}: a file:// URL names a directory on this machine (file:///PATH), not "
                f"on {parts.netloc!r}; mount that one and give its path."
            )
        where = unquote(parts.path) if parts.scheme else dest
        local = os.path.abspath(os.path.expanduser(where))
        return Dest(dest, pafs.LocalFileSystem(), local, local=True)
    if parts.scheme != "s3":
        raise NotAFleet(
            f"{dest}: a fleet dataset is a directory or an s3://bucket/prefix URL, not "
            f"{parts.scheme}://."
        )
    bucket, prefix = parts.netloc, parts.path.strip("/")
    if not bucket:
        raise NotAFleet(f"{dest} names no bucket: give s3://BUCKET/PREFIX.")
    if prefix and any(segment in ("", ".", "..") for segment in prefix.split("/")):
        raise NotAFleet(
            f"{dest}: an object store's prefix has no empty, '.' or '..' parts (a key holds "
            "them as they are); give s3://BUCKET/PREFIX as its keys are named."
        )
    return Dest(dest, _s3(endpoint_url), f"{bucket}/{prefix}" if prefix else bucket, local=False)


def _s3(endpoint_url: str | None) -> pafs.FileSystem:
    import pyarrow.fs as pafs

    url = (
        endpoint_url or os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
    )
    options: dict[str, Any] = {
        "region": os.environ.get("AWS_REGION")
        or os.environ.get("AWS_DEFAULT_REGION")
        or "us-east-1"
    }
    if url:
        try:
            endpoint = urlsplit(url)
        except ValueError:
            endpoint = urlsplit("")
        if endpoint.scheme not in ("http", "https") or not endpoint.netloc:
            raise UsageError(
                f"--endpoint-url {url!r} is not an http:// or https:// URL (from --endpoint-url, "
                "$AWS_ENDPOINT_URL_S3 or $AWS_ENDPOINT_URL); give one like http://HOST:PORT."
            )
        options["endpoint_override"] = endpoint.netloc
        options["scheme"] = endpoint.scheme
    try:
        return pafs.S3FileSystem(**options)
    except (OSError, ValueError) as exc:
        raise FleetUnusable(f"cannot open the object store: {exc}.") from exc
