"""The guarded executor: the only code that moves or destroys user files."""

from __future__ import annotations

__all__: list[str] = []
