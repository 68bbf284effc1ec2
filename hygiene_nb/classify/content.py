"""What a directory holds, by risk: the split every view colours a directory by.

The risk mix counts each entry's own bytes at its own verdict. A directory's own verdict says
what removing it *whole* would mean (``contains-protected`` for a project holding one
manifest), which is not what its bytes are. So each directory also gets the split of the bytes
inside it (itself included) by risk, counted as the risk mix counts them (a hard-linked inode
once, at its first name in the snapshot), and one word for that split, ``content_risk``:

- the risk holding at least ``UNIFORM_SHARE`` (80 %) of the bytes, when none of the rest is
  ``high`` or ``personal``: a directory is never coloured by one risk while some of its other
  bytes are a key or a person's document, however few (a public CA bundle shipped in a
  virtualenv does not change its story, a private key does);
- ``mixed`` otherwise: the views say so and show the split.

The root's split is the risk mix itself (a test holds the two equal).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from hygiene_nb.classify.rules import Risk
from hygiene_nb.scan import arrays

__all__ = [
    "CONTENT_COLUMNS",
    "CONTENT_RISKS",
    "MIXED",
    "UNIFORM_SHARE",
    "content_columns",
    "content_risk_of",
]

MIXED = "mixed"
UNIFORM_SHARE = 0.8  # format.md, notebooks.md and rules.md state it (a test holds them equal)
RISK_ORDER = tuple(r.value for r in Risk)
CONTENT_RISKS = (*RISK_ORDER, MIXED)
CONTENT_COLUMNS = tuple(f"content_{r}" for r in RISK_ORDER)
_STRONG = np.array([r in (Risk.HIGH, Risk.PERSONAL) for r in Risk])

Rows = npt.NDArray[np.int64]


def content_risk_of(split: npt.NDArray[np.int64], own: npt.NDArray[np.int64]) -> Rows:
    """Per row of ``split`` (bytes per risk, in ``Risk`` order): its content risk's index.

    An index into ``CONTENT_RISKS`` (the risks, then ``mixed``). ``own``: per row, the index of
    the entry's own risk, used where it holds no bytes at all.
    """
    rows = np.arange(len(split))
    total = split.sum(axis=1)
    top = split.argmax(axis=1)
    share = np.divide(split[rows, top], total, out=np.ones(len(split)), where=total > 0)
    others_strong = (split > 0) & _STRONG
    others_strong[rows, top] = False
    uniform = (share >= UNIFORM_SHARE) & ~others_strong.any(axis=1)
    out = np.where(total > 0, top, own).astype(np.int64)
    out[(total > 0) & ~uniform] = len(RISK_ORDER)
    return out


def content_columns(
    risk: npt.NDArray[np.integer[Any]],
    size: npt.NDArray[np.int64],
    once: npt.NDArray[np.bool_],
    is_dir: npt.NDArray[np.bool_],
    pidx: Rows,
    slot: Rows,
    up: Rows,
    depth: Rows,
) -> list[pa.Array]:
    """``content_risk`` and one ``content_<risk>`` byte column per risk, for every row.

    Args:
        risk: per row, the index of its risk in ``Risk`` order (any integer type: a byte).
        size: per row, its own apparent bytes.
        once: per row, whether its bytes count (False for the 2nd, 3rd… name of an inode).
        is_dir: per row, whether it is a directory.
        pidx: per row, its parent directory's slot (-1: the root's row).
        slot: per row, the directory's own slot (-1: not a directory, or one with no children).
        up: per slot, its parent's slot (-1: none).
        depth: per row, its depth below the root.

    Returns:
        ``content_risk`` (dictionary-encoded: a risk, or ``mixed``; for a non-directory its own
        risk) and the five byte columns (null for non-directories).
    """
    slots = len(up)
    bytes_ = np.where(once, size, 0).astype(np.int64, copy=False)
    totals = np.zeros((slots + 1, len(RISK_ORDER)), dtype=np.int64)  # the last: a sink
    # A directory with children counts its own bytes in its own slot, anything else in its
    # parent's; then each slot is added to its parent's, deepest first.
    at = np.where(slot >= 0, slot, pidx)
    np.add.at(totals, (at, risk), bytes_)
    del at  # the byte columns below reuse its memory
    slot_depth = np.full(slots, -1, dtype=np.int64)
    has_slot = slot >= 0
    slot_depth[slot[has_slot]] = depth[has_slot]
    parents = np.asarray(up, dtype=np.int64)
    for level in range(int(slot_depth.max(initial=-1)), 0, -1):
        ks = np.flatnonzero(slot_depth == level)
        np.add.at(totals, parents[ks], totals[ks])
    dirs = np.flatnonzero(is_dir)
    split = np.zeros((dirs.size, len(RISK_ORDER)), dtype=np.int64)
    split[np.arange(dirs.size), risk[dirs]] = bytes_[dirs]  # a childless directory: itself
    del bytes_
    with_slot = slot[dirs] >= 0
    split[with_slot] = totals[slot[dirs][with_slot]]
    word = risk.astype(np.int32)  # a non-directory: its own risk
    word[dirs] = content_risk_of(split, risk[dirs].astype(np.int64))
    columns: list[pa.Array] = [
        pa.DictionaryArray.from_arrays(
            arrays.numeric_array(word), arrays.string_array(CONTENT_RISKS)
        )
    ]
    validity = pa.py_buffer(np.packbits(is_dir, bitorder="little"))
    for i in range(len(RISK_ORDER)):
        values = np.zeros(len(risk), dtype=np.int64)
        values[dirs] = split[:, i]
        columns.append(
            pa.Array.from_buffers(
                pa.int64(),
                len(risk),
                [validity, pa.py_buffer(values)],
                null_count=len(risk) - dirs.size,
            )
        )
    return columns
