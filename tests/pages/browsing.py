"""Driving Debian's Chromium headless with Playwright against the live server.

Never downloads a browser: it launches the `chromium` on PATH
(Debian's package, which `deploy/local/dev.sh test` installs). Screenshots of every page go to
`test-artifacts/screenshots/` (gitignored) so a person can look at what the tests saw.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from playwright.sync_api import Browser, Page, sync_playwright

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium for the test session."""
    # Playwright's sync API keeps an event loop in this thread; the ORM calls of the tests
    # themselves are plain synchronous code, so Django's guard is lifted for them.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


def log_in(page: Page, base: str, name: str) -> None:
    """Log in through the login form, as a person does."""
    page.goto(f"{base}/login/")
    page.get_by_label("User name").fill(name)
    page.get_by_label("Password").fill(f"{name}-pw-123")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(f"{base}/")


def screenshot(page: Page, name: str) -> Path:
    """A full-page screenshot saved as a test artifact."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def mark_page(page: Page) -> None:
    """Leave a mark in the page's JavaScript state; a reload would wipe it."""
    page.evaluate("window.__simrunNotReloaded = true")


def was_not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.__simrunNotReloaded === true"))
