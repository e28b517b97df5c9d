"""Single sign-on routes (``docs/security.md``): OpenID Connect, authorization code + PKCE.

* ``GET /api/auth/oidc/login``: 302 to the provider's authorization endpoint. The ``state``,
  ``nonce`` and PKCE verifier are kept in the database (``oidc_logins``, 10 minutes: any
  cluster node can take the callback) and the ``state`` also in a short-lived HttpOnly cookie
  that binds the sign-in to this browser.
* ``GET /api/auth/oidc/callback?code=&state=``: the ``state`` must match the cookie and a
  stored, unused, unexpired sign-in (else 400); the code is exchanged and the ID token
  verified (``identity.oidc``); the claims map to a Drupe user (``identity.accounts``: found by
  the provider account, or created, the role from ``role_claim``). A disabled user or an
  e-mail domain not allowed is refused with 403 and the reason. Then the session starts
  (``auth_routes.start_session``, method ``oidc``, keeping the ID token sealed for the
  sign-out) and the browser goes to ``/``.
* ``POST /api/auth/logout`` of a session made here (``auth_routes``) ends it, then answers where
  to sign out at the provider too (``end_session_url``: RP-Initiated Logout); the provider
  sends the browser back to ``GET /api/auth/oidc/signed-out``, which goes to ``/``.
* A refusal answers an HTML page to a browser (``Accept: text/html``) and JSON otherwise;
  every refusal is audited (``auth.oidc_refused``, with its reason; never a code or token).
* 404 when ``[auth.oidc]`` is not configured; 400 when auth is off.
"""

from __future__ import annotations

import hmac
from html import escape
from typing import TYPE_CHECKING, Annotated, Final

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse

from drupe.api.auth_routes import client_address, start_session
from drupe.errors import NotFoundError
from drupe.http.state import get_runtime
from drupe.identity.accounts import user_for_oidc
from drupe.identity.oidc_claims import OidcError, OidcRefused, person_of
from drupe.settings_auth import OidcSettings

if TYPE_CHECKING:
    from drupe.identity.oidc import OidcClient

__all__ = ["STATE_COOKIE", "router"]

router = APIRouter(tags=["auth"])

STATE_COOKIE: Final = "drupe_oidc_state"
_COOKIE_PATH: Final = "/api/auth/oidc"
LOGIN_TTL_SECONDS: Final = 600


def _settings(request: Request) -> OidcSettings:
    settings = get_runtime(request).settings.auth.oidc
    if settings is None:
        raise NotFoundError(
            "sign-in method",
            "oidc",
            "single sign-on is not configured on this server ([auth.oidc] in config.toml)",
        )
    return settings


def _client(request: Request, settings: OidcSettings) -> OidcClient:
    """One client per app (it keeps the provider's discovery document and keys); authlib and
    httpx load here, on the first sign-in, not at boot."""
    from drupe.identity.oidc import OidcClient

    client: OidcClient | None = getattr(request.app.state, "oidc_client", None)
    if client is None or client.settings is not settings:
        client = OidcClient(settings)
        request.app.state.oidc_client = client
    return client


def _callback_url(request: Request) -> str:
    return str(request.url_for("oidc_callback"))


async def _refuse(request: Request, status: int, reason: str) -> Response:
    await get_runtime(request).db.audit.record(
        "auth.oidc_refused", address=client_address(request), detail={"reason": reason[:300]}
    )
    response: Response
    if "text/html" in request.headers.get("accept", ""):
        page = (
            "<!doctype html><meta charset=utf-8><title>Sign-in refused</title>"
            f"<h1>Sign-in refused</h1><p>{escape(reason)}</p><p><a href=/>Back to Drupe</a></p>"
        )
        response = HTMLResponse(page, status_code=status)
    else:
        response = JSONResponse({"detail": reason}, status_code=status)
    response.delete_cookie(STATE_COOKIE, path=_COOKIE_PATH, httponly=True, samesite="lax")
    return response


@router.get("/api/auth/oidc/login", name="oidc_login")
async def oidc_login(request: Request) -> Response:
    settings = _settings(request)
    runtime = get_runtime(request)
    if runtime.authenticator is None:
        return await _refuse(request, 400, "auth is off on this server: there is no sign-in")
    try:
        start = await _client(request, settings).start(_callback_url(request))
    except OidcError as err:
        return await _refuse(request, err.status, str(err))
    await runtime.db.identities.begin(
        start.state, nonce=start.nonce, code_verifier=start.code_verifier, ttl=LOGIN_TTL_SECONDS
    )
    response = RedirectResponse(start.url, status_code=302)
    response.set_cookie(
        STATE_COOKIE,
        start.state,
        max_age=LOGIN_TTL_SECONDS,
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path=_COOKIE_PATH,
    )
    return response


@router.get("/api/auth/oidc/callback", name="oidc_callback")
async def oidc_callback(
    request: Request,
    state: Annotated[str, Query(max_length=128)] = "",
    code: Annotated[str, Query(max_length=2048)] = "",
    error: Annotated[str, Query(max_length=128)] = "",
    error_description: Annotated[str, Query(max_length=500)] = "",
) -> Response:
    settings = _settings(request)
    runtime = get_runtime(request)
    if runtime.authenticator is None:
        return await _refuse(request, 400, "auth is off on this server: there is no sign-in")
    cookie = request.cookies.get(STATE_COOKIE, "")
    if not state or not cookie or not hmac.compare_digest(state.encode(), cookie.encode()):
        return await _refuse(
            request, 400, "this sign-in did not start in this browser (state mismatch): start again"
        )
    pending = await runtime.db.identities.take(state)
    if pending is None:
        return await _refuse(request, 400, "this sign-in was used already or expired: start again")
    if error:
        reason = f"the provider refused: {error}" + (
            f" ({error_description})" if error_description else ""
        )
        return await _refuse(request, 403 if error == "access_denied" else 400, reason)
    if not code:
        return await _refuse(request, 400, "the provider sent no code")
    nonce, verifier = pending
    try:
        signed_in = await _client(request, settings).finish(
            code=code, redirect_uri=_callback_url(request), nonce=nonce, code_verifier=verifier
        )
        person = person_of(settings, signed_in.claims)
        user = await user_for_oidc(runtime.db, person, sync_role=settings.role_claim is not None)
    except OidcError as err:
        return await _refuse(request, err.status, str(err))
    except OidcRefused as err:
        return await _refuse(request, 403, str(err))
    response = RedirectResponse("/", status_code=302)
    response.delete_cookie(STATE_COOKIE, path=_COOKIE_PATH, httponly=True, samesite="lax")
    await start_session(request, user, "oidc", response, id_token=signed_in.id_token)
    return response


async def end_session_url(request: Request, id_token: str) -> str | None:
    """Where the browser goes to sign out at the provider too (None: nowhere: no ``[auth.oidc]``
    any more, or the provider has no ``end_session_endpoint``). The provider sends it back to
    this site's root, which must be registered there as a post-logout redirect URI."""
    settings = get_runtime(request).settings.auth.oidc
    if settings is None:
        return None
    back = str(request.url_for("oidc_signed_out"))
    return await _client(request, settings).end_session_url(
        id_token=id_token, post_logout_redirect_uri=back
    )


@router.get("/api/auth/oidc/signed-out", name="oidc_signed_out")
async def oidc_signed_out() -> Response:
    """Where the provider sends the browser after its sign-out: back to Drupe's sign-in."""
    return RedirectResponse("/", status_code=302)
