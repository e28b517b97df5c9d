"""A browser-test server with auth ON (the default of ``drupe serve``) and its users.

``auth_site(data_dir)`` creates the users of ``PASSWORDS`` in the database (``root`` an admin,
the others members) before the server starts, then serves the real app with the default
``AuthSettings`` except a small per-user failure limit (``MAX_FAILURES``, so a test can reach
"too many attempts" quickly; the per-address limit is raised so that one test's failures never
lock the others out, all of them coming from 127.0.0.1). ``api_as(site, name)`` is an httpx
client signed in through ``POST /api/auth/login`` that sends the session's CSRF token, as the
UI does. ``sign_in(page, site, name)`` signs in through the sign-in page.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from drupe.persistence.db import open_database
from drupe.settings import AuthSettings
from tests.browser.conftest import DEFAULT_MODEL, Drupe, serve

PASSWORDS = {
    "root": "root-password-333",
    "alice": "alice-password-1",
    "bob": "bob-password-22",
    "carol": "carol-password-4444",
}
ADMINS = frozenset({"root"})
MAX_FAILURES = 3


async def _create_users(data_dir: Path) -> None:
    async with open_database(None, data_dir=data_dir) as db:
        for name, password in PASSWORDS.items():
            if name in ADMINS:
                await db.users.create(name, password=password, role="admin")
            else:
                await db.users.create(name, password=password, role="member")


@contextmanager
def auth_site(data_dir: Path) -> Iterator[Drupe]:
    # In a thread of its own: Playwright's sync API keeps an event loop running in this one.
    creator = threading.Thread(target=asyncio.run, args=(_create_users(data_dir),))
    creator.start()
    creator.join(timeout=60)
    auth = AuthSettings(max_failures_per_user=MAX_FAILURES, max_failures_per_address=500)
    with serve(data_dir, f'default_model = "{DEFAULT_MODEL}"\n', auth=auth) as site:
        yield site


@contextmanager
def api_as(site: Drupe, name: str) -> Iterator[httpx.Client]:
    """A client signed in as ``name`` for the block."""
    with httpx.Client(base_url=site.url, timeout=20) as client:
        login = {"username": name, "password": PASSWORDS[name]}
        reply = client.post("/api/auth/login", json=login)
        assert reply.status_code == 200, reply.text
        client.headers["X-CSRF-Token"] = reply.json()["csrfToken"]
        yield client


def sign_in(page: Page, site: Drupe, name: str, password: str | None = None) -> None:
    """Opens the UI and signs in as ``name`` through the sign-in page."""
    page.goto(f"{site.url}/#/")
    expect(page.get_by_test_id("sign-in-page")).to_be_visible()
    page.get_by_test_id("sign-in-username").fill(name)
    page.get_by_test_id("sign-in-password").fill(password or PASSWORDS[name])
    page.get_by_test_id("sign-in-submit").click()
    expect(page.get_by_test_id("user-name")).to_have_text(name)
