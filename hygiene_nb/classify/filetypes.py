"""What kind of file an entry is, by its name: the extension and a small table of categories.

An extension is what follows the last dot of the name, case-folded, with the compressed tars
kept whole (``.tar.gz``, ``.tar.bz2``, ``.tar.xz``, ``.tar.zst``). A name whose only dot is
its first character (``.bashrc``) or that ends in a dot has none. Categories are the ones
QDirStat and WinDirStat users know, kept small; every extension not in the table is ``other``
(docs/breakdowns.md lists the table).

The same rule is written twice: ``extension_of`` for Python and ``EXTENSION_SQL`` /
``category_sql`` for queries (a test holds them equal). The SQL is in the subset DuckDB and
Spark share: ``regexp_extract`` with a pattern that needs no backslash (Spark's string
literals would read one as an escape).
"""

from __future__ import annotations

import re

__all__ = [
    "CATEGORIES",
    "EXTENSION_SQL",
    "NO_EXTENSION",
    "category_of",
    "category_sql",
    "extension_of",
]

# category → its extensions (without the dot, lower case). Order is the documented order;
# an extension belongs to one category only (a test checks it).
CATEGORIES: dict[str, tuple[str, ...]] = {
    "image": (
        "jpg", "jpeg", "png", "gif", "bmp", "tif", "tiff", "webp", "heic", "heif", "avif",
        "svg", "ico", "psd", "xcf", "cr2", "cr3", "nef", "arw", "dng", "orf", "rw2", "exr",
    ),
    "video": (
        "mp4", "m4v", "mkv", "mov", "avi", "wmv", "flv", "webm", "mpg", "mpeg", "3gp",
        "m2ts", "mts", "vob", "ogv",
    ),
    "audio": (
        "mp3", "wav", "flac", "aac", "ogg", "oga", "opus", "m4a", "wma", "aif", "aiff",
        "mid", "midi", "ape", "alac",
    ),
    "archive": (
        "zip", "tar", "gz", "tgz", "bz2", "tbz2", "xz", "txz", "zst", "lz4", "lzma", "7z",
        "rar", "cpio", "z", "tar.gz", "tar.bz2", "tar.xz", "tar.zst",
    ),
    "document": (
        "pdf", "doc", "docx", "odt", "rtf", "txt", "md", "rst", "tex", "xls", "xlsx", "ods",
        "ppt", "pptx", "odp", "epub", "djvu", "pages", "key", "numbers", "org",
    ),
    "code": (
        "py", "pyi", "pyx", "ipynb", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "rs", "go",
        "java", "kt", "scala", "js", "mjs", "cjs", "ts", "tsx", "jsx", "rb", "php", "pl",
        "sh", "bash", "zsh", "fish", "lua", "r", "jl", "swift", "m", "cs", "fs", "sql",
        "css", "scss", "less", "html", "htm", "vue", "svelte", "toml", "yaml", "yml", "ini",
        "cfg", "conf", "mk", "cmake", "gradle",
    ),
    "data": (
        "csv", "tsv", "json", "jsonl", "ndjson", "xml", "parquet", "arrow", "feather",
        "avro", "orc", "h5", "hdf5", "hdf", "nc", "npy", "npz", "mat", "pkl", "pickle",
        "rds", "rdata", "dta", "sav", "safetensors", "pt", "pth", "ckpt", "onnx", "tfrecord",
    ),
    "database": (
        "db", "sqlite", "sqlite3", "mdb", "accdb", "dbf", "frm", "ibd", "myd", "myi", "ldb",
        "mdbx", "kdb", "wal",
    ),
    "disk image": (
        "iso", "img", "dmg", "vmdk", "vdi", "qcow", "qcow2", "vhd", "vhdx", "ova", "wim",
    ),
    "package": (
        "deb", "rpm", "apk", "whl", "egg", "jar", "war", "ear", "gem", "nupkg", "snap",
        "flatpak", "appimage", "msi", "pkg", "crate", "conda",
    ),
    "log": ("log", "journal", "trace"),
    "object/binary": (
        "o", "obj", "a", "so", "dll", "dylib", "lib", "exe", "bin", "class", "pyc", "pyo",
        "elc", "wasm", "ko", "pch", "gch", "rlib", "rmeta", "dat",
    ),
}  # fmt: skip
OTHER = "other"
NO_EXTENSION = ""  # shown as "(none)"

_BY_EXTENSION = {ext: cat for cat, exts in CATEGORIES.items() for ext in exts}
# At least one character before the dot (so ``.bashrc`` has none); tars kept whole.
_PATTERN = "(?s)^.+?[.](tar[.](gz|bz2|xz|zst)|[^.]+)$"
_REGEX = re.compile(_PATTERN)

EXTENSION_SQL = f"regexp_extract(lower(name), '{_PATTERN}', 1)"


def extension_of(name: str) -> str:
    """The extension of a file name (``NO_EXTENSION`` when it has none)."""
    found = _REGEX.fullmatch(name.lower())
    return found.group(1) if found else NO_EXTENSION


def category_of(extension: str) -> str:
    """The category of an extension (``other`` for one not in ``CATEGORIES``)."""
    return _BY_EXTENSION.get(extension, OTHER)


def category_sql(extension: str = EXTENSION_SQL) -> str:
    """An SQL expression giving the category of the extension expression ``extension``."""
    cases = " ".join(
        f"WHEN {extension} IN ({', '.join(repr(e) for e in exts)}) THEN '{cat}'"
        for cat, exts in CATEGORIES.items()
    )
    return f"CASE {cases} ELSE '{OTHER}' END"
