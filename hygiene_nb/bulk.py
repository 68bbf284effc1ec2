"""Making many Python objects at once without the cycle collector walking every large container.

CPython's cycle collector runs a full pass each time the objects that survived earlier passes
grow by a quarter, and a full pass visits every reference of every container alive: the
widget's pandas frame of a 1M-entry snapshot and its sorted paths are about five million of
them. Building 100,000 decisions' objects while those are alive ran several full passes: the
widget took 5.1-7.8 s to open with the collector on and 4.1-4.8 s with it paused (1M entries,
100,000 decisions, four runs each, interleaved; 2026-12-02, the project's 2-core VM).

``paused_collection`` pauses only the cycle collector, and only for the call it wraps: objects
are still freed as soon as nothing refers to them, and cycles made meanwhile are collected on
the collector's next pass once it runs again. Where the collector was already off (a caller's
choice), it stays off.
"""

from __future__ import annotations

import functools
import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import ParamSpec, TypeVar

__all__ = ["paused_collection", "without_collection"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


@contextmanager
def paused_collection() -> Iterator[None]:
    """The cycle collector off inside the block, back as it was after (however it ends).

    A pause inside another finds the collector off and leaves it off: the outer one turns it
    back on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def without_collection(func: Callable[_P, _R]) -> Callable[_P, _R]:
    """``func`` run inside ``paused_collection``: for calls that make objects by the thousand."""

    @functools.wraps(func)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with paused_collection():
            return func(*args, **kwargs)

    return wrapper
