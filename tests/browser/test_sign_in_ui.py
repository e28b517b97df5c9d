"""Sign-in in a real browser against a real server with auth ON (``tests/browser/auth_site``).

Covered: the sign-in page and a password sign-in (the user menu names the user and role), the
server's refusals shown as worded (a wrong password, then too many attempts), a second user in
another browser context who does not see the first user's conversations (nor open one by its
URL), sign out (the session is revoked on the server, a reload stays signed out, and the next
user in the same tab sees nothing of the previous one), a session that ends elsewhere (the next
poll's 401 returns to the sign-in page), the CSRF header on every state-changing request, a
personal token shown once (copy button, works as a Bearer token, only its prefix listed,
revoked), a chat account linked with the page's one-time code and unlinked, the "Sign in with
<provider>" button (the methods answer replaced in the browser: no
OIDC on this server), and no sign-in UI at all with auth off. axe-core finds no serious
violation on the sign-in page, the open user menu, the tokens page and the chat accounts page. The
first test saves the sign-in page into ``docs/ui/``.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Request, expect

from drupe.persistence.db import open_database
from tests.browser.auth_site import MAX_FAILURES, PASSWORDS, api_as, auth_site, sign_in
from tests.browser.conftest import WAIT_MS, Drupe
from tests.browser.test_layout_a11y import serious_violations

pytestmark = pytest.mark.browser

DOCS_UI = Path(__file__).resolve().parents[2] / "docs" / "ui"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Drupe]:
    with auth_site(tmp_path_factory.mktemp("drupe-auth-browser")) as running:
        yield running


def new_context(browser: Browser, **kwargs: object) -> BrowserContext:
    context = browser.new_context(viewport={"width": 1280, "height": 800}, **kwargs)  # type: ignore[arg-type]
    context.set_default_timeout(WAIT_MS)
    return context


def session_cookie(context: BrowserContext) -> str:
    values = [c.get("value", "") for c in context.cookies() if c.get("name") == "drupe_session"]
    assert len(values) == 1, context.cookies()
    return values[0]


def me_with_cookie(site: Drupe, cookie: str) -> httpx.Response:
    return httpx.get(f"{site.url}/api/auth/me", cookies={"drupe_session": cookie}, timeout=20)


def test_sign_in_with_a_password(site: Drupe, page: Page) -> None:
    page.goto(f"{site.url}/#/")
    expect(page.get_by_test_id("sign-in-page")).to_be_visible()
    expect(page.get_by_test_id("composer-input")).to_have_count(0)
    expect(page.get_by_test_id("sign-in-sso")).to_have_count(0)  # no OIDC configured
    assert serious_violations(page) == []
    DOCS_UI.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(DOCS_UI / "sign-in-1280.png"))
    page.set_viewport_size({"width": 390, "height": 844})
    page.screenshot(path=str(DOCS_UI / "sign-in-390.png"))
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_test_id("sign-in-username").fill("alice")
    page.get_by_test_id("sign-in-password").fill(PASSWORDS["alice"])
    page.get_by_test_id("sign-in-password").press("Enter")
    expect(page.get_by_test_id("composer-input")).to_be_visible()
    expect(page.get_by_test_id("user-name")).to_have_text("alice")
    expect(page.get_by_test_id("user-role")).to_have_text("member")
    # The browser now holds a live session of alice's.
    assert me_with_cookie(site, session_cookie(page.context)).json()["user"]["name"] == "alice"
    page.get_by_test_id("user-menu-button").click()
    expect(page.get_by_test_id("tokens-link")).to_be_visible()
    expect(page.get_by_test_id("admin-link")).to_have_count(0)  # members have no Users page
    assert serious_violations(page) == []


def test_a_wrong_password_then_too_many_attempts_show_the_servers_words(
    site: Drupe, page: Page
) -> None:
    wrong = {"username": "carol", "password": "not-carols-password"}
    page.goto(f"{site.url}/#/")
    for _ in range(MAX_FAILURES):
        page.get_by_test_id("sign-in-username").fill(wrong["username"])
        page.get_by_test_id("sign-in-password").fill(wrong["password"])
        page.get_by_test_id("sign-in-submit").click()
        expect(page.get_by_test_id("sign-in-error")).to_have_text("wrong user name or password")
        expect(page.get_by_test_id("sign-in-submit")).to_be_enabled()
        page.get_by_test_id("sign-in-password").fill("")  # the next round's error is fresh
    # The next try, even with the right password, is refused for a minute: the page says so.
    expected = httpx.post(f"{site.url}/api/auth/login", json=wrong, timeout=20)
    assert expected.status_code == 429
    page.get_by_test_id("sign-in-password").fill(PASSWORDS["carol"])
    page.get_by_test_id("sign-in-submit").click()
    expect(page.get_by_test_id("sign-in-error")).to_have_text(expected.json()["detail"])
    expect(page.get_by_test_id("sign-in-page")).to_be_visible()


def test_a_second_user_does_not_see_the_first_users_conversations(
    site: Drupe, browser: Browser
) -> None:
    with api_as(site, "alice") as alice, api_as(site, "bob") as bob:
        secret = alice.post("/api/conversations", json={"title": "alice private plan"}).json()
        own = bob.post("/api/conversations", json={"title": "bob own notes"}).json()
        refused = bob.get(f"/api/conversations/{secret['id']}")
    assert refused.status_code == 404  # the same answer as an id that does not exist
    alice_ctx, bob_ctx = new_context(browser), new_context(browser)
    try:
        alice_page, bob_page = alice_ctx.new_page(), bob_ctx.new_page()
        sign_in(alice_page, site, "alice")
        sign_in(bob_page, site, "bob")
        alice_item = alice_page.locator(
            f'[data-testid="conversation-item"][data-conversation-id="{secret["id"]}"]'
        )
        expect(alice_item).to_contain_text("alice private plan")
        bob_list = bob_page.get_by_test_id("conversation-list")
        expect(
            bob_page.locator(
                f'[data-testid="conversation-item"][data-conversation-id="{own["id"]}"]'
            )
        ).to_be_visible()
        expect(bob_list).not_to_contain_text("alice private plan")
        expect(bob_page.locator(f'[data-conversation-id="{secret["id"]}"]')).to_have_count(0)
        # Nor by its address: the page shows the server's 404.
        bob_page.goto(f"{site.url}/#/c/{secret['id']}")
        expect(bob_page.get_by_test_id("chat-error")).to_have_text(refused.json()["detail"])
        expect(bob_page.get_by_test_id("message-list")).to_have_count(0)
    finally:
        alice_ctx.close()
        bob_ctx.close()


def test_sign_out_returns_to_the_sign_in_page_and_the_next_user_sees_only_theirs(
    site: Drupe, page: Page
) -> None:
    with api_as(site, "alice") as alice:
        mine = alice.post("/api/conversations", json={"title": "alice before sign out"}).json()
    sign_in(page, site, "alice")
    page.goto(f"{site.url}/#/c/{mine['id']}")
    item = f'[data-testid="conversation-item"][data-conversation-id="{mine["id"]}"]'
    expect(page.locator(item)).to_be_visible()
    cookie = session_cookie(page.context)

    page.get_by_test_id("user-menu-button").click()
    page.get_by_test_id("sign-out").click()
    expect(page.get_by_test_id("sign-in-page")).to_be_visible()
    assert me_with_cookie(site, cookie).status_code == 401  # revoked on the server
    page.reload()
    expect(page.get_by_test_id("sign-in-page")).to_be_visible()

    # bob, in the same tab: home page, and none of alice's conversations.
    page.get_by_test_id("sign-in-username").fill("bob")
    page.get_by_test_id("sign-in-password").fill(PASSWORDS["bob"])
    page.get_by_test_id("sign-in-submit").click()
    expect(page.get_by_test_id("user-name")).to_have_text("bob")
    expect(page.get_by_test_id("empty-state")).to_be_visible()
    assert page.evaluate("location.hash") == "#/"
    expect(page.get_by_test_id("conversation-list")).not_to_contain_text("alice")


def test_a_session_ended_elsewhere_returns_to_the_sign_in_page(site: Drupe, page: Page) -> None:
    sign_in(page, site, "bob")
    expect(page.get_by_test_id("composer-input")).to_be_visible()
    ended = httpx.post(
        f"{site.url}/api/auth/logout", cookies={"drupe_session": session_cookie(page.context)}
    )
    assert ended.status_code == 204
    # No click: the 2 s status poll gets a 401 and the app returns to sign-in.
    expect(page.get_by_test_id("sign-in-page")).to_be_visible()
    expect(page.get_by_test_id("sign-in-reason")).to_contain_text("session has ended")


def test_every_state_changing_request_carries_the_csrf_token(site: Drupe, page: Page) -> None:
    unsafe: list[Request] = []
    page.on(
        "request",
        lambda r: unsafe.append(r) if r.method in ("POST", "PUT", "PATCH", "DELETE") else None,
    )
    sign_in(page, site, "alice")
    token = page.evaluate("fetch('/api/auth/me').then(r => r.json()).then(j => j.csrfToken)")
    assert isinstance(token, str) and token
    # From the home screen: POST /api/conversations, then POST /api/chat.
    expect(page.get_by_test_id("empty-state")).to_be_visible()
    page.get_by_test_id("composer-input").fill("hello there")
    page.get_by_test_id("send-button").click()
    expect(page.locator('[data-role="assistant"]').last).to_contain_text("You said: hello there")
    api_calls = [r for r in unsafe if "/api/" in r.url and not r.url.endswith("/api/auth/login")]
    assert {r.url.split("/api/")[1].split("/")[0] for r in api_calls} >= {"conversations", "chat"}
    for request in api_calls:
        assert request.headers.get("x-csrf-token") == token, (request.method, request.url)


def test_a_personal_token_is_shown_once_and_works(site: Drupe, browser: Browser) -> None:
    context = new_context(browser, permissions=["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        sign_in(page, site, "alice")
        page.get_by_test_id("user-menu-button").click()
        page.get_by_test_id("tokens-link").click()
        expect(page.get_by_test_id("tokens-page")).to_be_visible()
        expect(page.get_by_test_id("sign-out")).to_be_hidden()  # the menu closed
        page.get_by_test_id("token-name").fill("laptop script")
        page.get_by_test_id("token-create").click()
        shown = page.get_by_test_id("new-token")
        expect(shown).to_have_text(re.compile(r"^drt_\S{20,}$"))
        token = shown.inner_text()
        page.get_by_test_id("copy-token").click()
        expect(page.get_by_test_id("copy-token")).to_have_attribute("data-state", "copied")
        assert page.evaluate("navigator.clipboard.readText()") == token
        # It acts as alice.
        bearer = {"Authorization": f"Bearer {token}"}
        me = httpx.get(f"{site.url}/api/auth/me", headers=bearer, timeout=20)
        assert me.status_code == 200 and me.json()["user"]["name"] == "alice"

        assert serious_violations(page) == []
        row = page.get_by_test_id("token-row").filter(has_text="laptop script")
        expect(row).to_contain_text(token[:8])
        page.get_by_test_id("new-token-done").click()
        expect(shown).to_have_count(0)
        assert token not in page.content()
        page.reload()
        expect(row).to_be_visible()
        assert token not in page.content()  # never shown again

        row.get_by_test_id("token-revoke").click()
        expect(row).to_have_attribute("data-revoked", "true")
        assert httpx.get(f"{site.url}/api/auth/me", headers=bearer, timeout=20).status_code == 401
    finally:
        context.close()


def _redeem(site: Drupe, code: str, platform_user_id: str) -> str | None:
    """What the channel does with ``/link <code>`` from ``platform_user_id`` on channel ``tg``
    (the real store, on the server's database, from a thread: Playwright holds this loop)."""
    found: list[str | None] = []

    async def redeem() -> None:
        async with open_database(None, data_dir=site.data_dir) as db:
            user = await db.chat_links.redeem(
                code, channel_id="tg", platform_user_id=platform_user_id
            )
            found.append(None if user is None else user.name)

    worker = threading.Thread(target=asyncio.run, args=(redeem(),))
    worker.start()
    worker.join(timeout=60)
    return found[0]


def test_a_chat_account_is_linked_with_a_code_and_unlinked(site: Drupe, browser: Browser) -> None:
    context = new_context(browser, permissions=["clipboard-read", "clipboard-write"])
    try:
        page = context.new_page()
        sign_in(page, site, "bob")
        page.goto(f"{site.url}/#/settings")
        page.get_by_test_id("settings-tab-chat-accounts").click()
        expect(page.get_by_test_id("chat-accounts-page")).to_be_visible()
        expect(page.get_by_test_id("chat-accounts-empty")).to_be_visible()
        page.get_by_test_id("link-code-make").click()
        command = page.get_by_test_id("link-command")
        expect(command).to_have_text(re.compile(r"^/link [A-Z2-9]{4}-[A-Z2-9]{4}$"))
        text = command.inner_text()
        page.get_by_test_id("copy-link-command").click()
        assert page.evaluate("navigator.clipboard.readText()") == text
        assert serious_violations(page) == []

        # The bot's side: the account that sends the command is bob's from now on.
        assert _redeem(site, text.removeprefix("/link "), "1001") == "bob"
        page.get_by_test_id("link-code-done").click()
        row = page.get_by_test_id("chat-account-row")
        expect(row).to_have_count(1)
        expect(row).to_contain_text("tg")
        expect(row).to_contain_text("1001")

        row.get_by_test_id("chat-account-unlink").click()
        expect(page.get_by_test_id("chat-accounts-empty")).to_be_visible()
        with api_as(site, "bob") as bob:
            assert bob.get("/api/auth/chat-accounts").json()["accounts"] == []
            code = bob.post("/api/auth/chat-accounts/code").json()["code"]
        assert _redeem(site, code, "2002") == "bob"
    finally:
        context.close()

    # An admin sees the account on bob's row of the users page and unlinks it there.
    admin = new_context(browser)
    try:
        page = admin.new_page()
        sign_in(page, site, "root")
        page.goto(f"{site.url}/#/admin")
        accounts = page.locator('[data-testid="user-row"][data-user-name="bob"]').get_by_test_id(
            "user-chat-accounts"
        )
        expect(accounts).to_contain_text("tg:2002")
        assert serious_violations(page) == []
        accounts.get_by_test_id("user-chat-unlink").click()
        expect(accounts).not_to_contain_text("tg:2002")
        with api_as(site, "bob") as bob:
            assert bob.get("/api/auth/chat-accounts").json()["accounts"] == []
    finally:
        admin.close()


def test_no_sign_in_ui_with_auth_off(drupe_server: Drupe, page: Page) -> None:
    page.goto(f"{drupe_server.url}/#/")
    expect(page.get_by_test_id("composer-input")).to_be_visible()
    assert drupe_server.api.get("/api/auth/me").json()["auth"] is False
    expect(page.get_by_test_id("sign-in-page")).to_have_count(0)
    expect(page.get_by_test_id("user-menu")).to_have_count(0)
    expect(page.get_by_test_id("share-button")).to_have_count(0)


def test_the_sso_button_goes_to_the_url_the_server_names(site: Drupe, page: Page) -> None:
    # This server has no OIDC configured: its /api/auth/methods answer is replaced in the browser
    # by one that names a provider (the shape of issue 20's `oidc: {name, url}`).
    methods = httpx.get(f"{site.url}/api/auth/methods", timeout=20).json()
    assert methods["oidc"] is None
    offered = {**methods, "oidc": {"name": "Keycloak", "url": "/api/auth/oidc/login?next=%2F"}}
    page.route("**/api/auth/methods", lambda route: route.fulfill(json=offered))
    page.goto(f"{site.url}/#/")
    button = page.get_by_test_id("sign-in-sso")
    expect(button).to_have_text("Sign in with Keycloak")
    button.click()
    page.wait_for_url(f"{site.url}/api/auth/oidc/login?next=%2F")
