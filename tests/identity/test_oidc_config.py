"""``[auth]`` in config.toml (``drupe.settings_auth``) and the claims' meaning
(``drupe.identity.oidc_claims``): pure, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from drupe.errors import ConfigError
from drupe.identity.oidc_claims import OidcRefused, candidate_names, person_of, safe_name
from drupe.settings import Settings
from drupe.settings_auth import OidcSettings

GOOD = """
[auth]
trusted_header = "X-Forwarded-User"
trusted_proxies = ["127.0.0.1/32", "10.0.0.0/8"]

[auth.oidc]
issuer = "https://sso.example.org/realms/team/"
client_id = "drupe"
client_secret_env = "DRUPE_OIDC_SECRET_T"
role_claim = "groups"
admin_values = ["drupe-admins"]
allowed_domains = ["@Example.org"]
display_name = "Sign in with Keycloak"
"""


def _load(tmp_path: Path, text: str) -> Settings:
    config = tmp_path / "config.toml"
    config.write_text(text)
    return Settings(config_path=config).with_file_tables()


def test_a_full_auth_table_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DRUPE_OIDC_SECRET_T", "hunter2-secret")
    auth = _load(tmp_path, GOOD).auth
    assert auth.trusted_header == "X-Forwarded-User"
    assert auth.trusted_proxies == ("127.0.0.1/32", "10.0.0.0/8")
    assert auth.oidc == OidcSettings(
        issuer="https://sso.example.org/realms/team",
        client_id="drupe",
        client_secret_env="DRUPE_OIDC_SECRET_T",
        role_claim="groups",
        admin_values=("drupe-admins",),
        allowed_domains=("example.org",),
        display_name="Sign in with Keycloak",
    )
    assert auth.oidc.scopes == ("openid", "email", "profile")
    assert auth.oidc.client_secret() == "hunter2-secret"
    assert "hunter2" not in repr(auth)  # the secret is never kept in the settings
    assert _load(tmp_path, 'default_model = "x"\n').auth.oidc is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[auth.oidc]\nissuer = "https://x"\nclient_id = "d"\nclient_secret = "s"\n', "env"),
        ('[auth.oidc]\nissuer = "https://x"\n', "needs client_id"),
        ('[auth.oidc]\nissuer = "x.org"\nclient_id = "d"\n', "http(s) URL"),
        ('[auth.oidc]\nissuer = "https://x"\nclient_id = "d"\nscope = []\n', "no key 'scope'"),
        ('[auth.oidc]\nissuer = "https://x"\nclient_id = "d"\nscopes = ["email"]\n', "openid"),
        (
            '[auth.oidc]\nissuer = "https://x"\nclient_id = "d"\nclient_secret_env = "NOPE_T"\n',
            "NOPE_T, which is not set",
        ),
        (
            '[auth.oidc]\nissuer = "https://x"\nclient_id = "d"\nclient_secret_env = "a b"\n',
            "NAME of an environment variable",
        ),
        ('[auth.oidc]\nissuer = "https://x"\nclient_id = "d"\nadmin_values = ["a"]\n', "role"),
        ('[auth]\ntrusted_header = "X-User"\n', "needs trusted_proxies"),
        ('[auth]\ntrusted_header = "X-User"\ntrusted_proxies = ["proxy"]\n', "no address"),
        ('[auth]\nsecret = "x"\n', "no key 'secret'"),
    ],
)
def test_a_bad_auth_table_names_the_fix(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"config\.toml") as err:
        _load(tmp_path, text)
    assert message in str(err.value)


OIDC = OidcSettings(
    issuer="https://sso",
    client_id="d",
    role_claim="roles",
    admin_values=("admin",),
    allowed_domains=("example.org",),
)


def test_claims_map_to_a_person_or_a_refusal() -> None:
    person = person_of(OIDC, {"sub": "s1", "email": "a@dev.example.org", "roles": "admin"})
    assert (person.name, person.role, person.email) == ("a", "admin", "a@dev.example.org")
    member = person_of(OIDC, {"sub": "s2", "email": "b@example.org", "roles": ["user"]})
    assert member.role == "member"
    named = person_of(OIDC, {"sub": "s3", "email": "c@example.org", "preferred_username": "C D"})
    assert named.name == "C-D"
    for claims, reason in (
        ({"sub": "s", "email": "x@badexample.org"}, "badexample.org is not among"),
        ({"sub": "s", "email": "x@example.org", "email_verified": False}, "not verified"),
        ({"sub": "s"}, "sent none"),
        ({"email": "x@example.org"}, "no subject"),
    ):
        with pytest.raises(OidcRefused, match=reason):
            person_of(OIDC, claims)
    keycloak = OidcSettings(
        issuer="https://sso", client_id="d", role_claim="realm_access.roles", admin_values=("a",)
    )
    assert person_of(keycloak, {"sub": "s", "realm_access": {"roles": ["u", "a"]}}).role == "admin"
    assert person_of(keycloak, {"sub": "s", "realm_access": ["a"]}).role == "member"
    no_role = OidcSettings(issuer="https://sso", client_id="d")
    assert person_of(no_role, {"sub": "s", "roles": "admin"}).role == "member"
    assert person_of(no_role, {"sub": "abc|123"}).name == "abc-123"


def test_names_are_safe_and_bounded() -> None:
    assert safe_name("  ..Ünïcode user!  ") == "Unicode-user"
    assert safe_name("@@@") == "user"
    long = "x" * 80
    names = candidate_names(safe_name(long), 12)
    assert names[0] == "x" * 64 and names[11] == "x" * 61 + "-12"
    assert all(len(n) <= 64 for n in names) and len(set(names)) == 12
