"""Arrays built from buffers (``scan.arrays``) equal pyarrow's own conversions.

Each helper stands for a pyarrow call that would import pandas; here both are made from the
same random values (with nulls, sliced, in several chunks) and compared.
"""

from __future__ import annotations

import itertools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hygiene_nb.scan import arrays

_TYPES = [pa.int8(), pa.uint8(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64()]

_values = st.lists(st.one_of(st.none(), st.integers(-100, 100)), max_size=40)


def _chunked(values: list[int | None], type_: pa.DataType, cuts: list[int]) -> pa.ChunkedArray:
    whole = pa.array(values, type_)
    edges = sorted({0, len(values), *(c % (len(values) + 1) for c in cuts)})
    return pa.chunked_array(
        [whole.slice(a, b - a) for a, b in itertools.pairwise(edges)], type=type_
    )


@settings(max_examples=200, deadline=None)
@given(
    values=_values,
    type_=st.sampled_from(_TYPES),
    cuts=st.lists(st.integers(0, 40), max_size=3),
    start=st.integers(0, 5),
)
def test_numbers_are_what_to_numpy_gives(
    values: list[int | None], type_: pa.DataType, cuts: list[int], start: int
) -> None:
    if pa.types.is_unsigned_integer(type_):
        values = [None if v is None else abs(v) for v in values]
    column = _chunked(values, type_, cuts)
    sliced = column.slice(min(start, len(column)))
    for arrow in (column, sliced, column.combine_chunks()):
        expected = arrow.to_numpy(zero_copy_only=False)
        got = arrays.numbers(arrow)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)  # NaN where null, on both sides
        fill = 7 if pa.types.is_unsigned_integer(type_) else -1
        filled = arrays.numbers(arrow, null=fill)
        assert filled.dtype == np.dtype(type_.to_pandas_dtype())
        expected = pc.fill_null(arrow, fill).to_numpy(zero_copy_only=False)
        np.testing.assert_array_equal(filled, expected)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.one_of(st.none(), st.booleans()), max_size=70),
    cuts=st.lists(st.integers(0, 70), max_size=3),
    start=st.integers(0, 9),
)
def test_a_mask_is_the_booleans_with_null_false(
    values: list[bool | None], cuts: list[int], start: int
) -> None:
    column = _chunked(values, pa.bool_(), cuts)  # type: ignore[arg-type]
    for arrow in (column, column.slice(min(start, len(column))), column.combine_chunks()):
        expected = np.asarray(arrow.to_numpy(zero_copy_only=False), dtype=bool)
        got = arrays.mask(arrow)
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, expected)


@settings(max_examples=100, deadline=None)
@given(
    values=st.lists(st.integers(-(2**31), 2**31 - 1), max_size=40),
    valid=st.lists(st.booleans(), min_size=40, max_size=40),
    flags=st.lists(st.booleans(), max_size=70),
)
def test_arrays_from_numpy_equal_pa_array(
    values: list[int], valid: list[bool], flags: list[bool]
) -> None:
    for dtype in (np.int32, np.int64, np.float32, np.float64):
        data = np.array(values, dtype=dtype)
        assert arrays.numeric_array(data).equals(pa.array(data))
        ok = np.array(valid[: len(values)], dtype=bool)
        expected = pa.array(data, mask=~ok)
        assert arrays.numeric_array(data, valid=ok).equals(expected)
    bits = np.array(flags, dtype=bool)
    assert arrays.bool_array(bits).equals(pa.array(bits))
    assert arrays.bool_array(bits[1::2]).equals(pa.array(bits[1::2]))  # not contiguous


@given(texts=st.lists(st.text(st.characters(blacklist_categories=["Cs"])), max_size=20))
def test_strings_and_scalars_equal_pa_array(texts: list[str]) -> None:
    assert arrays.string_array(texts).equals(pa.array(texts, pa.string()))
    for text in texts[:3]:
        assert arrays.string_scalar(text).equals(pa.scalar(text))
        raw = text.encode()
        assert arrays.binary_scalar(raw).equals(pa.scalar(raw, pa.binary()))


@pytest.mark.parametrize(
    ("type_", "value"),
    [
        (t, v)
        for t in (pa.int8(), pa.uint8(), pa.int32(), pa.int64())
        for v in (0, 1, 100, -1, -100)
        if v >= 0 or pa.types.is_signed_integer(t)
    ],
)
def test_int_and_bool_scalars_equal_pa_scalar(type_: pa.DataType, value: int) -> None:
    assert arrays.int_scalar(value, type_).equals(pa.scalar(value, type_))
    for flag in (True, False):
        assert arrays.bool_scalar(flag).equals(pa.scalar(flag))


def test_what_is_not_a_number_or_a_boolean_is_refused() -> None:
    with pytest.raises(TypeError):
        arrays.numbers(pa.array(["a"]))
    with pytest.raises(TypeError):
        arrays.mask(pa.array([1]))
    with pytest.raises(TypeError):
        arrays.numeric_array(np.ones(2, dtype=bool))
