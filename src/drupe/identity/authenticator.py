"""``Authenticator``: a presented credential -> the ``Identity`` that makes the request.

Contract:

* ``resolve(credential)`` looks the credential up (a session cookie in ``auth_sessions``, a
  personal token in ``user_tokens``, a gateway key in ``api_keys`` acting as its owner) and
  returns its ``Identity``, or None when it is unknown, expired, revoked, or its user is
  disabled. ``by_header(value)`` does the same for the user a trusted proxy's header names
  (``identity.accounts.user_for_header``: created as a member when missing). A hit is
  cached by the credential's SHA-256 for ``cache_seconds`` (so a busy client costs no
  database round trip per request); refusals are never cached.
* ``forget_user(user_id)`` and ``forget(credential)`` drop cached hits at once (sign-out,
  disable, role change on this node); other nodes see the change within ``cache_seconds``.
* ``local_admin()`` is the identity of a server with auth off.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Literal

from drupe.admission.principal import LOCAL_ADMIN, Principal
from drupe.identity.accounts import user_for_header
from drupe.identity.credentials import Credential
from drupe.persistence.auth_sessions import hash_secret
from drupe.persistence.records import ApiKeyRecord
from drupe.persistence.users import UserRecord

if TYPE_CHECKING:
    from drupe.persistence.db import Database

__all__ = ["GATEWAY_SCOPE", "Authenticator", "Identity", "principal_of"]

GATEWAY_SCOPE: Final = "gateway"
_CACHE_MAX: Final = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Identity:
    principal: Principal
    via: Literal["session", "token", "key", "local", "header"]
    ref: str | None = None
    """The session, token or key id (what the revocation sweep re-checks)."""
    csrf_token: str | None = None
    key: ApiKeyRecord | None = None


def principal_of(user: UserRecord, scopes: frozenset[str] | None = None) -> Principal:
    return Principal(user_id=user.id, name=user.name, role=user.role, scopes=scopes)


class Authenticator:
    def __init__(
        self,
        db: Database,
        *,
        cache_seconds: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.cache_seconds = cache_seconds
        self.clock = clock
        self._cache: OrderedDict[str, tuple[float, Identity]] = OrderedDict()

    def local_admin(self) -> Identity:
        return Identity(principal=LOCAL_ADMIN, via="local")

    async def resolve(self, credential: Credential) -> Identity | None:
        digest = hash_secret(f"{credential.kind}:{credential.value}")
        return await self._cached(digest, lambda: self._look_up(credential))

    async def by_header(self, value: str) -> Identity | None:
        """The user a trusted proxy's header names (created as a member when missing; None
        when disabled). The caller has checked that the request comes from a trusted proxy."""
        digest = hash_secret(f"header:{value}")
        return await self._cached(digest, lambda: self._header_user(value))

    async def _header_user(self, value: str) -> Identity | None:
        user = await user_for_header(self.db, value)
        return Identity(principal=principal_of(user), via="header") if user is not None else None

    async def _cached(
        self, digest: str, look_up: Callable[[], Awaitable[Identity | None]]
    ) -> Identity | None:
        hit = self._cache.get(digest)
        now = self.clock()
        if hit is not None:
            if hit[0] > now:
                return hit[1]
            del self._cache[digest]
        identity = await look_up()
        if identity is not None and self.cache_seconds > 0:
            if len(self._cache) >= _CACHE_MAX:
                self._cache.popitem(last=False)
            self._cache[digest] = (now + self.cache_seconds, identity)
        return identity

    async def _look_up(self, credential: Credential) -> Identity | None:
        if credential.kind == "session":
            found = await self.db.auth_sessions.resolve(credential.value)
            if found is None:
                return None
            session, user = found
            return Identity(
                principal=principal_of(user),
                via="session",
                ref=session.id,
                csrf_token=session.csrf_token,
            )
        if credential.kind == "token":
            token = await self.db.users.resolve_token(credential.value)
            if token is None:
                return None
            record, user = token
            return Identity(principal=principal_of(user), via="token", ref=record.id)
        key = await self.db.api_keys.verify(credential.value)
        if key is None:
            return None
        owner = await self._key_owner(key)
        if owner is None:
            return None
        return Identity(
            principal=principal_of(owner, frozenset((GATEWAY_SCOPE,))),
            via="key",
            ref=key.id,
            key=key,
        )

    async def _key_owner(self, key: ApiKeyRecord) -> UserRecord | None:
        owner = (
            await self.db.users.get(key.owner_id)
            if key.owner_id is not None
            else await self.db.users.first_admin()
        )
        return owner if owner is not None and not owner.disabled else None

    def forget(self, credential: Credential) -> None:
        self._cache.pop(hash_secret(f"{credential.kind}:{credential.value}"), None)

    def forget_user(self, user_id: str) -> None:
        for digest in [d for d, (_, i) in self._cache.items() if i.principal.user_id == user_id]:
            del self._cache[digest]
