"""Classification: every snapshot row gets a risk, the deciding rule, a claim and a confidence.

Pure and vectorized: one Python pass over directories only (where inheritance and evidence are
decided), array operations for everything else. Precedence, weakest first: unknown < inside a
personal folder < the entry's own built-in rule < a built-in rule covering its directory
(outermost wins) < user rules < excluded/unreadable < protection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.classify.content import CONTENT_COLUMNS, RISK_ORDER, content_columns
from hygiene_nb.classify.protect import (
    CONFIG,
    CONTAINS,
    CREDENTIAL,
    CREDENTIAL_EXTENSIONS,
    CREDENTIAL_FILES,
    CREDENTIAL_PREFIXES,
    GIT_TRACKED,
    KEEP,
    KEEP_MARKERS,
    PASSES_DOWN,
    PROJECT_MANIFEST,
    VCS,
    VCS_DIRS,
    ProtectContext,
    Protection,
    dir_protection_keys,
    protect_dir,
)
from hygiene_nb.classify.rules import (
    BUILTIN_RULES,
    DIR_RULE_PREFIXES,
    DIR_RULE_SUFFIXES,
    DIR_RULES_BY_NAME,
    DIR_RULES_BY_PLACE,
    EVIDENCE_NAMES,
    PACKAGE_RULES,
    PROJECT_MANIFESTS,
    PROJECT_MARKERS,
    Risk,
    Rule,
    UserRule,
    dir_rule,
)
from hygiene_nb.classify.summary import counted_once
from hygiene_nb.scan import arrays
from hygiene_nb.scan.snapshot import entry_paths

__all__ = [
    "CLASSIFY_COLUMNS",
    "CLASSIFY_INPUTS",
    "PACKAGE_KEY_CLAIM",
    "PACKAGE_KEY_MATERIAL",
    "VERDICT_COLUMNS",
    "VERDICT_SCHEMA",
    "Verdict",
    "classify_inputs",
    "classify_table",
    "classify_verdicts",
    "join_path",
    "with_verdicts",
]

CLASSIFY_COLUMNS = [
    "parent", "name", "parent_raw", "name_raw", "kind", "depth", "size", "alloc", "mtime_ns",
    "inode", "dev", "nlink", "tree_bytes", "tree_alloc", "tree_files", "tree_latest_mtime_ns",
    "partial", "error", "excluded", "mount_point", "budget_cut", "ctime_ns", "uid", "gid", "mode",
]  # fmt: skip

# What classification adds to each row; risk, rule, group and claim are dictionary-encoded (a
# few dozen distinct values), decoded to strings for callers that want plain columns.
VERDICT_SCHEMA = pa.schema(
    [
        ("risk", pa.dictionary(pa.int32(), pa.string())),
        ("rule", pa.dictionary(pa.int32(), pa.string())),
        ("group", pa.dictionary(pa.int32(), pa.string())),
        ("claim", pa.dictionary(pa.int32(), pa.string())),
        ("confidence", pa.float32()),
        ("group_root", pa.bool_()),
        # a counted group root inside no other counted root of its group: the pattern index's
        # entries (a log file inside a logs directory counts with the directory, not again)
        ("outermost", pa.bool_()),
        ("protected", pa.bool_()),
        # whether its own bytes count: not excluded, and for a hard-linked inode its first
        # counted name in the file (the sums count each inode once, at that name)
        ("counted", pa.bool_()),
        # what a directory holds, by risk (classify.content); a non-directory: its own risk
        ("content_risk", pa.dictionary(pa.int32(), pa.string())),
        *((name, pa.int64()) for name in CONTENT_COLUMNS),
        # a directory's largest counted child (its tree bytes, else its own): "largest
        # directories" leaves out one that a single child holds half of (``summary.chain_dirs``)
        ("largest_child", pa.int64()),
    ]
)
VERDICT_COLUMNS = tuple(VERDICT_SCHEMA.names)

# The columns classification itself reads (CLASSIFY_COLUMNS are what its callers show); the
# times only for user rules (their age conditions): the built-in rules never read them.
CLASSIFY_INPUTS = (
    "parent", "name", "kind", "depth", "size", "mtime_ns", "tree_bytes",
    "tree_latest_mtime_ns", "error", "excluded", "nlink", "dev", "inode",
)  # fmt: skip
_TIMES = ("mtime_ns", "tree_latest_mtime_ns")


def classify_inputs(user_rules: Sequence[UserRule]) -> tuple[str, ...]:
    """The columns ``classify_verdicts`` reads with ``user_rules`` (every one when there are)."""
    return CLASSIFY_INPUTS if user_rules else tuple(c for c in CLASSIFY_INPUTS if c not in _TIMES)


Ids = npt.NDArray[np.int32]
Mask = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Verdict:
    """What classification says of an entry."""

    risk: Risk
    rule: str
    group: str | None
    claim: str
    confidence: float


UNKNOWN = Verdict(
    Risk.UNKNOWN, "no-rule", None, "No rule recognizes this: look before deciding", 0.0
)
EXCLUDED = Verdict(
    Risk.UNKNOWN,
    "excluded",
    None,
    "Excluded from the scan (.hygieneignore or --exclude): not classified",
    0.0,
)
UNREADABLE = Verdict(
    Risk.UNKNOWN, "unreadable", None, "Could not be read: what it holds is unknown, not empty", 0.0
)
PACKAGE_KEY_MATERIAL = "package-key-material"
PACKAGE_KEY_CLAIM = (
    "Key-like file shipped inside a package (a test fixture or a public CA bundle): it belongs "
    "to the package, not to you"
)
IN_PERSONAL = Verdict(
    Risk.PERSONAL,
    "in-personal-folder",
    "personal",
    "Inside one of your personal folders: probably yours",
    0.6,
)


def join_path(parent: str, name: str) -> str:
    """``parent`` + ``/`` + ``name`` without doubling the slash of ``/``."""
    return parent + name if parent.endswith("/") else f"{parent}/{name}"


class _Table:
    """The verdicts in play, numbered; rows hold verdict ids."""

    def __init__(self) -> None:
        self.verdicts: list[Verdict] = []
        self._ids: dict[Verdict, int] = {}

    def id(self, verdict: Verdict) -> int:
        if verdict not in self._ids:
            self._ids[verdict] = len(self.verdicts)
            self.verdicts.append(verdict)
        return self._ids[verdict]

    def protection(self, p: Protection) -> int:
        return self.id(Verdict(Risk.HIGH, p.rule, None, p.claim, 1.0))


def _strong(rule: Rule) -> Verdict:
    return Verdict(rule.risk, rule.rule_id, rule.group, rule.claim, rule.confidence)


def _weak(rule: Rule) -> Verdict:
    assert rule.evidence is not None
    ev = rule.evidence
    return Verdict(Risk.CAUTION, rule.rule_id, rule.group, ev.missing_claim, ev.missing_confidence)


_MARKER_NAMES = frozenset(PROJECT_MARKERS)
_NONE: frozenset[str] = frozenset()
_TAG_RULE = next(rule for rule in BUILTIN_RULES if rule.tagged)
# Built-in directory verdicts a CACHEDIR.TAG outranks: the generic application cache, and the
# fallbacks of rules whose evidence is missing (the tag is the evidence then).
_TAG_OUTRANKS = frozenset(
    {"user-cache"} | {r.evidence.missing_claim for r in BUILTIN_RULES if r.evidence is not None}
)


def _tag_verdict(tool: str) -> Verdict:
    """The verdict of a directory holding a valid CACHEDIR.TAG, naming the tool where known."""
    rule = _TAG_RULE
    if not tool:
        return _strong(rule)
    claim = f"Cache directory tagged by {tool} (CACHEDIR.TAG): the tool recreates it"
    return Verdict(rule.risk, rule.rule_id, rule.group, claim, rule.confidence)


def _tag_wins(verdict: int, t: _Table) -> bool:
    """Whether a directory's tag decides over its own built-in verdict (id, -1: none)."""
    if verdict < 0:
        return True
    found = t.verdicts[verdict]
    return found.rule in _TAG_OUTRANKS or found.claim in _TAG_OUTRANKS


def _dir_rule_candidates(dirs: pa.Table, ctx: ProtectContext) -> list[bool]:
    """Per directory row of ``dirs``: whether any built-in directory rule could match it.

    A rule matches by name, or by place (directly in a home-relative directory); the others are
    known to match none without asking ``_dir_verdict``.
    """
    names = arrays.string_array(sorted(DIR_RULES_BY_NAME))
    hit = pc.is_in(dirs.column("name"), value_set=names)
    for prefix in DIR_RULE_PREFIXES:
        hit = pc.or_(hit, pc.starts_with(dirs.column("name"), prefix))
    for suffix in DIR_RULE_SUFFIXES:
        hit = pc.or_(hit, pc.ends_with(dirs.column("name"), suffix))
    places = {
        h if not u else join_path(h, u)
        for h in ctx.homes
        for _, rule in DIR_RULES_BY_PLACE
        for u in rule.under_home
    }
    if places:
        parent = dirs.column("parent").cast(pa.string())
        hit = pc.or_(hit, pc.is_in(parent, value_set=arrays.string_array(sorted(places))))
    flags: list[bool] = arrays.mask(hit).tolist()  # null: False
    return flags


def _dir_verdict(
    name: str,
    parent: str,
    ctx: ProtectContext,
    siblings: dict[str, set[str]],
    regular: dict[str, set[str]],
    t: _Table,
) -> tuple[int, bool, bool]:
    """The built-in verdict of a directory by its own name and place; (id, absorbs, package).

    ``dir_rule`` decides, on the evidence names beside it (``siblings``). ``package``: it is a
    dependency or build directory with its evidence standing beside it as regular files
    (``regular``: the same question the act-time re-check asks of the disk), so key-like files
    inside are the packages' own.
    """
    found = dir_rule(name, parent, ctx, siblings.get(parent, _NONE))
    if found is None:
        return -1, False, False
    rule, strong = found
    verdict = _strong(rule) if strong else _weak(rule)
    as_files = dir_rule(name, parent, ctx, regular.get(parent, _NONE))
    package = as_files is not None and as_files[1] and as_files[0].rule_id in PACKAGE_RULES
    return t.id(verdict), rule.absorbs, package


@dataclass
class _PassedDown:
    """What each directory with children passes down, by its slot in the parent dictionary.

    Arrays one longer than the dictionary: the last slot (index -1, the root's missing parent)
    passes nothing down.
    """

    absorb: Ids  # verdict id of the outermost absorbing rule covering it
    protect: Ids  # verdict id of a protection that covers everything inside
    personal: Mask
    in_worktree: Mask  # inside a git work tree whose tracked files are known
    project: Mask  # inside a project (a marker in it or above), outside dependencies
    package: Mask  # inside an evidenced dependency or build directory (PACKAGE_RULES)
    up: npt.NDArray[np.int64]  # its own parent's slot (-1: none)
    slot: npt.NDArray[np.int64]  # per row: the directory's own slot (-1: not one, or no children)

    @classmethod
    def empty(cls, slots: int, rows: int) -> _PassedDown:
        return cls(
            np.full(slots + 1, -1, dtype=np.int32),
            np.full(slots + 1, -1, dtype=np.int32),
            np.zeros(slots + 1, dtype=bool),
            np.zeros(slots + 1, dtype=bool),
            np.zeros(slots + 1, dtype=bool),
            np.zeros(slots + 1, dtype=bool),
            np.full(slots + 1, -1, dtype=np.int64),
            np.full(rows, -1, dtype=np.int64),
        )


def _column(table: pa.Table, name: str) -> npt.NDArray[np.generic]:
    return arrays.numbers(table.column(name))


def _parent_index(table: pa.Table) -> tuple[npt.NDArray[np.int64], pa.Array]:
    """Per row, an index into the distinct parent paths (-1 for the root row), and those paths."""
    column = table.column("parent").unify_dictionaries() if table.num_rows else None
    if column is None or column.num_chunks == 0:
        return np.full(table.num_rows, -1, dtype=np.int64), arrays.string_array([])
    dictionary = column.chunk(0).dictionary.cast(pa.string())
    indices = pa.chunked_array([c.indices for c in column.chunks], type=column.type.index_type)
    return arrays.numbers(indices, null=-1).astype(np.int64), dictionary


def _siblings(
    table: pa.Table, names: set[str], kind: pa.ChunkedArray
) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """Parent path → which of ``names`` stand in it, and which evidence names as regular files.

    ``names``: the evidence and user-rule sibling names (every ``EVIDENCE_NAMES`` among them).
    A name starting with ``*`` is a suffix pattern: ``*.csproj`` stands in every directory
    holding a name that ends ``.csproj``. A symlink or a directory by an evidence name is no
    evidence that a package lies beside it (the act-time re-check reads the disk the same way):
    the second mapping holds regular files alone.
    """
    exact = frozenset(n for n in names if not n.startswith("*"))
    patterns = sorted(n for n in names if n.startswith("*"))
    name = table.column("name")
    hit = arrays.mask(pc.is_in(name, arrays.string_array(sorted(exact))))
    hit |= _ends_with_any(name, [p[1:] for p in patterns])
    found = table.select(["parent", "name"]).filter(arrays.bool_array(hit))
    is_file = arrays.mask(pc.equal(kind.filter(arrays.bool_array(hit)), _FILE_KIND))
    out: dict[str, set[str]] = {}
    regular: dict[str, set[str]] = {}
    for parent, entry, file in zip(
        found.column("parent").to_pylist(),
        found.column("name").to_pylist(),
        is_file.tolist(),
        strict=True,
    ):
        if parent is None:  # the root's own name is no evidence for what it holds
            continue
        present = {p for p in patterns if entry.endswith(p[1:])}
        if entry in exact:
            present.add(entry)
        out.setdefault(parent, set()).update(present)
        evidence = present & EVIDENCE_NAMES if file else None
        if evidence:
            regular.setdefault(parent, set()).update(evidence)
    return out, regular


_FILE_KIND = arrays.string_scalar("file")


def _evidence_names(user_rules: Sequence[UserRule]) -> set[str]:
    names = {*KEEP_MARKERS, *PROJECT_MARKERS}
    for rule in BUILTIN_RULES:
        if rule.evidence is not None:
            for group in rule.evidence.all_of:
                names.update(group)
        names.update(rule.beside)
    names.update(u.sibling for u in user_rules if u.sibling)
    return names


class _Endings:
    """The names of a table, lower-cased, with each one's last extension found once.

    A rule's extensions are many (22 for media files): testing a plain one (``.log``, one dot)
    is then a lookup in the few distinct extensions, not a pass over every name.
    """

    def __init__(self, name: pa.ChunkedArray, extensions: pa.DictionaryArray) -> None:
        self.name = name
        self.lower = pc.utf8_lower(name)
        self._ext = extensions  # ``last_extensions(name)``

    def lower_ends_with_any(self, endings: Sequence[str]) -> Mask:
        """Per name, whether its lower-case text ends with one of ``endings`` (lower case)."""
        plain = [e for e in endings if e.startswith(".") and e.count(".") == 1]
        others = [e for e in endings if e not in plain]
        out = _ends_with_any(self.lower, others) if others else np.zeros(len(self.name), bool)
        if plain:
            known = arrays.mask(pc.is_in(self._ext.dictionary, arrays.string_array(plain)))
            codes = arrays.numbers(self._ext.indices, null=-1).astype(np.int64)
            out |= np.append(known, False)[codes]  # no extension (-1): the appended False
        return out


def last_extensions(name: pa.ChunkedArray) -> pa.DictionaryArray:
    """Per name, its last extension in lower case (``.gz`` of ``A.tar.GZ``; null: none).

    Allocated by the system allocator, which hands the scratch back at once: found on a
    thread of its own, Arrow's default allocator (jemalloc in the command, mimalloc in a
    notebook) would keep that thread's freed memory for that thread alone.
    """
    pool = pa.system_memory_pool()
    lower = pc.utf8_lower(name, memory_pool=pool)
    found = pc.extract_regex(lower, r"(?P<ext>\.[^.]*)$", memory_pool=pool)
    del lower
    last = pc.struct_field(found, [0], memory_pool=pool)
    encoded: pa.DictionaryArray = pc.dictionary_encode(last, memory_pool=pool).combine_chunks(
        memory_pool=pool
    )
    return encoded


def _file_rules(
    table: pa.Table, endings: _Endings, pidx: npt.NDArray[np.int64], in_project: Mask, t: _Table
) -> Ids:
    """Own built-in verdicts of non-directories by name, extension and suffix (rule order).

    ``in_project``: per row, whether it lies in a project (for ``in_project`` rules).
    """
    name, lower = endings.name, endings.lower
    out = np.full(table.num_rows, -1, dtype=np.int32)
    for rule in BUILTIN_RULES:
        if rule.kind != "file":
            continue
        if rule.in_project:
            hits = in_project & (out < 0) & endings.lower_ends_with_any(rule.extensions)
            out[hits] = t.id(_strong(rule))
            continue
        if rule.same_stem is not None:
            rows = _beside_same_stem(name, lower, pidx, rule.extensions, rule.same_stem)
            rows = rows[out[rows] < 0]
            out[rows] = t.id(_strong(rule))
            continue
        if not (rule.names or rule.extensions or rule.suffixes):
            continue
        mask = endings.lower_ends_with_any(rule.extensions)
        if rule.names:
            mask |= arrays.mask(pc.is_in(name, arrays.string_array(rule.names)))
        for suffix in rule.suffixes:
            mask |= arrays.mask(pc.ends_with(name, suffix))
        hits = mask & (out < 0)
        out[hits] = t.id(_strong(rule))
    return out


def _ends_with_any(names: pa.Array | pa.ChunkedArray, endings: Sequence[str]) -> Mask:
    """Per name, whether it ends with one of ``endings``.

    A few endings: one ``ends_with`` each (a byte compare); many: one regex pass, which costs
    about as much as ten of them.
    """
    if len(names) == 0:
        return np.zeros(0, dtype=bool)
    if len(endings) <= _FEW_ENDINGS:
        out = np.zeros(len(names), dtype=bool)
        for ending in endings:
            out |= arrays.mask(pc.ends_with(names, ending))
        return out
    regex = "(" + "|".join(re.escape(e) for e in endings) + ")$"
    hit = pc.match_substring_regex(names, regex)
    return arrays.mask(hit)  # null: False


_FEW_ENDINGS = 8
_SLASH = arrays.string_scalar("/")


def _beside_same_stem(
    name: pa.ChunkedArray,
    lower: pa.ChunkedArray,
    pidx: npt.NDArray[np.int64],
    extensions: Sequence[str],
    stem_ext: str,
) -> npt.NDArray[np.int64]:
    """Rows whose name ends with one of ``extensions`` beside ``<stem><stem_ext>`` (same parent).

    ``paper.aux`` is beside ``paper.tex``; the extensions compare without case, the stem with.
    """
    own = np.flatnonzero(_ends_with_any(lower, [stem_ext]))
    if own.size == 0:
        return np.zeros(0, dtype=np.int64)
    near = np.flatnonzero(np.isin(pidx, np.unique(pidx[own])))  # rows beside some .tex
    found = near[_ends_with_any(lower.take(arrays.numeric_array(near)), extensions)]
    if found.size == 0:
        return np.zeros(0, dtype=np.int64)

    def keys(rows: npt.NDArray[np.int64], stems: pa.Array | pa.ChunkedArray) -> pa.Array:
        where = arrays.numeric_array(pidx[rows]).cast(pa.string())
        joined: pa.Array = pc.binary_join_element_wise(where, stems, _SLASH)
        return joined

    own_names = name.take(arrays.numeric_array(own))
    have = keys(own, pc.utf8_slice_codeunits(own_names, 0, -len(stem_ext)))
    found_names = name.take(arrays.numeric_array(found))
    found_lower = lower.take(arrays.numeric_array(found))
    stems = found_names
    for ext in sorted(extensions, key=len):  # the longest ending that matches decides the stem
        cut = pc.utf8_slice_codeunits(found_names, 0, -len(ext))
        stems = pc.if_else(pc.ends_with(found_lower, ext), cut, stems)
    hit = pc.is_in(keys(found, stems), value_set=have)
    beside: npt.NDArray[np.int64] = found[arrays.mask(hit)]
    return beside


def _file_protection(
    table: pa.Table, in_home: Mask, in_package: Mask, key: Mask, ctx: ProtectContext, t: _Table
) -> Ids:
    """Protection of non-directories by their own name (credentials, gitfiles, markers).

    ``in_home``: per row, whether its parent is one of the homes (its dotfiles are config).
    ``in_package``: whether it lies in an evidenced dependency or build directory, where a
    key-like name (``key``) protects nothing (``package-key-material``).
    """
    name = table.column("name")
    out = np.full(table.num_rows, -1, dtype=np.int32)

    def put(mask: Mask, p: Protection) -> None:
        hits = mask & (out < 0)
        out[hits] = t.protection(p)

    put(arrays.mask(pc.is_in(name, arrays.string_array(sorted(VCS_DIRS)))), VCS)
    put(arrays.mask(pc.is_in(name, arrays.string_array(KEEP_MARKERS))), KEEP)
    put(arrays.mask(pc.is_in(name, arrays.string_array(sorted(CREDENTIAL_FILES)))), CREDENTIAL)
    for prefix in CREDENTIAL_PREFIXES:
        put(arrays.mask(pc.starts_with(name, prefix)), CREDENTIAL)
    put(key & ~in_package, CREDENTIAL)
    put(in_home & arrays.mask(pc.starts_with(name, ".")), CONFIG)
    return out


_MANIFEST_NAMES = arrays.string_array(sorted(m for m in PROJECT_MANIFESTS if not m.startswith("*")))
_MANIFEST_SUFFIXES = tuple(m[1:] for m in PROJECT_MANIFESTS if m.startswith("*"))


def _is_manifest(name: pa.Array | pa.ChunkedArray) -> Mask:
    """Per row, whether its name is a project manifest's or lockfile's."""
    hit = arrays.mask(pc.is_in(name, value_set=_MANIFEST_NAMES))  # null: False
    return hit | _ends_with_any(name, _MANIFEST_SUFFIXES)


def _glob_regex(pattern: str) -> str:
    """Translate an fnmatch glob into an anchored RE2 regex (Arrow's engine).

    ``*`` matches anything, ``?`` one character, ``[…]``/``[!…]`` a class; the whole text must
    match (``fnmatch.translate`` emits constructs RE2 lacks, so this is done here).
    """
    out = ["^"]
    i = 0
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and "]" in pattern[i + 1 :] + pattern[i : i + 1]:
            end = pattern.index("]", i + 1 if pattern[i : i + 1] in ("!", "]") else i)
            body = pattern[i:end]
            i = end + 1
            negate = body.startswith("!")
            body = body[1:] if negate else body
            body = body.replace("\\", "\\\\").replace("^", "\\^")
            out.append(f"[{'^' if negate else ''}{body}]")
        else:
            out.append(re.escape(c))
    out.append("$")
    return "".join(out)


def _user_rule_ids(
    table: pa.Table,
    user_rules: Sequence[UserRule],
    siblings: dict[str, set[str]],
    now_ns: int,
    t: _Table,
) -> Ids:
    """The first matching user rule per row (-1 where none matches)."""
    out = np.full(table.num_rows, -1, dtype=np.int32)
    if not user_rules:
        return out
    name = table.column("name")
    kind = table.column("kind").cast(pa.string())
    nbytes = pc.coalesce(table.column("tree_bytes"), table.column("size"))
    newest = pc.coalesce(table.column("tree_latest_mtime_ns"), table.column("mtime_ns"))
    paths = entry_paths(table) if any(u.path for u in user_rules) else None
    parents = table.column("parent").cast(pa.string())
    for rule in user_rules:
        mask = arrays.bool_array(np.ones(table.num_rows, dtype=bool))
        if rule.name is not None:
            mask = pc.and_(mask, pc.match_substring_regex(name, _glob_regex(rule.name)))
        if rule.path is not None and paths is not None:
            mask = pc.and_(mask, pc.match_substring_regex(paths, _glob_regex(rule.path)))
        if rule.kind is not None:
            mask = pc.and_(mask, pc.equal(kind, arrays.string_scalar(rule.kind)))
        if rule.min_bytes is not None:
            mask = pc.and_(
                mask, pc.greater_equal(nbytes, arrays.int_scalar(rule.min_bytes, pa.int64()))
            )
        if rule.min_age_days is not None:
            cutoff = now_ns - int(rule.min_age_days * 86400 * 1e9)
            mask = pc.and_(mask, pc.less_equal(newest, arrays.int_scalar(cutoff, pa.int64())))
        if rule.sibling is not None:
            having = [p for p, names in siblings.items() if rule.sibling in names]
            mask = pc.and_(mask, pc.is_in(parents, arrays.string_array(having)))
        hits = arrays.mask(mask)  # null: False
        hits &= out < 0
        verdict = Verdict(rule.risk, f"user:{rule.rule_id}", "user", rule.claim, rule.confidence)
        out[hits] = t.id(verdict)
    return out


def _git_tracked(
    table: pa.Table, pidx: npt.NDArray[np.int64], in_tree: Mask, ctx: ProtectContext
) -> Mask:
    """Rows that are files git tracks (paths computed only under work trees)."""
    out = np.zeros(table.num_rows, dtype=bool)
    if not ctx.git.tracked:
        return out
    candidates = np.flatnonzero(in_tree[np.maximum(pidx, 0)] & (pidx >= 0))
    if candidates.size == 0:
        return out
    paths = entry_paths(table.select(["parent", "name"]).take(arrays.numeric_array(candidates)))
    tracked = pc.is_in(paths, arrays.string_array(sorted(ctx.git.tracked)))
    out[candidates] = arrays.mask(tracked)
    return out


def classify_table(
    table: pa.Table,
    ctx: ProtectContext,
    *,
    user_rules: Sequence[UserRule] = (),
    now_ns: int,
) -> pa.Table:
    """``table`` with the verdict columns of ``classify_verdicts``, as plain strings."""
    verdicts = classify_verdicts(table, ctx, user_rules=user_rules, now_ns=now_ns)
    return with_verdicts(table, verdicts)


def classify_verdicts(
    table: pa.Table,
    ctx: ProtectContext,
    *,
    user_rules: Sequence[UserRule] = (),
    now_ns: int,
) -> pa.Table:
    """Classify every row of a snapshot table (holding at least ``classify_inputs(user_rules)``).

    Args:
        table: snapshot rows.
        ctx: protection facts (home, store, root, git-tracked files, keep markers).
        user_rules: the user's rules, in file order (the first that matches wins).
        now_ns: the current time, for age conditions.

    Returns:
        One row per row of ``table`` (``VERDICT_SCHEMA``): ``risk``, ``rule``, ``group``,
        ``claim``, ``confidence`` (what decided it), ``group_root`` (this entry is itself a
        match of its group, not inside one) and ``protected``.
    """
    # The names' extensions are Arrow's work alone (it lets go of the interpreter): found on
    # another core while the directories are walked here.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hygiene-nb-names") as pool:
        names = [pool.submit(last_extensions, table.column("name"))]  # taken out once
        return _classify(table, ctx, names, user_rules=user_rules, now_ns=now_ns)


def _classify(
    table: pa.Table,
    ctx: ProtectContext,
    names: list[Future[pa.DictionaryArray]],
    *,
    user_rules: Sequence[UserRule],
    now_ns: int,
) -> pa.Table:
    t = _Table()
    n = table.num_rows
    pidx, parents = _parent_index(table)
    kind = table.column("kind").cast(pa.string())
    is_dir = arrays.mask(pc.equal(kind, arrays.string_scalar("dir")))
    siblings, regular = _siblings(table, _evidence_names(user_rules), kind)
    del kind  # its text (1M rows: 8 MB) is not read again
    keep_dirs = frozenset(
        p for p, names in siblings.items() if any(m in names for m in KEEP_MARKERS)
    )
    ctx = ProtectContext(
        ctx.root,
        ctx.home,
        ctx.store,
        ctx.git,
        ctx.keep_dirs | keep_dirs,
        ctx.above_root,
        ctx.other_homes,
        ctx.cache_tags,
    )

    own = np.full(n, -1, dtype=np.int32)
    prot = np.full(n, -1, dtype=np.int32)
    down = _walk_directories(table, is_dir, pidx, parents, own, prot, ctx, siblings, regular, t)

    # What each distinct parent passes down, then per row through the parent index.
    absorb_p, protect_p, personal_p = down.absorb, down.protect, down.personal
    tracked_tree, project_p = down.in_worktree, down.project
    inherited_absorb = absorb_p[pidx]
    inherited_protect = protect_p[pidx]

    files = ~is_dir
    in_project = project_p[pidx] & files
    endings = _Endings(table.column("name"), names.pop().result())
    file_own = _file_rules(table, endings, pidx, in_project, t)
    own[files] = file_own[files]
    homes = arrays.string_array(sorted(ctx.homes))
    home_parent = np.append(arrays.mask(pc.is_in(parents, value_set=homes)), False)
    in_package = down.package[pidx]
    key = _key_like(endings) & files
    del endings  # the lower-cased names and their extensions (1M names: about 40 MB)
    file_prot = _file_protection(table, home_parent[pidx], in_package, key, ctx, t)
    prot[files & (prot < 0)] = file_prot[files & (prot < 0)]
    tracked = _git_tracked(table, pidx, tracked_tree, ctx) & files
    prot[tracked & (prot < 0)] = t.protection(GIT_TRACKED)
    maybe = np.flatnonzero(in_project & (prot < 0))
    manifest = maybe[_is_manifest(table.column("name").take(arrays.numeric_array(maybe)))]
    prot[manifest] = t.protection(PROJECT_MANIFEST)
    covered = inherited_protect >= 0
    prot[covered] = inherited_protect[covered]
    # what is no longer read goes now: the sums below are the peak of a classification
    del covered, inherited_protect, file_own, file_prot, tracked, maybe, manifest, in_project

    verdict = np.full(n, t.id(UNKNOWN), dtype=np.int32)
    verdict[personal_p[pidx]] = t.id(IN_PERSONAL)
    has_own = own >= 0
    verdict[has_own] = own[has_own]
    group_root = has_own.copy()
    absorbed = inherited_absorb >= 0
    verdict[absorbed] = inherited_absorb[absorbed]
    group_root[absorbed] = False
    del has_own, own, absorbed, inherited_absorb
    _package_key_material(verdict, key & in_package & (prot < 0), t)
    del key, in_package
    user = _user_rule_ids(table, user_rules, siblings, now_ns, t)
    verdict[user >= 0] = user[user >= 0]
    group_root[user >= 0] = False
    del user
    excluded = arrays.mask(table.column("excluded"))  # null: False
    verdict[excluded] = t.id(EXCLUDED)
    verdict[~arrays.mask(pc.is_null(table.column("error")))] = t.id(UNREADABLE)
    _mark_ancestors(is_dir, pidx, down, prot, t)
    protected = prot >= 0
    verdict[protected] = prot[protected]
    del prot
    risk_of = np.array([RISK_ORDER.index(v.risk.value) for v in t.verdicts], dtype=np.int8)
    counted = counted_once(table, among=~excluded)  # excluded entries count nowhere
    content = content_columns(
        risk_of[verdict],
        arrays.numbers(table.column("size"), null=0).astype(np.int64, copy=False),
        counted,
        is_dir,
        pidx,
        down.slot,
        np.asarray(down.up[:-1], dtype=np.int64),
        _column(table, "depth").astype(np.int64),
    )
    content.append(_largest_child(table, pidx, down.slot, ~excluded))
    roots = group_root & ~protected & ~excluded
    outermost = _outermost_roots(verdict, roots, is_dir, pidx, down, t)
    # given back before the columns are built, which then reuse that memory (see ``_encoded``)
    del pidx, down, is_dir, excluded, roots
    return _verdict_columns(verdict, group_root, outermost, protected, counted, t, content)


def _outermost_roots(
    verdict: Ids,
    roots: Mask,
    is_dir: Mask,
    pidx: npt.NDArray[np.int64],
    down: _PassedDown,
    t: _Table,
) -> Mask:
    """Of the ``roots`` (group roots that count), those inside no other root of their group.

    A root is inside another when one of its ancestor directories (up the parent slots) is a
    root of the same group; every root's ancestors are tested a level per step, all at once.
    """
    group_of = {g: i for i, g in enumerate(sorted({v.group for v in t.verdicts if v.group}))}
    codes = np.array([group_of.get(v.group or "", -1) for v in t.verdicts] + [-1], np.int64)
    group = codes[verdict]
    rows = np.flatnonzero(roots & (group >= 0))
    holders = rows[is_dir[rows] & (down.slot[rows] >= 0)]  # only a directory holds anything
    out = np.zeros(len(verdict), dtype=bool)
    out[rows] = True
    if holders.size == 0:
        return out
    width = len(group_of)
    held = np.unique(down.slot[holders] * width + group[holders])  # (slot, group) of a root
    up = np.asarray(down.up, dtype=np.int64)
    at, g = pidx[rows], group[rows]
    live = np.flatnonzero(at >= 0)
    while live.size:
        inside = np.isin(at[live] * width + g[live], held)
        out[rows[live[inside]]] = False
        live = live[~inside]
        at[live] = up[at[live]]
        live = live[at[live] >= 0]
    return out


def _largest_child(
    table: pa.Table, pidx: npt.NDArray[np.int64], slot: npt.NDArray[np.int64], counted: Mask
) -> pa.Array:
    """Per directory, the largest bytes of one of its counted children (tree bytes, else own).

    Null for anything but a directory, and for a directory no counted child of which has a
    size. ``pidx``: per row, its parent's slot (-1: the root); ``slot``: a directory's own.
    """
    tree = arrays.numbers(table.column("tree_bytes"), null=-1).astype(np.int64, copy=False)
    own = arrays.numbers(table.column("size"), null=-1).astype(np.int64, copy=False)
    ranked = np.where(tree >= 0, tree, own)
    del tree, own
    largest = np.full(int(slot.max(initial=-1)) + 1, -1, dtype=np.int64)
    at = counted & (pidx >= 0) & (ranked >= 0)
    np.maximum.at(largest, pidx[at], ranked[at])
    out = np.full(table.num_rows, -1, dtype=np.int64)
    has_slot = slot >= 0
    out[has_slot] = largest[slot[has_slot]]
    return arrays.numeric_array(out, valid=out >= 0)


def _walk_directories(
    table: pa.Table,
    is_dir: Mask,
    pidx: npt.NDArray[np.int64],
    parents: pa.Array,
    own: Ids,
    prot: Ids,
    ctx: ProtectContext,
    siblings: dict[str, set[str]],
    regular: dict[str, set[str]],
    t: _Table,
) -> _PassedDown:
    """One pass over directories, a level at a time, shallowest first: verdicts, inheritance.

    A directory's state is kept at its path's slot in the parent dictionary (only directories
    with children have one); a directory reads its parent's at ``pidx``. What depends on a
    directory alone (its protection, whether a rule or a cache tag could match it) is found
    first; a level then reads its parents' states at once, asks the rules of the few that need
    it, and writes its own states for the level below.
    """
    rows = np.flatnonzero(is_dir)
    dirs = table.select(["parent", "name", "depth"]).take(arrays.numeric_array(rows))
    depth = arrays.numbers(dirs.column("depth")).astype(np.int64)
    path_array = entry_paths(dirs)
    candidate = np.asarray(_dir_rule_candidates(dirs, ctx), dtype=bool)
    above = pidx[rows]  # -1 for the root: the last slot, which holds what nothing passes down
    own_slot = arrays.numbers(pc.index_in(path_array, value_set=parents), null=-1).astype(np.int64)
    trees = frozenset(ctx.git.worktrees)
    is_root = arrays.mask(pc.is_null(dirs.column("parent")))
    in_trees = arrays.mask(pc.is_in(path_array, value_set=arrays.string_array(sorted(trees))))
    key_paths, key_names = dir_protection_keys(ctx)
    asked = arrays.mask(
        pc.is_in(path_array, value_set=arrays.string_array(sorted(key_paths)))
    ) | arrays.mask(pc.is_in(dirs.column("name"), value_set=arrays.string_array(sorted(key_names))))
    tags = dict(ctx.cache_tags)
    has_tool = arrays.mask(pc.is_in(path_array, value_set=arrays.string_array(sorted(tags))))
    # Python text only for the few directories a question in Python is asked about
    few = np.flatnonzero(asked | candidate | has_tool | is_root)
    few_rows = arrays.numeric_array(few)
    at = {i: k for k, i in enumerate(few.tolist())}
    few_paths = path_array.take(few_rows).to_pylist()
    few_names = dirs.column("name").take(few_rows).to_pylist()
    few_parents = dirs.column("parent").take(few_rows).to_pylist()
    root_in_tree = np.zeros(len(rows), dtype=bool)
    for i in np.flatnonzero(is_root).tolist():
        root_in_tree[i] = _under(few_paths[at[i]], trees)
    found: list[Protection | None] = [None] * len(rows)
    for i in np.flatnonzero(asked).tolist():  # anywhere else protect_dir finds nothing
        found[i] = protect_dir(few_paths[at[i]], few_names[at[i]], ctx)
    if ctx.above_root is not None:
        for i in np.flatnonzero(is_root).tolist():
            found[i] = ctx.above_root  # the root sits inside something protected
    has_found = np.array([f is not None for f in found], dtype=bool)
    passes = np.array([f is not None and f.rule in PASSES_DOWN for f in found], dtype=bool)
    tool_of = {i: tags[few_paths[at[i]]] for i in np.flatnonzero(has_tool).tolist()}
    marked = sorted(p for p, ns in siblings.items() if not ns.isdisjoint(_MARKER_NAMES))
    has_marker = arrays.mask(pc.is_in(path_array, value_set=arrays.string_array(marked)))

    down = _PassedDown.empty(len(parents), table.num_rows)
    order = np.argsort(depth, kind="stable")
    bounds = np.flatnonzero(np.diff(depth[order])) + 1
    for level in np.split(order, bounds):
        a, r = above[level], rows[level]
        s_absorb, s_protect = down.absorb[a], down.protect[a]
        s_personal, s_package = down.personal[a], down.package[a]
        in_tree = down.in_worktree[a] | in_trees[level] | root_in_tree[level]
        s_project = down.project[a] | root_in_tree[level]
        inherits = s_protect >= 0
        prot[r[inherits]] = s_protect[inherits]
        for j in np.flatnonzero(~inherits & has_found[level]).tolist():
            prot[r[j]] = t.protection(found[level[j]])
        s_protect = np.where(~inherits & passes[level], prot[r], s_protect).astype(np.int32)
        asks = (s_absorb < 0) & ~is_root[level] & (candidate[level] | has_tool[level])
        for j in np.flatnonzero(asks).tolist():
            i, row = int(level[j]), int(r[j])
            verdict, absorbs = -1, False
            if candidate[i]:
                verdict, absorbs, package = _dir_verdict(
                    few_names[at[i]], few_parents[at[i]], ctx, siblings, regular, t
                )
                s_package[j] = package
            tool = tool_of.get(i)
            # a protected directory's tag counts for nothing (a home's would cover the home)
            if tool is not None and prot[row] < 0 and _tag_wins(verdict, t):
                verdict, absorbs = t.id(_tag_verdict(tool)), True
                s_package[j] = False
            own[row] = verdict
            if absorbs:
                s_absorb[j] = verdict
            if verdict >= 0 and t.verdicts[verdict].risk is Risk.PERSONAL:
                s_personal[j] = True
        # nothing inside a dependency or build directory is a project; a marker starts one
        s_project = (s_absorb < 0) & (s_project | has_marker[level])
        k = own_slot[level]
        has = k >= 0  # it has children: they read this
        k = k[has]
        down.absorb[k], down.protect[k], down.personal[k] = (
            s_absorb[has],
            s_protect[has],
            s_personal[has],
        )
        down.in_worktree[k], down.project[k] = in_tree[has], s_project[has]
        down.package[k], down.up[k] = s_package[has], a[has]
        down.slot[r[has]] = k
    return down


def _key_like(endings: _Endings) -> Mask:
    """Per row, whether its name has a key's extension (``CREDENTIAL_EXTENSIONS``)."""
    return endings.lower_ends_with_any(CREDENTIAL_EXTENSIONS)


def _package_key_material(verdict: Ids, rows: Mask, t: _Table) -> None:
    """Key-like files inside an evidenced package: ``package-key-material``, in its group.

    They keep the group of the directory that absorbs them (a venv's CA bundle is part of the
    venv), so counts by group stay whole.
    """
    for absorbing in np.unique(verdict[rows]).tolist():
        group = t.verdicts[absorbing].group
        found = Verdict(Risk.CAUTION, PACKAGE_KEY_MATERIAL, group, PACKAGE_KEY_CLAIM, 0.7)
        verdict[rows & (verdict == absorbing)] = t.id(found)


def _under(path: str, trees: frozenset[str]) -> bool:
    """Whether ``path`` lies inside one of the work trees (the root inside a repository)."""
    return any(path.startswith(t.rstrip("/") + "/") for t in trees)


def _mark_ancestors(
    is_dir: Mask, pidx: npt.NDArray[np.int64], down: _PassedDown, prot: Ids, t: _Table
) -> None:
    """Every directory above a protected entry gets ``contains-protected`` (if not protected).

    From the protected rows' parents up the parent slots, one level per step, for all at once.
    """
    protected_rows = np.flatnonzero(prot >= 0)
    if protected_rows.size == 0:
        return
    up = np.asarray(down.up[:-1], dtype=np.int64)
    marked = np.zeros(up.size, dtype=bool)
    frontier = np.unique(pidx[protected_rows])
    frontier = frontier[frontier >= 0]
    while frontier.size:
        frontier = frontier[~marked[frontier]]
        marked[frontier] = True
        above = up[frontier]
        frontier = np.unique(above[above >= 0])
    dir_rows = np.flatnonzero(is_dir & (prot < 0) & (down.slot >= 0))
    prot[dir_rows[marked[down.slot[dir_rows]]]] = t.protection(CONTAINS)


def _encoded(ids: Ids, values: Sequence[str | None]) -> pa.Array:
    """Per row, ``values[id]`` as a dictionary array of strings (None: null).

    The indices are taken in numpy and shared with Arrow: they reuse the memory the
    classification's own arrays gave back, where Arrow's allocator would add to the peak.
    """
    distinct = [v for v in dict.fromkeys(values) if v is not None]
    where = {v: i for i, v in enumerate(distinct)}
    codes = np.array([-1 if v is None else where[v] for v in values], dtype=np.int32)
    per_row = codes[ids]
    valid = None if codes.min(initial=0) >= 0 else per_row >= 0
    indices = arrays.numeric_array(per_row, valid=valid)
    return pa.DictionaryArray.from_arrays(indices, arrays.string_array(distinct))


def _verdict_columns(
    verdict: Ids,
    group_root: Mask,
    outermost: Mask,
    protected: Mask,
    counted: Mask,
    t: _Table,
    content: list[pa.Array],
) -> pa.Table:
    ids = verdict.astype(np.int32, copy=False)
    v = t.verdicts
    confidence = np.array([x.confidence for x in v], dtype=np.float32)
    columns = [
        _encoded(ids, [x.risk.value for x in v]),
        _encoded(ids, [x.rule for x in v]),
        _encoded(ids, [x.group for x in v]),
        _encoded(ids, [x.claim for x in v]),
        arrays.numeric_array(confidence[ids]),
        arrays.bool_array(group_root & ~protected),
        arrays.bool_array(outermost),
        arrays.bool_array(protected),
        arrays.bool_array(counted),
        *content,
    ]
    return pa.Table.from_arrays(columns, schema=VERDICT_SCHEMA)


def with_verdicts(
    table: pa.Table,
    verdicts: pa.Table,
    names: Sequence[str] = VERDICT_COLUMNS,
    *,
    decode: bool = True,
) -> pa.Table:
    """``table`` with the columns ``names`` of ``verdicts`` (row for row).

    ``decode``: the text columns as plain strings (else dictionary-encoded, as kept).
    """
    out = table
    for name in names:
        column = verdicts.column(name)
        if decode and pa.types.is_dictionary(VERDICT_SCHEMA.field(name).type):
            column = column.cast(pa.string())
        out = out.append_column(name, column)
    return out
