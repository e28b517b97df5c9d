"""``OidcClient``: OpenID Connect sign-in (authorization code + PKCE) through ``authlib``.

Contract:

* ``start(redirect_uri)`` returns a ``Start``: the provider URL to send the browser to, with a
  fresh random ``state``, ``nonce`` and PKCE ``code_verifier`` (S256 challenge). The caller
  keeps the three server-side until the callback.
* ``finish(code=, redirect_uri=, nonce=, code_verifier=)`` exchanges the code at the token
  endpoint (proving the verifier), verifies the ID token with ``authlib`` (signature against
  the provider's JWKS, fetched again once on an unknown key id; ``iss`` = the issuer of the
  discovery document, which must be the configured one (a trailing ``/`` aside); ``aud``
  holds the client id, ``azp`` if present is it; the ``nonce``; ``exp``/``iat`` with 120 s
  leeway) and returns a ``SignedIn``: its claims, completed by the userinfo endpoint's (whose
  ``sub`` must be the token's), and the ID token itself (for the sign-out's hint).
* ``end_session_url(id_token=, post_logout_redirect_uri=)`` is the provider's
  ``end_session_endpoint`` (OpenID Connect RP-Initiated Logout 1.0) with ``id_token_hint``,
  ``client_id``, ``post_logout_redirect_uri`` and a random ``state``; None when the discovery
  document has no such endpoint or cannot be read (the sign-out then stays local).
* The discovery document is read once, lazily, from ``<issuer>/.well-known/openid-configuration``
  and must name the configured issuer.
* Failures raise ``OidcError`` with a message for the person signing in: the provider refused
  the code (``status`` 400), the ID token failed a check (400), or the provider could not be
  reached or answered nonsense (502). No secret (code, token, verifier) is in a message.
* This module imports ``authlib`` and ``httpx``: the routes load it on the first sign-in, not
  at boot (``tests/test_boot_imports.py``).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Any, Final, NamedTuple
from urllib.parse import urlencode, urlsplit

import httpx
from authlib.integrations.base_client import OAuthError
from authlib.integrations.starlette_client import StarletteOAuth2App
from joserfc.errors import JoseError

from drupe.identity.oidc_claims import OidcError
from drupe.settings_auth import OidcSettings

__all__ = ["LEEWAY_SECONDS", "OidcClient", "OidcError", "SignedIn", "Start"]

LEEWAY_SECONDS: Final = 120
TIMEOUT_SECONDS: Final = 10.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Start:
    url: str
    state: str
    nonce: str
    code_verifier: str

    def __repr__(self) -> str:  # the verifier is a secret until it is used
        return f"Start(url={self.url!r}, state=<{len(self.state)} chars>)"


class SignedIn(NamedTuple):
    claims: dict[str, Any]
    id_token: str

    def __repr__(self) -> str:  # the ID token is a credential of the user's identity
        return f"SignedIn(sub={self.claims.get('sub')!r})"


class OidcClient:
    def __init__(self, settings: OidcSettings) -> None:
        self.settings = settings
        self._app = StarletteOAuth2App(
            None,
            name="oidc",
            client_id=settings.client_id,
            client_secret=settings.client_secret(),
            server_metadata_url=f"{settings.issuer}/.well-known/openid-configuration",
            client_kwargs={
                "scope": " ".join(settings.scopes),
                "code_challenge_method": "S256",
                "timeout": TIMEOUT_SECONDS,
            },
        )

    async def _metadata(self) -> dict[str, Any]:
        try:
            metadata: dict[str, Any] = await self._app.load_server_metadata()
        except (httpx.HTTPError, ValueError) as err:
            raise OidcError(
                f"cannot read the OpenID provider's discovery document at {self.settings.issuer}"
                f"/.well-known/openid-configuration: {type(err).__name__}",
                502,
            ) from None
        if str(metadata.get("issuer", "")).rstrip("/") != self.settings.issuer:
            raise OidcError(
                f"the provider's discovery document names issuer {metadata.get('issuer')!r}, "
                f"not the configured {self.settings.issuer!r}: fix [auth.oidc] issuer",
                502,
            )
        return metadata

    async def start(self, redirect_uri: str) -> Start:
        await self._metadata()
        state = secrets.token_urlsafe(32)
        nonce = secrets.token_urlsafe(24)
        verifier = secrets.token_urlsafe(48)
        made = await self._app.create_authorization_url(
            redirect_uri, state=state, nonce=nonce, code_verifier=verifier
        )
        return Start(url=str(made["url"]), state=state, nonce=nonce, code_verifier=verifier)

    async def finish(
        self, *, code: str, redirect_uri: str, nonce: str, code_verifier: str
    ) -> SignedIn:
        metadata = await self._metadata()
        try:
            token = await self._app.fetch_access_token(
                redirect_uri=redirect_uri, code=code, code_verifier=code_verifier
            )
        except OAuthError as err:
            raise OidcError(f"the provider refused the sign-in code: {err.error}") from None
        except httpx.HTTPError as err:
            raise OidcError(f"cannot reach the token endpoint: {type(err).__name__}", 502) from None
        if "id_token" not in token:
            raise OidcError("the provider sent no ID token (is the 'openid' scope granted?)")
        claims = await self._verified(token, nonce, metadata)
        if metadata.get("userinfo_endpoint") and token.get("access_token"):
            claims = {**await self._userinfo(token, claims["sub"]), **claims}
        return SignedIn(claims, str(token["id_token"]))

    async def end_session_url(self, *, id_token: str, post_logout_redirect_uri: str) -> str | None:
        """Where the browser signs out at the provider (None: the provider offers no way)."""
        try:
            metadata = await self._metadata()
        except OidcError:
            return None
        endpoint = metadata.get("end_session_endpoint")
        if not isinstance(endpoint, str) or urlsplit(endpoint).scheme not in ("http", "https"):
            return None
        query = urlencode(
            {
                "id_token_hint": id_token,
                "client_id": self.settings.client_id,
                "post_logout_redirect_uri": post_logout_redirect_uri,
                "state": secrets.token_urlsafe(16),
            }
        )
        return f"{endpoint}{'&' if '?' in endpoint else '?'}{query}"

    async def _verified(
        self, token: dict[str, Any], nonce: str, metadata: dict[str, Any]
    ) -> dict[str, Any]:
        options = {
            "iss": {"essential": True, "value": str(metadata["issuer"])},
            "aud": {"essential": True, "value": self.settings.client_id},
            "nonce": {"essential": True, "value": nonce},
        }
        try:
            claims = await self._app.parse_id_token(
                token, nonce=nonce, claims_options=options, leeway=LEEWAY_SECONDS
            )
        except JoseError as err:
            raise OidcError(f"the ID token was refused: {err.error}: {err.description}") from None
        except httpx.HTTPError as err:
            raise OidcError(f"cannot read the provider's keys: {type(err).__name__}", 502) from None
        if claims is None:
            raise OidcError("the provider sent no ID token")
        return dict(claims)

    async def _userinfo(self, token: dict[str, Any], subject: str) -> dict[str, Any]:
        try:
            info = dict(await self._app.userinfo(token=token))
        except (httpx.HTTPError, OAuthError, ValueError) as err:
            raise OidcError(
                f"cannot read the provider's userinfo: {type(err).__name__}", 502
            ) from None
        if info.get("sub") != subject:
            raise OidcError("the provider's userinfo is about another subject than the ID token")
        return info
