"""Sign-in routes (``docs/security.md``): password sign-in, sign-out, who am I, the one-time
sign-in link, and one's own personal tokens.

* ``POST /api/auth/login`` ``{"username", "password"}``: 200 with the user and the session's
  CSRF token, and the session cookie (HttpOnly, SameSite=Lax, Secure over https). A wrong
  password and an unknown user get the same 401 in the same time; failures are rate-limited
  per user and per address (429).
* ``POST /api/auth/logout``: ends the session at once (204, the cookie cleared).
* ``GET /api/auth/me``: the caller, how they signed in, and the CSRF token of their session.
* ``GET /api/auth/link?token=``: a one-time link (the first run's) signs in and redirects to
  the UI.
* ``GET /api/auth/methods``: what the sign-in page offers.
* ``GET|POST /api/auth/tokens``, ``DELETE /api/auth/tokens/{id}``: the caller's own tokens
  (the plaintext is shown once, in the creating response).
Every sign-in, failure, sign-out and token change goes to the audit log (no secret in it).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.responses import JSONResponse, RedirectResponse
from pydantic import BaseModel, Field

from drupe.admission.principal import Principal
from drupe.errors import NotFoundError
from drupe.http.errors import TooManyRequests, Unauthorized
from drupe.http.state import get_caller, get_runtime
from drupe.identity.credentials import COOKIE_NAME, BadCredentials, presented
from drupe.identity.login_limiter import LoginLimiter
from drupe.persistence.users import MAX_PASSWORD_CHARS, UserRecord

__all__ = ["router"]

router = APIRouter(tags=["auth"])

_SAME_401 = "wrong user name or password"


class LoginBody(BaseModel):
    username: str = Field(min_length=1, max_length=64)
    password: str = Field(min_length=1, max_length=MAX_PASSWORD_CHARS)


class TokenBody(BaseModel):
    name: str = Field(default="token", min_length=1, max_length=100)


def user_json(user: UserRecord | Principal) -> dict[str, Any]:
    if isinstance(user, Principal):
        return {"id": user.user_id, "name": user.name, "role": user.role}
    return {"id": user.id, "name": user.name, "email": user.email, "role": user.role}


def client_address(request: Request) -> str:
    return request.client.host if request.client is not None else "unknown"


def _limiter(request: Request) -> LoginLimiter:
    limiter: LoginLimiter | None = getattr(request.app.state, "login_limiter", None)
    if limiter is None:
        settings = get_runtime(request).settings
        limiter = LoginLimiter(
            max_per_user=settings.auth.max_failures_per_user,
            max_per_address=settings.auth.max_failures_per_address,
            redis_url=settings.cluster.redis_url,  # cluster mode: one window for every node
            key_prefix=settings.cluster.key_prefix,
        )
        request.app.state.login_limiter = limiter
    return limiter


async def start_session(
    request: Request,
    user: UserRecord,
    method: str,
    response: Response,
    *,
    id_token: str | None = None,
) -> str:
    """Create a session for ``user``, set its cookie on ``response``; the CSRF token.
    ``id_token``: an OIDC sign-in's, kept sealed for the sign-out at the provider."""
    runtime = get_runtime(request)
    value, session = await runtime.db.auth_sessions.create(
        user.id,
        method=method,
        ttl=runtime.settings.auth.session_days * 86400,
        id_token=id_token,
    )
    response.set_cookie(
        COOKIE_NAME,
        value,
        max_age=int(runtime.settings.auth.session_days * 86400),
        httponly=True,
        samesite="lax",
        secure=request.url.scheme == "https",
        path="/",
    )
    await runtime.db.audit.record(
        "auth.login",
        actor_id=user.id,
        actor_name=user.name,
        address=client_address(request),
        detail={"method": method},
    )
    return session.csrf_token


@router.post("/api/auth/login")
async def login(body: LoginBody, request: Request, response: Response) -> dict[str, Any]:
    runtime = get_runtime(request)
    if runtime.authenticator is None:
        raise Unauthorized("auth is off on this server (--no-auth): there is nothing to sign in to")
    address = client_address(request)
    limiter = _limiter(request)
    if not await limiter.allowed(body.username, address):
        raise TooManyRequests("too many failed sign-ins: wait a minute and try again")
    user = await runtime.db.users.authenticate(body.username, body.password)
    if user is None:
        await limiter.failed(body.username, address)
        await runtime.db.audit.record(
            "auth.login_failed", target=body.username[:64], address=address
        )
        raise Unauthorized(_SAME_401)
    csrf = await start_session(request, user, "password", response)
    return {"user": user_json(user), "csrfToken": csrf}


@router.post(
    "/api/auth/logout",
    status_code=204,
    responses={
        200: {
            "description": "Signed out here; the session came from an OpenID provider that "
            "offers sign-out: `redirect` is where the browser signs out there too."
        }
    },
)
async def logout(request: Request) -> Response:
    runtime = get_runtime(request)
    response: Response = Response(status_code=204)
    try:
        credential = presented(request.scope.get("headers", ()))
    except BadCredentials:
        credential = None
    if credential is None or credential.kind != "session":
        return _cleared(response)
    session = await runtime.db.auth_sessions.revoke(credential.value)
    if runtime.authenticator is not None:
        runtime.authenticator.forget(credential)
    if session is None:
        return _cleared(response)
    await runtime.db.audit.record(
        "auth.logout", actor_id=session.user_id, address=client_address(request)
    )
    if session.method == "oidc" and session.id_token:
        from drupe.api.oidc_routes import end_session_url

        redirect = await end_session_url(request, session.id_token)
        if redirect is not None:
            response = JSONResponse({"redirect": redirect})
    return _cleared(response)


def _cleared(response: Response) -> Response:
    response.delete_cookie(COOKIE_NAME, path="/", httponly=True, samesite="lax")
    return response


@router.get("/api/auth/me")
async def me(request: Request, caller: Annotated[Principal, Depends(get_caller)]) -> dict[str, Any]:
    identity = getattr(request.state, "identity", None)
    return {
        "user": user_json(caller),
        "via": getattr(identity, "via", "local"),
        "csrfToken": getattr(identity, "csrf_token", None),
        "auth": get_runtime(request).authenticator is not None,
    }


@router.get("/api/auth/methods")
async def methods(request: Request) -> dict[str, Any]:
    runtime = get_runtime(request)
    oidc = runtime.settings.auth.oidc
    on = runtime.authenticator is not None
    return {
        "auth": on,
        "password": True,
        "oidc": (
            {"name": oidc.display_name, "url": "/api/auth/oidc/login"}
            if on and oidc is not None
            else None
        ),
    }


@router.get("/api/auth/link")
async def link(request: Request, token: Annotated[str, Query(max_length=128)]) -> Response:
    runtime = get_runtime(request)
    user = await runtime.db.auth_sessions.use_link(token)
    if user is None:
        await runtime.db.audit.record("auth.link_refused", address=client_address(request))
        raise Unauthorized("this sign-in link was used already or has expired")
    response = RedirectResponse("/", status_code=303)
    await start_session(request, user, "link", response)
    return response


@router.get("/api/auth/tokens")
async def list_tokens(
    request: Request, caller: Annotated[Principal, Depends(get_caller)]
) -> dict[str, Any]:
    runtime = get_runtime(request)
    tokens = await runtime.db.users.list_tokens(caller.name)
    return {
        "tokens": [
            {
                "id": t.id,
                "name": t.name,
                "prefix": t.prefix,
                "createdAt": t.created_at.isoformat(),
                "lastUsedAt": t.last_used_at.isoformat() if t.last_used_at else None,
                "revoked": t.revoked_at is not None,
            }
            for t in tokens
        ]
    }


@router.post("/api/auth/tokens", status_code=201)
async def create_token(
    body: TokenBody, request: Request, caller: Annotated[Principal, Depends(get_caller)]
) -> dict[str, Any]:
    runtime = get_runtime(request)
    plaintext, record = await runtime.db.users.create_token(caller.name, body.name)
    await runtime.db.audit.record(
        "token.create",
        actor_id=caller.user_id,
        actor_name=caller.name,
        target=record.id,
        address=client_address(request),
        detail={"name": record.name, "prefix": record.prefix.removeprefix("drt_")},
    )
    return {"id": record.id, "name": record.name, "token": plaintext}


@router.delete("/api/auth/tokens/{token_id}", status_code=204)
async def revoke_token(
    token_id: str, request: Request, caller: Annotated[Principal, Depends(get_caller)]
) -> Response:
    runtime = get_runtime(request)
    own = {t.id for t in await runtime.db.users.list_tokens(caller.name)}
    if token_id not in own:
        raise NotFoundError("token", token_id)
    await runtime.db.users.revoke_token(token_id)
    if runtime.authenticator is not None:
        runtime.authenticator.forget_user(caller.user_id)
    await runtime.db.audit.record(
        "token.revoke",
        actor_id=caller.user_id,
        actor_name=caller.name,
        target=token_id,
        address=client_address(request),
    )
    return Response(status_code=204)
