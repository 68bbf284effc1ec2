"""Every error class has a stable kebab-case code, an exit code and a docstring."""

from __future__ import annotations

import inspect
import re

from hygiene_nb import errors


def error_classes() -> list[type[errors.HygieneError]]:
    return [
        obj
        for _, obj in inspect.getmembers(errors, inspect.isclass)
        if issubclass(obj, errors.HygieneError)
    ]


def test_codes_are_kebab_case_and_unique() -> None:
    codes = [cls.code for cls in error_classes()]
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", c) for c in codes), codes
    assert len(codes) == len(set(codes))


def test_every_error_is_documented_in_the_tree_and_has_a_docstring() -> None:
    tree = errors.__doc__ or ""
    for cls in error_classes():
        assert cls.__doc__, cls
        assert cls.__name__ in tree and cls.code in tree, cls
        assert cls.exit_code in (1, 2, 3, 4)


def test_usage_errors_exit_2_and_lookup_errors_are_lookup_errors() -> None:
    assert errors.RootInvalid("x").exit_code == 2
    assert isinstance(errors.SnapshotNotFound("x"), LookupError)
