"""The browser the end-to-end tests drive: Debian's chromium through Playwright, launched here.

``chromium`` gives a function that launches it (a context manager yielding the browser, closed
on leaving), so a test prepares what it shows (a report, a notebook server) before the browser
and its event loop start. No ``playwright install``: the system's ``/usr/bin/chromium`` only,
headless, with nothing reaching the network on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",
]


@contextmanager
def _launched() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@pytest.fixture
def chromium() -> Callable[[], AbstractContextManager[Any]]:
    """Launch Debian's chromium with ``with chromium() as browser:`` (skips if it is missing)."""
    if not CHROMIUM.exists():
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    return _launched
