"""Arrow arrays and scalars built from bytes and numpy buffers, and read back the same way.

pyarrow imports pandas (0.2-0.4 s and 30 MiB) the first time it converts a Python or numpy
value: ``pa.array``, ``pa.scalar``, a Python value given to a compute function (``pc.equal(x,
"dir")``), ``to_numpy`` and ``np.asarray`` of an array all ask whether it is a pandas object
first. The scan and the classification build their arrays here instead, from the buffers of
numpy arrays (shared, not copied) and from encoded bytes, and read fixed-width columns back as
views of their buffers, so that ``scan`` and ``summary`` never load pandas (tests pin both).

Results are those of the pyarrow calls they stand for: ``numbers`` gives what
``to_numpy(zero_copy_only=False)`` gives (a column with nulls as float64 with NaN there),
``mask`` what ``np.asarray(..., dtype=bool)`` of that gives (null is False).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeAlias

import numpy as np
import numpy.typing as npt
import pyarrow as pa

__all__ = [
    "binary_scalar",
    "bool_array",
    "bool_scalar",
    "int_scalar",
    "mask",
    "numbers",
    "numeric_array",
    "one_chunk",
    "string_array",
    "string_scalar",
]

Arrow: TypeAlias = pa.Array | pa.ChunkedArray


def int_scalar(value: int, type_: pa.DataType) -> pa.Scalar:
    """``value`` as an Arrow integer scalar of ``type_``."""
    raw = value.to_bytes(type_.bit_width // 8, "little", signed=value < 0)
    return pa.Array.from_buffers(type_, 1, [None, pa.py_buffer(raw)])[0]


def bool_scalar(value: bool) -> pa.Scalar:
    """``value`` as an Arrow boolean scalar."""
    return pa.Array.from_buffers(pa.bool_(), 1, [None, pa.py_buffer(bytes([int(value)]))])[0]


def _encoded_array(data: Sequence[bytes], type_: pa.DataType) -> pa.Array:
    offsets = np.zeros(len(data) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, data), dtype=np.int64, count=len(data)), out=offsets[1:])
    if offsets[-1] > np.iinfo(np.int32).max:
        raise OverflowError(f"{offsets[-1]} bytes of text: more than one Arrow string array holds")
    buffers = [None, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(b"".join(data))]
    return pa.Array.from_buffers(type_, len(data), buffers)


def string_array(values: Sequence[str]) -> pa.Array:
    """``values`` as an Arrow string array (no nulls)."""
    return _encoded_array([v.encode("utf-8") for v in values], pa.string())


def string_scalar(value: str) -> pa.Scalar:
    """``value`` as an Arrow string scalar."""
    return string_array([value])[0]


def binary_scalar(value: bytes) -> pa.Scalar:
    """``value`` as an Arrow binary scalar."""
    return _encoded_array([value], pa.binary())[0]


def _validity(valid: npt.NDArray[np.bool_] | None) -> tuple[pa.Buffer | None, int]:
    if valid is None:
        return None, 0
    return pa.py_buffer(np.packbits(valid, bitorder="little")), int(valid.size - valid.sum())


def bool_array(values: npt.NDArray[np.bool_]) -> pa.Array:
    """A boolean numpy array as an Arrow boolean array (its bits packed: a copy, 1/8 the size)."""
    flat = np.ascontiguousarray(values, dtype=bool)
    bits = pa.py_buffer(np.packbits(flat, bitorder="little"))
    return pa.Array.from_buffers(pa.bool_(), flat.size, [None, bits], null_count=0)


def numeric_array(
    values: npt.NDArray[np.generic], valid: npt.NDArray[np.bool_] | None = None
) -> pa.Array:
    """A fixed-width numeric numpy array as an Arrow array of the same type, sharing its memory.

    ``valid``: per element, False where the result is null. The numpy array must not be
    changed afterwards (the Arrow array reads the same memory).
    """
    flat = np.ascontiguousarray(values)
    if flat.dtype == np.bool_:
        raise TypeError("a boolean array: use bool_array")
    bitmap, nulls = _validity(valid)
    type_ = pa.from_numpy_dtype(flat.dtype)
    return pa.Array.from_buffers(type_, flat.size, [bitmap, pa.py_buffer(flat)], null_count=nulls)


def one_chunk(values: Arrow) -> pa.Array:
    """``values`` as one array: a chunked array of one chunk gives that chunk, with no copy.

    (``ChunkedArray.combine_chunks`` copies even a single chunk: 1M paths, about 110 MB.)
    """
    if isinstance(values, pa.Array):
        return values
    return values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()


def _chunks(values: Arrow) -> list[pa.Array]:
    return list(values.chunks) if isinstance(values, pa.ChunkedArray) else [values]


def _bits(buffer: pa.Buffer | None, offset: int, length: int) -> npt.NDArray[np.bool_]:
    if buffer is None:
        return np.ones(length, dtype=bool)
    packed = np.frombuffer(buffer, dtype=np.uint8)
    bits = np.unpackbits(packed, count=offset + length, bitorder="little")[offset:]
    return bits.view(bool)


def _valid(chunk: pa.Array) -> npt.NDArray[np.bool_] | None:
    """Per element, whether it is valid; None when none is null."""
    if chunk.null_count == 0:
        return None
    return _bits(chunk.buffers()[0], chunk.offset, len(chunk))


def mask(values: Arrow) -> npt.NDArray[np.bool_]:
    """A boolean Arrow array as a numpy bool array; a null is False."""
    if not pa.types.is_boolean(values.type):
        raise TypeError(f"not a boolean array: {values.type}")
    parts = []
    for chunk in _chunks(values):
        bits = _bits(chunk.buffers()[1], chunk.offset, len(chunk)) if len(chunk) else None
        part = np.zeros(0, dtype=bool) if bits is None else bits
        valid = _valid(chunk)
        parts.append(part if valid is None else part & valid)
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.zeros(0, dtype=bool)


def _numpy_dtype(type_: pa.DataType) -> np.dtype[np.generic]:
    if not (pa.types.is_integer(type_) or pa.types.is_floating(type_)):
        raise TypeError(f"not a fixed-width number: {type_}")
    dtype: np.dtype[np.generic] = np.dtype(type_.to_pandas_dtype())
    return dtype


def numbers(values: Arrow, *, null: float | None = None) -> npt.NDArray[np.generic]:
    """An integer or floating-point Arrow array as numpy, a read-only view where it can be.

    Without nulls: its own type. With nulls: ``null`` in their place when given (the type
    kept), else NaN there (integers as float64), as ``to_numpy(zero_copy_only=False)`` gives.
    """
    dtype = _numpy_dtype(values.type)
    chunks = _chunks(values)
    has_nulls = any(c.null_count for c in chunks)
    widened = dtype if pa.types.is_floating(values.type) else np.dtype(np.float64)
    parts = []
    for chunk in chunks:
        if len(chunk) == 0:
            continue
        raw = np.frombuffer(chunk.buffers()[1], dtype=dtype, count=chunk.offset + len(chunk))
        part: npt.NDArray[np.generic] = raw[chunk.offset :]
        if has_nulls:
            valid = _valid(chunk)
            part = part.astype(widened) if null is None else part.copy()
            if valid is not None:
                part[~valid] = np.nan if null is None else null
        parts.append(part)
    if len(parts) == 1:
        return parts[0]
    if parts:
        return np.concatenate(parts)
    return np.zeros(0, dtype=dtype)
