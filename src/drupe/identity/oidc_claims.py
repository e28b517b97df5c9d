"""What a verified set of OpenID claims means to Drupe (pure: no I/O).

Contract: ``person_of(settings, claims)`` returns the ``OidcPerson`` the claims describe (the
provider account, a wished-for user name, the e-mail and the role), or raises ``OidcRefused``
with the reason shown to the person:

* ``allowed_domains`` set: the ``email`` claim must be there, not marked unverified
  (``email_verified: false``), and its domain (or a subdomain of it) must be listed.
* The name comes from ``name_claim`` (default ``preferred_username``), else the e-mail's local
  part, else the subject; accents are dropped and other characters a Drupe user name cannot
  hold become ``-`` (``safe_name``).
* The role is ``admin`` when ``role_claim`` (a claim, or a dotted path into nested ones)
  holds, as a string or in a list of strings, one of ``admin_values``; ``member`` otherwise,
  and when no ``role_claim`` is configured.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from drupe.admission.principal import Role
from drupe.settings_auth import OidcSettings

__all__ = [
    "OidcError",
    "OidcPerson",
    "OidcRefused",
    "candidate_names",
    "claim_at",
    "person_of",
    "role_of",
    "safe_name",
]

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")
NAME_CHARS: Final = 64


class OidcError(Exception):
    """A sign-in that failed on the provider's side or its token's checks (``status``: 400,
    or 502 when the provider could not be reached or answered nonsense)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class OidcRefused(Exception):
    """A sign-in the configuration does not allow (403, with this reason)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class OidcPerson:
    issuer: str
    subject: str
    name: str
    email: str | None
    role: Role


def safe_name(value: str) -> str:
    """``value`` as a Drupe user name (1 to 64 of letters, digits, ``.``, ``_``, ``-``)."""
    ascii_only = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode()
    name = _UNSAFE.sub("-", ascii_only.strip()).strip("-.")[:NAME_CHARS]
    return name or "user"


def candidate_names(base: str, tries: int) -> list[str]:
    """``base``, then ``base-2``, ``base-3``, ...: ``tries`` names, each within 64 chars."""
    names = [base]
    for n in range(2, tries + 1):
        suffix = f"-{n}"
        names.append(base[: NAME_CHARS - len(suffix)] + suffix)
    return names


def claim_at(claims: Mapping[str, Any], path: str) -> Any:
    """The claim ``path`` names: a top-level claim, else a dotted path into nested objects
    (Keycloak's ``realm_access.roles``)."""
    if path in claims:
        return claims[path]
    value: Any = claims
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def role_of(settings: OidcSettings, claims: Mapping[str, Any]) -> Role:
    if settings.role_claim is None:
        return "member"
    value = claim_at(claims, settings.role_claim)
    values = value if isinstance(value, list) else [value]
    admin = set(settings.admin_values)
    return "admin" if any(isinstance(v, str) and v in admin for v in values) else "member"


def _email(settings: OidcSettings, claims: Mapping[str, Any]) -> str | None:
    email = claims.get("email")
    email = email.strip() if isinstance(email, str) and "@" in email else None
    if not settings.allowed_domains:
        return email
    if email is None:
        raise OidcRefused(
            "this server accepts only e-mail addresses of "
            f"{', '.join(settings.allowed_domains)}, and the provider sent none "
            "(is the 'email' scope granted?)"
        )
    if claims.get("email_verified") is False:
        raise OidcRefused(f"the provider says {email} is not verified")
    domain = email.rsplit("@", 1)[1].lower()
    if not any(domain == d or domain.endswith(f".{d}") for d in settings.allowed_domains):
        raise OidcRefused(
            f"{domain} is not among the e-mail domains this server accepts "
            f"({', '.join(settings.allowed_domains)})"
        )
    return email


def person_of(settings: OidcSettings, claims: Mapping[str, Any]) -> OidcPerson:
    subject = claims.get("sub")
    if not isinstance(subject, str) or not subject:
        raise OidcRefused("the provider's answer names no subject ('sub')")
    email = _email(settings, claims)
    wished = claims.get(settings.name_claim)
    if not isinstance(wished, str) or not wished.strip():
        wished = email.split("@", 1)[0] if email else subject
    return OidcPerson(
        issuer=settings.issuer,
        subject=subject,
        name=safe_name(wished),
        email=email if email is not None and len(email) <= 320 else None,
        role=role_of(settings, claims),
    )
