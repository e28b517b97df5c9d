"""The settings pages in a real browser (issue 22, item 5 in part).

* Gateway keys, signed in (``auth_site``): alice opens Settings from her user menu, creates a
  scoped key, sees it once (never again after a reload), uses it on ``/v1`` and sees that
  request counted on its row; bob's key is not listed to her; she revokes hers and the server
  refuses it. root (an admin) sees both keys with their owners.
* MCP servers (auth off): a server running ``tests/tools/mcp_servers/demo_server.py`` shows
  ``connected`` with its tools, one that exits at once shows ``failed`` and its error; the
  Channels tab is there for the local admin, not for a member.

Screenshots of the keys and MCP pages at 1280x800 and 390x844 go to ``docs/ui/``; axe-core finds
no serious violation on either, at either size.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.auth_site import api_as, auth_site, sign_in
from tests.browser.conftest import DEFAULT_MODEL, Drupe, serve
from tests.browser.test_layout_a11y import serious_violations

pytestmark = pytest.mark.browser

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "ui"
DEMO_SERVER = Path(__file__).resolve().parents[1] / "tools" / "mcp_servers" / "demo_server.py"
SIZES = ((1280, 800), (390, 844))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    with auth_site(tmp_path_factory.mktemp("settings-auth")) as running:
        yield running


def _shoot(page: Page, name: str) -> None:
    for width, height in SIZES:
        page.set_viewport_size({"width": width, "height": height})
        page.wait_for_timeout(150)
        page.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
        assert serious_violations(page) == [], (name, width)
    page.set_viewport_size({"width": 1280, "height": 800})


def _chat_with(site: Drupe, key: str, model: str = "scripted:echo") -> httpx.Response:
    return httpx.post(
        f"{site.url}/v1/chat/completions",
        headers={"authorization": f"Bearer {key}"},
        json={"model": model, "messages": [{"role": "user", "content": "ping"}]},
        timeout=20,
    )


def test_a_member_creates_a_scoped_key_sees_it_once_uses_and_revokes_it(
    site: Drupe, browser: Browser
) -> None:
    with api_as(site, "bob") as bob:
        bob_key = bob.post("/api/keys", json={"name": "bob's key"}).json()
    context = browser.new_context(viewport={"width": 1280, "height": 800})
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    page = context.new_page()
    try:
        sign_in(page, site, "alice")
        page.get_by_test_id("user-menu-button").click()
        page.get_by_test_id("menu-settings-link").click()
        expect(page.get_by_test_id("keys-page")).to_be_visible()
        expect(page.get_by_test_id("settings-tab-keys")).to_have_attribute("aria-current", "page")
        expect(page.get_by_test_id("settings-tab-channels")).to_have_count(0)  # admins only
        expect(page.get_by_test_id("keys-empty")).to_be_visible()

        page.get_by_label("Name").fill("editor plugin")
        page.get_by_label("Models").fill("scripted:echo, scripted:lorem")
        page.get_by_label("Requests per minute").fill("0")
        page.get_by_test_id("key-create").click()
        expect(page.get_by_test_id("keys-error")).to_contain_text("Requests per minute")
        page.get_by_label("Requests per minute").fill("30")
        page.get_by_test_id("key-create").click()
        shown = page.get_by_test_id("new-key")
        expect(shown).to_be_visible()
        plaintext = shown.inner_text()
        assert plaintext.startswith("drp_") and len(plaintext) == 36
        page.get_by_test_id("copy-key").click()
        assert page.evaluate("navigator.clipboard.readText()") == plaintext

        row = page.get_by_test_id("key-row")
        expect(row).to_have_count(1)  # bob's key is not hers to see
        expect(row.get_by_test_id("key-scope")).to_contain_text(
            "models: scripted:echo, scripted:lorem"
        )
        expect(row.get_by_test_id("key-scope")).to_contain_text("30/min")
        expect(row.get_by_test_id("key-requests")).to_have_text("0")
        assert bob_key["id"] not in page.content()

        assert _chat_with(site, plaintext).status_code == 200
        page.reload()
        expect(page.get_by_test_id("key-row")).to_have_count(1)
        expect(page.get_by_test_id("new-key-box")).to_have_count(0)
        assert plaintext not in page.content()  # shown once only
        expect(page.get_by_test_id("key-requests")).to_have_text("1")
        _shoot(page, "settings-keys")

        page.get_by_test_id("key-revoke").click()
        expect(page.get_by_test_id("key-row")).to_have_attribute("data-revoked", "true")
        with api_as(site, "alice") as alice:
            (stored,) = alice.get("/api/keys").json()["items"]
        assert stored["revoked"] is True and stored["name"] == "editor plugin"
        page.wait_for_timeout(11_000)  # the gateway's cache of verified keys (10 s)
        assert _chat_with(site, plaintext).status_code == 401
    finally:
        context.close()

    admin = browser.new_context(viewport={"width": 1280, "height": 800})
    page = admin.new_page()
    try:
        sign_in(page, site, "root")
        page.get_by_test_id("settings-link").click()
        expect(page.get_by_test_id("keys-page")).to_be_visible()
        owners = page.get_by_test_id("key-owner")
        expect(owners).to_have_count(2)
        assert sorted(owners.all_inner_texts()) == ["alice", "bob"]
        page.get_by_test_id("settings-tab-channels").click()
        expect(page.get_by_test_id("channels-page")).to_be_visible()
    finally:
        admin.close()


def test_the_mcp_page_shows_each_servers_state_tools_and_last_error(
    tmp_path: Path, page: Page
) -> None:
    config = (
        f'default_model = "{DEFAULT_MODEL}"\n'
        f'[mcp.servers.demo]\ncommand = "{sys.executable}"\nargs = ["{DEMO_SERVER}"]\n'
        f'[mcp.servers.dead]\ncommand = "{sys.executable}"\n'
        'args = ["-c", "raise SystemExit(3)"]\n'
    )
    with serve(tmp_path, config) as drupe:
        page.goto(f"{drupe.url}/#/")
        page.get_by_test_id("settings-link").click()
        expect(page.get_by_test_id("keys-page")).to_be_visible()
        expect(page.get_by_test_id("settings-tab-channels")).to_be_visible()  # the local admin
        page.get_by_test_id("settings-tab-mcp").click()
        expect(page.get_by_test_id("mcp-page")).to_be_visible()
        demo = page.locator('[data-testid="mcp-server"][data-server-id="demo"]')
        dead = page.locator('[data-testid="mcp-server"][data-server-id="dead"]')
        expect(demo).to_have_attribute("data-state", "connected", timeout=20_000)
        expect(dead).to_have_attribute("data-state", "failed", timeout=20_000)
        names = demo.get_by_test_id("mcp-tools").locator("li").all_inner_texts()
        # the demo server's tools (add, fail, slow, die, grow and "Shout Text")
        assert {f"mcp__demo__{t}" for t in ("add", "fail", "slow", "die", "grow")} <= set(names)
        assert len(names) == 6
        expect(demo).to_contain_text("6 tools")
        expect(dead.get_by_test_id("mcp-last-error")).not_to_be_empty()
        expect(demo.get_by_test_id("mcp-last-error")).to_have_count(0)
        _shoot(page, "settings-mcp")
