"""Headless Debian Chromium driven by Playwright, and a tab that records every console error and page error."""

import contextlib
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from playwright.async_api import Browser, ConsoleMessage, Dialog, Error, Page, async_playwright

CHROMIUM = "/usr/bin/chromium"
# No network but loopback: no component updates, no sync, no QUIC probes, no first-run pages.
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 390, "height": 844}


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """The machine's Chromium (`apt-get install chromium`); Playwright downloads no browser of its own here."""
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class Tab:
    """A page and what went wrong in it: console messages of type error, and uncaught exceptions."""

    page: Page
    errors: list[str] = field(default_factory=list)
    expected: list[re.Pattern[str]] = field(default_factory=list)

    def expect_error(self, pattern: str) -> None:
        """A console error this test causes on purpose (the browser logs a 401, 403 or 404 answer)."""
        self.expected.append(re.compile(pattern))

    def unexpected(self) -> list[str]:
        return [e for e in self.errors if not any(p.search(e) for p in self.expected)]

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"console: {message.text} at {message.location.get('url')}")

    def _page_error(self, error: Error) -> None:
        self.errors.append(f"page error: {error}")


async def _accept(dialog: Dialog) -> None:
    await dialog.accept()


@contextlib.asynccontextmanager
async def prompts_answered(page: Page, text: str) -> AsyncIterator[list[str]]:
    """Within it, each dialog of the page is answered `text` (a prompt's answer) instead of accepted as it stands;
    the questions asked, in order."""
    asked: list[str] = []

    async def answer(dialog: Dialog) -> None:
        asked.append(dialog.message)
        await dialog.accept(text)

    page.remove_listener("dialog", _accept)
    page.on("dialog", answer)
    try:
        yield asked
    finally:
        page.remove_listener("dialog", answer)
        page.on("dialog", _accept)


@contextlib.asynccontextmanager
async def tab(browser: Browser, viewport: dict[str, int] = WIDE) -> AsyncIterator[Tab]:
    """A fresh context (its own session storage) with one page; its console errors are collected."""
    context = await browser.new_context(viewport=viewport)  # type: ignore[arg-type]
    page = await context.new_page()
    opened = Tab(page)
    page.on("console", opened._console)
    page.on("pageerror", opened._page_error)
    page.on("dialog", _accept)  # every confirmation is answered yes
    try:
        yield opened
    finally:
        await context.close()
