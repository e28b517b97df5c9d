"""What a request presents: a session cookie or an ``Authorization`` header (pure).

Contract: ``presented(headers, cookie_name)`` returns the one credential of a request, or None
when it presents none, or raises ``BadCredentials`` with a message that says what is wrong
(a malformed ``Authorization`` header). The Anthropic dialect's ``x-api-key`` header counts
like a bearer value. A bearer value is ``token`` when it is a personal token
(``drt_...``) and ``key`` otherwise (a gateway API key). An ``Authorization`` header wins over
a cookie. Nothing here looks anything up.

A ``Cookie`` header is read exactly as ``http.cookies.SimpleCookie`` reads it (an unreadable
header presents no session). The common header, plain ``name=value`` pairs, takes a fast path
that gives the same answer without building a ``SimpleCookie`` (``bench/auth.py``: the
per-request CPU of the gate).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from typing import Final, Literal

from drupe.persistence.users import TOKEN_PREFIX

__all__ = ["COOKIE_NAME", "BadCredentials", "Credential", "presented"]

COOKIE_NAME: Final = "drupe_session"
MAX_CREDENTIAL_CHARS: Final = 512


class BadCredentials(Exception):
    """A credential that cannot be read (401 with this message)."""


@dataclass(frozen=True, slots=True)
class Credential:
    kind: Literal["session", "token", "key"]
    value: str

    def __repr__(self) -> str:  # never a secret in a log line or a traceback
        return f"Credential(kind={self.kind!r}, value=<{len(self.value)} chars>)"


# Plain pairs: keys of characters ``Morsel`` accepts (no ``$``), values of characters the
# ``SimpleCookie`` pattern takes unquoted (no quote, backslash, comma or space), ``; `` between.
_PAIR: Final = r"[A-Za-z0-9!#%&'*+\-.^_`|~]+=[A-Za-z0-9!#%&'*+\-./:=?@^_`|~]*"
_PLAIN: Final = re.compile(rf" *{_PAIR}(?:; *{_PAIR})*;? *")
_RESERVED: Final = frozenset(
    ("expires", "path", "comment", "domain", "max-age", "secure", "httponly", "version", "samesite")
)
"""``Morsel``'s attribute names: such a key is an attribute of the cookie before it."""


def _plain_cookie(raw: str, name: str) -> tuple[bool, str | None]:
    """``(True, value)`` when ``raw`` is plain pairs (``SimpleCookie`` gives the last value of
    ``name``), ``(False, None)`` when only ``SimpleCookie`` can say."""
    if _PLAIN.fullmatch(raw) is None:
        return False, None
    found: str | None = None
    for pair in raw.split(";"):
        key, _, value = pair.strip(" ").partition("=")
        if not key:  # after a trailing ';'
            continue
        if key.lower() in _RESERVED:
            return False, None
        if key == name:
            found = value  # a repeated cookie: the last one wins, as in SimpleCookie
    return True, found or None


def _cookie(raw: str, name: str) -> str | None:
    plain, value = _plain_cookie(raw, name)
    if plain:
        return value
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return None
    morsel = jar.get(name)
    return morsel.value if morsel is not None and morsel.value else None


def presented(
    headers: Iterable[tuple[bytes, bytes]], cookie_name: str = COOKIE_NAME
) -> Credential | None:
    authorization: str | None = None
    api_key: str | None = None
    cookies: list[str] = []
    for name, raw in headers:
        if name == b"authorization":
            authorization = raw.decode("latin-1")
        elif name == b"x-api-key":
            api_key = raw.decode("latin-1").strip()
        elif name == b"cookie":
            cookies.append(raw.decode("latin-1"))
    if authorization is not None:
        scheme, _, rest = authorization.strip().partition(" ")
        if scheme.lower() != "bearer":
            raise BadCredentials(
                "the Authorization header must be 'Bearer <token>' "
                f"(got the scheme {scheme[:20]!r})"
            )
        value = rest.strip()
        if not value or " " in value:
            raise BadCredentials("the Authorization header has no token after 'Bearer'")
        if len(value) > MAX_CREDENTIAL_CHARS:
            raise BadCredentials(
                f"the bearer token is longer than {MAX_CREDENTIAL_CHARS} characters"
            )
        return Credential("token" if value.startswith(TOKEN_PREFIX) else "key", value)
    if api_key and len(api_key) <= MAX_CREDENTIAL_CHARS:
        return Credential("token" if api_key.startswith(TOKEN_PREFIX) else "key", api_key)
    for jar in cookies:
        session = _cookie(jar, cookie_name)
        if session is not None:
            return Credential("session", session)
    return None
