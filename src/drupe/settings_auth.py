"""The ``[auth]`` table of ``config.toml``: single sign-on and the trusted proxy header.

Contract: ``read_auth_table(path, table)`` turns the table into the keyword arguments that
``AuthSettings`` takes (``oidc``, ``trusted_header``, ``trusted_proxies``) or raises a
``ConfigError`` that names the file, the key and what it must be. Only the *name* of the
environment variable that holds the OIDC client secret is in the file
(``client_secret_env``); the secret itself is read when it is needed (``client_secret()``)
and never kept in a settings value, so no ``repr`` or log line can show it.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from drupe.errors import ConfigError

__all__ = ["DEFAULT_SCOPES", "OidcSettings", "read_auth_table"]

DEFAULT_SCOPES: Final = ("openid", "email", "profile")
_AUTH_KEYS: Final = frozenset(("oidc", "trusted_header", "trusted_proxies"))
_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_HEADER_NAME: Final = re.compile(r"^[A-Za-z0-9-]{1,64}$")
_DOMAIN: Final = re.compile(r"^[a-z0-9.-]+\.[a-z]{2,}$|^[a-z0-9-]+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class OidcSettings:
    """One OpenID Connect provider (``docs/security.md``, single sign-on)."""

    issuer: str
    """The provider's issuer URL (its discovery document is ``<issuer>/.well-known/...``)."""
    client_id: str
    client_secret_env: str | None = None
    """The name of the environment variable holding the client secret (None: a public
    client, PKCE only)."""
    scopes: tuple[str, ...] = DEFAULT_SCOPES
    role_claim: str | None = None
    """The claim whose value (a string or a list of strings) decides the role."""
    admin_values: tuple[str, ...] = ()
    """Values of ``role_claim`` that make an admin; anything else is a member."""
    name_claim: str = "preferred_username"
    allowed_domains: tuple[str, ...] = ()
    """E-mail domains accepted (empty: any); the ``email`` claim must be verified."""
    display_name: str = "Sign in with SSO"

    def client_secret(self) -> str | None:
        """The client secret, read from the environment now (None: a public client)."""
        if self.client_secret_env is None:
            return None
        return os.environ.get(self.client_secret_env) or None


def _strings(path: Path, key: str, value: Any, *, allow_empty: bool = True) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise ConfigError(f"{path}: [auth.oidc] {key} must be a list of non-empty strings")
    if not value and not allow_empty:
        raise ConfigError(f"{path}: [auth.oidc] {key} must not be empty")
    return tuple(value)


def _text(path: Path, key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{path}: [auth.oidc] {key} must be a non-empty string")
    return value.strip()


def _oidc(path: Path, table: Any) -> OidcSettings:
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [auth.oidc] must be a table")
    known = {
        "issuer",
        "client_id",
        "client_secret_env",
        "scopes",
        "role_claim",
        "admin_values",
        "name_claim",
        "allowed_domains",
        "display_name",
    }
    if "client_secret" in table:
        raise ConfigError(
            f"{path}: [auth.oidc] client_secret does not belong in the file: put the secret in "
            "an environment variable and name it with client_secret_env"
        )
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"{path}: [auth.oidc] has no key {unknown[0]!r} (known: {sorted(known)})")
    for required in ("issuer", "client_id"):
        if required not in table:
            raise ConfigError(f"{path}: [auth.oidc] needs {required}")
    issuer = _text(path, "issuer", table["issuer"]).rstrip("/")
    if not issuer.startswith(("https://", "http://")):
        raise ConfigError(f"{path}: [auth.oidc] issuer must be an http(s) URL, not {issuer!r}")
    kwargs: dict[str, Any] = {
        "issuer": issuer,
        "client_id": _text(path, "client_id", table["client_id"]),
    }
    secret_env = table.get("client_secret_env")
    if secret_env is not None:
        if not isinstance(secret_env, str) or not _ENV_NAME.match(secret_env):
            raise ConfigError(
                f"{path}: [auth.oidc] client_secret_env is the NAME of an environment variable "
                "(letters, digits and '_'), e.g. DRUPE_OIDC_SECRET"
            )
        if not os.environ.get(secret_env):
            raise ConfigError(
                f"{path}: [auth.oidc] client_secret_env names {secret_env}, which is not set: "
                f"export {secret_env}=<the client secret from your provider>"
            )
        kwargs["client_secret_env"] = secret_env
    if "scopes" in table:
        scopes = _strings(path, "scopes", table["scopes"], allow_empty=False)
        if "openid" not in scopes:
            raise ConfigError(f"{path}: [auth.oidc] scopes must include 'openid'")
        kwargs["scopes"] = scopes
    for key in ("role_claim", "name_claim", "display_name"):
        if key in table:
            kwargs[key] = _text(path, key, table[key])
    if "admin_values" in table:
        kwargs["admin_values"] = _strings(path, "admin_values", table["admin_values"])
        if "role_claim" not in table:
            raise ConfigError(f"{path}: [auth.oidc] admin_values needs role_claim")
    if "allowed_domains" in table:
        domains = tuple(
            d.lower().lstrip("@")
            for d in _strings(path, "allowed_domains", table["allowed_domains"])
        )
        bad = [d for d in domains if not _DOMAIN.match(d)]
        if bad:
            raise ConfigError(f"{path}: [auth.oidc] allowed_domains: {bad[0]!r} is no domain")
        kwargs["allowed_domains"] = domains
    return OidcSettings(**kwargs)


def read_auth_table(path: Path, table: Any) -> dict[str, Any]:
    """The ``AuthSettings`` fields the ``[auth]`` table of ``path`` sets."""
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [auth] must be a table")
    unknown = sorted(set(table) - _AUTH_KEYS)
    if unknown:
        raise ConfigError(f"{path}: [auth] has no key {unknown[0]!r} (known: {sorted(_AUTH_KEYS)})")
    out: dict[str, Any] = {}
    if "oidc" in table:
        out["oidc"] = _oidc(path, table["oidc"])
    header = table.get("trusted_header")
    if header is not None:
        if not isinstance(header, str) or not _HEADER_NAME.match(header):
            raise ConfigError(
                f"{path}: [auth] trusted_header must be a header name, e.g. 'X-Forwarded-User'"
            )
        out["trusted_header"] = header
    proxies = table.get("trusted_proxies")
    if proxies is not None:
        if not isinstance(proxies, list) or not all(isinstance(p, str) for p in proxies):
            raise ConfigError(f"{path}: [auth] trusted_proxies must be a list of addresses")
        for proxy in proxies:
            try:
                ipaddress.ip_network(proxy, strict=False)
            except ValueError as err:
                raise ConfigError(
                    f"{path}: [auth] trusted_proxies: {proxy!r} is no address or network "
                    "(e.g. '127.0.0.1/32', '10.0.0.0/8')"
                ) from err
        out["trusted_proxies"] = tuple(proxies)
    if "trusted_header" in out and not out.get("trusted_proxies"):
        raise ConfigError(
            f"{path}: [auth] trusted_header needs trusted_proxies: the addresses of the proxy "
            "that sets it (anyone else could send the header and be anyone)"
        )
    return out
