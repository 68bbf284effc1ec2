"""The bounds on every number a caller gives, and the check that refuses one outside them.

The CLI's options use the same bounds (``MAX_ENTRIES``, ``MAX_SECONDS``, ``MAX_TTL``).
"""

from __future__ import annotations

from hygiene_nb.errors import UsageError

__all__ = ["MAX_ENTRIES", "MAX_SECONDS", "MAX_TTL", "check_bounded"]

# Bounds on every number a caller gives (the CLI's options use the same): beyond them a value
# overflows a C integer or a datetime, or makes a deadline that is already past.
MAX_ENTRIES = 10**12
MAX_SECONDS = 10**7  # about 115 days
MAX_TTL = 366 * 86_400  # a plan is valid for a year at most


def check_bounded(value: float, name: str, low: float, high: float) -> None:
    """Refuse a number outside [low, high], NaN and infinities included.

    Raises:
        UsageError: names the option and its range.
    """
    if not (isinstance(value, int | float) and low <= value <= high):  # NaN fails both tests
        raise UsageError(f"{name} must be a number from {low} to {high}, not {value!r}.")
