"""Single sign-on against a real OpenID provider (``oidc-provider``, OpenID Certified) on
loopback: code + PKCE, the ID token's checks, the claims' mapping to a Drupe user, and the
refusals (wrong state, replay, disallowed domain, disabled user, a tampered nonce or verifier).
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from sqlalchemy import update

from drupe.persistence.auth_sessions import hash_secret
from drupe.persistence.tables import OidcLoginRow
from tests.identity.conftest import PASSWORDS
from tests.identity.oidc_support import CLIENT_ID, OidcSite, oidc_site

pytestmark = pytest.mark.node

ACCOUNTS = {
    "carol-sub": {
        "preferred_username": "carol",
        "email": "carol@example.org",
        "email_verified": True,
        "groups": ["staff", "drupe-admins"],
    },
    "dave-sub": {"preferred_username": "dave", "email": "dave@eu.example.org", "groups": "staff"},
    "alice-sso": {"preferred_username": "alice", "email": "alice@example.org"},
    "eve-sub": {"preferred_username": "eve", "email": "eve@elsewhere.test"},
    "nomail-sub": {"preferred_username": "nomail"},
}
OIDC = {
    "role_claim": "groups",
    "admin_values": ["drupe-admins"],
    "allowed_domains": ["example.org"],
    "display_name": "Sign in with Example ID",
}


async def _sign_in(site: OidcSite, login: str) -> tuple[httpx.AsyncClient, httpx.Response]:
    client = site.client()
    callback = await site.walk(client, login)
    return client, await client.get(callback)


async def _me(site: OidcSite, client: httpx.AsyncClient) -> dict[str, object]:
    reply = await client.get(f"{site.url}/api/auth/me")
    assert reply.status_code == 200, reply.text
    user: dict[str, object] = reply.json()["user"]
    return user


async def test_sign_in_maps_the_claims_to_a_user_and_starts_a_session(tmp_path: Path) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, **OIDC) as site:
        async with site.client() as anon:
            methods = (await anon.get(f"{site.url}/api/auth/methods")).json()
        assert methods["oidc"] == {
            "name": "Sign in with Example ID",
            "url": "/api/auth/oidc/login",
        }
        client = site.client()
        start = await client.get(f"{site.url}/api/auth/oidc/login")
        assert start.status_code == 302
        query = parse_qs(urlsplit(start.headers["location"]).query)
        assert start.headers["location"].startswith(site.issuer)
        assert query["client_id"] == [CLIENT_ID] and query["response_type"] == ["code"]
        assert query["code_challenge_method"] == ["S256"] and len(query["code_challenge"][0]) == 43
        assert query["redirect_uri"] == [site.callback]
        assert set(query["scope"][0].split()) == {"openid", "email", "profile"}
        assert query["state"][0] == client.cookies["drupe_oidc_state"]
        assert "nonce" in query and "code_verifier" not in query

        carol, done = await _sign_in(site, "carol-sub")
        assert done.status_code == 302 and done.headers["location"] == "/"
        assert "drupe_session" in carol.cookies and "drupe_oidc_state" not in carol.cookies
        me = await _me(site, carol)
        assert me["name"] == "carol" and me["role"] == "admin"  # groups holds drupe-admins
        dave, _ = await _sign_in(site, "dave-sub")  # a subdomain of an allowed domain
        assert (await _me(site, dave))["role"] == "member"  # groups = "staff"
        # The local user alice is not taken over by an SSO account that calls itself alice.
        sso_alice, _ = await _sign_in(site, "alice-sso")
        assert (await _me(site, sso_alice))["name"] == "alice-2"
        # A second sign-in finds the same user by its provider account.
        again, _ = await _sign_in(site, "carol-sub")
        assert (await _me(site, again))["id"] == me["id"]
        users = {u.name: u for u in await site.runtime.db.users.list_users()}
        assert set(users) == {"root", "alice", "carol", "dave", "alice-2"}
        assert users["carol"].email == "carol@example.org" and not users["carol"].has_password
        logins = await site.runtime.db.audit.list(action="auth.login")
        assert [e.detail["method"] for e in logins] == ["oidc"] * 4
        for client_ in (client, carol, dave, sso_alice, again):
            await client_.aclose()


async def test_role_follows_the_claim_and_a_disabled_user_is_refused(tmp_path: Path) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, **OIDC) as site:
        carol, _ = await _sign_in(site, "carol-sub")
        await site.runtime.db.users.set_role("carol", "member")  # the claim says admin
        again, _ = await _sign_in(site, "carol-sub")
        assert (await _me(site, again))["role"] == "admin"
        await site.runtime.db.users.set_disabled("carol")
        refused, reply = await _sign_in(site, "carol-sub")
        assert reply.status_code == 403 and "disabled" in reply.json()["detail"]
        assert "drupe_session" not in refused.cookies
        for client in (carol, again, refused):
            await client.aclose()


async def test_wrong_state_replay_and_a_foreign_browser_get_400(tmp_path: Path) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, **OIDC) as site:
        client = site.client()
        callback = await site.walk(client, "carol-sub")
        state = parse_qs(urlsplit(callback).query)["state"][0]
        wrong = await client.get(callback.replace(state, state[:-2] + "xy"))
        assert wrong.status_code == 400 and "state" in wrong.json()["detail"]
        async with site.client() as stranger:  # the callback URL, but not this browser's
            foreign = await stranger.get(callback)
            assert foreign.status_code == 400 and "state" in foreign.json()["detail"]
        client.cookies.set("drupe_oidc_state", state, path="/api/auth/oidc")
        # (the wrong-state answer cleared the cookie; the sign-in itself is still pending)
        ok = await client.get(callback)
        assert ok.status_code == 302 and "drupe_session" in client.cookies
        client.cookies.set("drupe_oidc_state", state, path="/api/auth/oidc")
        replay = await client.get(callback, headers={"accept": "text/html"})
        assert replay.status_code == 400 and "used already" in replay.text
        assert replay.headers["content-type"].startswith("text/html")
        await client.aclose()


async def test_a_domain_not_allowed_and_no_email_are_refused(tmp_path: Path) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, **OIDC) as site:
        eve, reply = await _sign_in(site, "eve-sub")
        assert reply.status_code == 403
        assert "elsewhere.test is not among" in reply.json()["detail"]
        nomail, reply = await _sign_in(site, "nomail-sub")
        assert reply.status_code == 403 and "sent none" in reply.json()["detail"]
        assert "drupe_session" not in eve.cookies and "drupe_session" not in nomail.cookies
        names = {u.name for u in await site.runtime.db.users.list_users()}
        assert names == {"root", "alice"}
        refusals = await site.runtime.db.audit.list(action="auth.oidc_refused")
        assert len(refusals) == 2
        await eve.aclose()
        await nomail.aclose()


async def test_a_tampered_nonce_or_verifier_is_refused(tmp_path: Path) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, **OIDC) as site:
        for column, expected in (("nonce", "nonce"), ("code_verifier", "refused the sign-in code")):
            client = site.client()
            callback = await site.walk(client, "carol-sub")
            state = parse_qs(urlsplit(callback).query)["state"][0]
            async with site.runtime.db.transactions.write() as db:
                await db.execute(
                    update(OidcLoginRow)
                    .where(OidcLoginRow.state_hash == hash_secret(state))
                    .values({column: "x" * 43})
                )
            reply = await client.get(callback)
            assert reply.status_code == 400 and expected in reply.json()["detail"], reply.text
            assert "drupe_session" not in client.cookies
            await client.aclose()


async def test_an_issuer_that_is_not_the_providers_is_refused(tmp_path: Path) -> None:
    def elsewhere(issuer: str) -> str:
        return issuer.replace("127.0.0.1", "localhost")

    async with oidc_site(tmp_path, ACCOUNTS, issuer_of=elsewhere) as site:
        async with site.client() as client:
            reply = await client.get(f"{site.url}/api/auth/oidc/login")
        assert reply.status_code == 502, reply.text
        assert "names issuer" in reply.json()["detail"]


def _claims_of(jwt: str) -> dict[str, object]:
    """The payload of a JWT, read independently of Drupe and authlib."""
    payload = jwt.split(".")[1]
    claims: dict[str, object] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return claims


async def test_signing_out_signs_out_at_the_provider_too(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, **OIDC) as site:
        carol, _ = await _sign_in(site, "carol-sub")
        cookie = carol.cookies["drupe_session"]
        assert (await _me(site, carol))["name"] == "carol"
        me = await carol.get(f"{site.url}/api/auth/me")
        out = await carol.post(f"{site.url}/api/auth/logout", headers={"origin": site.url})
        assert out.status_code == 200, out.text
        redirect = out.json()["redirect"]
        assert redirect.startswith(f"{site.issuer}/session/end?")
        query = parse_qs(urlsplit(redirect).query)
        assert query["client_id"] == [CLIENT_ID]
        assert query["post_logout_redirect_uri"] == [f"{site.url}/api/auth/oidc/signed-out"]
        hint = query["id_token_hint"][0]
        claims = _claims_of(hint)  # the ID token the provider issued at this sign-in
        assert claims["iss"] == site.issuer and claims["aud"] == CLIENT_ID
        assert claims["sub"] == "carol-sub"
        # The session is over here at once, even if the browser never reaches the provider.
        async with site.client() as stale:
            stale.cookies.set("drupe_session", cookie)
            assert (await stale.get(f"{site.url}/api/auth/me")).status_code == 401
        # At the provider: its confirmation page, then back to Drupe, then to the start.
        page = await carol.get(redirect)
        assert page.status_code == 200, page.text
        action = re.search(r'action="([^"]+)"', page.text)
        xsrf = re.search(r'name="xsrf" value="([^"]+)"', page.text)
        assert action is not None and xsrf is not None, page.text
        confirmed = await carol.post(
            str(page.url.join(action.group(1))), data={"xsrf": xsrf.group(1), "logout": "yes"}
        )
        assert confirmed.is_redirect, confirmed.text
        back = confirmed.headers["location"]
        assert back.startswith(f"{site.url}/api/auth/oidc/signed-out")
        home = await carol.get(back)
        assert home.status_code == 302 and home.headers["location"] == "/"
        # The provider's session is gone: signing in again asks for the login, not only consent.
        start = await carol.get(f"{site.url}/api/auth/oidc/login")
        reply = start
        while reply.is_redirect:
            reply = await carol.get(str(reply.url.join(reply.headers["location"])))
        assert 'name="prompt" value="login"' in reply.text
        # The ID token is in no log line and in no answer about the session.
        assert hint not in caplog.text and hint not in me.text
        # A second sign-out of the same session: nothing to sign out of at the provider.
        again = await carol.post(f"{site.url}/api/auth/logout", headers={"origin": site.url})
        assert again.status_code == 204
        await carol.aclose()


async def test_a_provider_without_sign_out_and_a_password_session_sign_out_here_only(
    tmp_path: Path,
) -> None:
    async with oidc_site(tmp_path, ACCOUNTS, provider_logout=False, **OIDC) as site:
        carol, _ = await _sign_in(site, "carol-sub")
        out = await carol.post(f"{site.url}/api/auth/logout", headers={"origin": site.url})
        assert out.status_code == 204 and out.content == b""
        assert (await carol.get(f"{site.url}/api/auth/me")).status_code == 401
        await carol.aclose()
        async with site.client() as alice:
            login = await alice.post(
                f"{site.url}/api/auth/login",
                json={"username": "alice", "password": PASSWORDS["alice"]},
            )
            assert login.status_code == 200, login.text
            out = await alice.post(f"{site.url}/api/auth/logout", headers={"origin": site.url})
            assert out.status_code == 204
