"""Sharing an agent from the sidebar, and the signed-in pages, in a real browser with auth ON.

* alice shares her agent with bob from its ⇪ button (the share dialog, kind "agent"): the
  server then answers bob's reads and refuses his changes (``tests/identity/test_agent_shares``
  holds the full rules); bob's sidebar lists it as "shared", without share or delete buttons,
  and his "+" starts a session of his own with it. Removed in the dialog, bob gets 404 again.
* The pages only a signed-in user has (the users page, personal tokens, the open share
  dialog, an agent shared with one) are saved to ``docs/ui/<page>-<width>.png`` at 1280x800 and
  390x844, and axe-core finds no serious or critical violation on any of them.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, Request, expect

from tests.browser.auth_site import api_as, auth_site, sign_in
from tests.browser.conftest import WAIT_MS, Drupe
from tests.browser.test_layout_a11y import SHOTS, VIEWPORTS, serious_violations

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    with auth_site(tmp_path_factory.mktemp("drupe-share-agent-browser")) as running:
        yield running


@pytest.fixture(scope="module")
def agent_id(site: Drupe) -> str:
    with api_as(site, "alice") as alice:
        made = alice.post(
            "/api/agents",
            json={"name": "helper", "driverType": "inprocess", "modelId": "scripted:echo"},
        )
        assert made.status_code == 201, made.text
        return str(made.json()["id"])


def shot(page: Page, name: str, width: str) -> None:
    """Saves the page as ``docs/ui/<name>-<width>.png`` and checks it with axe-core."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(SHOTS / f"{name}-{width}.png"))
    assert serious_violations(page) == [], name


def open_sidebar_if_phone(page: Page, width: str) -> None:
    if width == "390":
        page.get_by_test_id("nav-toggle").click()
        expect(page.locator("aside.sidebar")).to_be_visible()


def test_an_owner_shares_an_agent_and_takes_it_back(site: Drupe, agent_id: str, page: Page) -> None:
    agent_url = f"/api/agents/{agent_id}"
    with api_as(site, "bob") as bob:
        assert bob.get(agent_url).status_code == 404
    sign_in(page, site, "alice")
    row = page.locator(f'[data-testid="agent-item"][data-agent-id="{agent_id}"]')
    expect(row).to_have_attribute("data-owned", "true")
    expect(row.get_by_test_id("agent-shared")).to_have_count(0)
    row.get_by_test_id("share-agent").click()
    dialog = page.get_by_test_id("share-dialog")
    expect(dialog).to_contain_text("Share “helper”")
    expect(dialog.get_by_test_id("share-note")).to_be_visible()
    expect(dialog.get_by_test_id("share-empty")).to_be_visible()
    dialog.get_by_test_id("share-user").select_option("bob")
    dialog.get_by_test_id("share-access").select_option("read")
    dialog.get_by_test_id("share-add").click()
    expect(dialog.locator('[data-testid="share-row"][data-user-name="bob"]')).to_have_attribute(
        "data-access", "read"
    )
    with api_as(site, "alice") as alice, api_as(site, "bob") as bob:
        shares = alice.get(f"/api/shares/agent/{agent_id}").json()["items"]
        assert [(s["name"], s["access"]) for s in shares] == [("bob", "read")]
        assert bob.get(agent_url).status_code == 200
        assert bob.patch(agent_url, json={"name": "mine"}).status_code == 404
        assert bob.delete(agent_url).status_code == 404
    with api_as(site, "carol") as carol:
        assert carol.get(agent_url).status_code == 404

    dialog.locator('[data-testid="share-row"][data-user-name="bob"]').get_by_test_id(
        "share-remove"
    ).click()
    expect(dialog.get_by_test_id("share-empty")).to_be_visible()
    with api_as(site, "bob") as bob:
        assert bob.get(agent_url).status_code == 404
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)


def test_a_member_sees_a_shared_agent_and_starts_a_session_with_it(
    site: Drupe, agent_id: str, browser: Browser
) -> None:
    with api_as(site, "alice") as alice:
        given = alice.put(f"/api/shares/agent/{agent_id}/bob", json={"access": "read"})
        assert given.status_code == 200, given.text
        hers = alice.post(f"/api/agents/{agent_id}/sessions", json={"title": "alice's"}).json()
        parts = [{"type": "text", "text": "alice asks"}]
        alice.post(
            "/api/chat",
            json={
                "id": hers["conversationId"],
                "messages": [{"id": "h1", "role": "user", "parts": parts}],
            },
        ).raise_for_status()
    for width, viewport in VIEWPORTS.items():
        context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        context.set_default_timeout(WAIT_MS)
        try:
            page = context.new_page()
            sign_in(page, site, "bob")
            open_sidebar_if_phone(page, width)
            row = page.locator(f'[data-testid="agent-item"][data-agent-id="{agent_id}"]')
            expect(row).to_have_attribute("data-owned", "false")
            expect(row.get_by_test_id("agent-shared")).to_be_visible()
            expect(row.get_by_test_id("share-agent")).to_have_count(0)
            expect(row.get_by_test_id("delete-agent")).to_have_count(0)
            shot(page, "agent-shared", width)
            if width == "1280":
                row.get_by_test_id("new-session").click()
                expect(page.get_by_test_id("composer-input")).to_be_visible()
                with api_as(site, "bob") as bob:
                    mine = bob.get("/api/sessions", params={"agentId": agent_id}).json()["items"]
                assert len(mine) == 1
                pane = page.get_by_test_id("session-pane")
                expect(pane).to_have_attribute("data-session-id", mine[0]["id"])

                # alice's session, opened by its link: readable, listed under the agent while
                # open, without a delete button; the list is not re-read in a loop.
                listings: list[str] = []

                def count(request: Request, seen: list[str] = listings) -> None:
                    if request.url.endswith("/api/sessions"):
                        seen.append(request.url)

                page.on("request", count)
                page.goto(f"{site.url}/#/c/{hers['conversationId']}")
                pane = page.get_by_test_id("session-pane")
                expect(pane).to_have_attribute("data-session-id", hers["id"])
                expect(pane).to_contain_text("You said: alice asks")
                item = row.locator(f'[data-testid="session-item"][data-session-id="{hers["id"]}"]')
                expect(item).to_be_visible()
                expect(item.get_by_test_id("delete-session")).to_have_count(0)
                page.wait_for_timeout(1500)
                assert len(listings) <= 3, listings
        finally:
            context.close()


@pytest.mark.parametrize("width", list(VIEWPORTS))
def test_signed_in_pages_at_both_widths(
    site: Drupe, agent_id: str, browser: Browser, width: str
) -> None:
    with api_as(site, "alice") as alice:
        conversation = alice.post("/api/conversations", json={"title": "Team plan"}).json()
        alice.post("/api/auth/tokens", json={"name": "laptop"}).raise_for_status()
    context = browser.new_context(viewport=VIEWPORTS[width])  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    try:
        page = context.new_page()
        sign_in(page, site, "alice")
        page.goto(f"{site.url}/#/tokens")
        expect(page.get_by_test_id("tokens-page")).to_be_visible()
        expect(page.get_by_test_id("tokens-table")).to_contain_text("laptop")
        shot(page, "settings-tokens", width)

        page.goto(f"{site.url}/#/")
        open_sidebar_if_phone(page, width)
        item = page.locator(
            f'[data-testid="conversation-item"][data-conversation-id="{conversation["id"]}"]'
        )
        item.hover()
        item.get_by_test_id("share-button").click()
        dialog = page.get_by_test_id("share-dialog")
        dialog.get_by_test_id("share-user").select_option("bob")
        dialog.get_by_test_id("share-add").click()
        expect(dialog.get_by_test_id("share-row")).to_have_count(1)
        shot(page, "share-dialog", width)
        page.keyboard.press("Escape")

    finally:
        context.close()

    admin = browser.new_context(viewport=VIEWPORTS[width])  # type: ignore[arg-type]
    admin.set_default_timeout(WAIT_MS)
    try:
        page = admin.new_page()
        sign_in(page, site, "root")
        page.goto(f"{site.url}/#/admin")
        expect(page.get_by_test_id("user-row").first).to_be_visible()
        shot(page, "admin-users", width)
    finally:
        admin.close()
