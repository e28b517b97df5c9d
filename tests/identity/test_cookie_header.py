"""The session cookie is read from a ``Cookie`` header exactly as ``http.cookies.SimpleCookie``
reads it, fast path or not (``drupe.identity.credentials``).

The reference is ``SimpleCookie`` itself (the standard library, not Drupe's code): for every
header of a corpus of plain, odd and hostile headers, and of many generated ones, ``presented``
finds the same session value that ``SimpleCookie`` does (None when it finds none or refuses the
header).
"""

from __future__ import annotations

import itertools
import random
from http.cookies import CookieError, Morsel, SimpleCookie

import pytest

from drupe.identity.credentials import _RESERVED, COOKIE_NAME, presented

TOKEN = "k3Jx_9-aZ0qPbV7wYtL2mN4sR8uE1cD6fG5hJ3iO0Ak"


def _reference(raw: str) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(raw)
    except CookieError:
        return None
    morsel = jar.get(COOKIE_NAME)
    return morsel.value if morsel is not None and morsel.value else None


def _ours(raw: str) -> str | None:
    credential = presented([(b"cookie", raw.encode("latin-1"))])
    assert credential is None or credential.kind == "session"
    return None if credential is None else credential.value


CORPUS = [
    f"drupe_session={TOKEN}",
    f" drupe_session={TOKEN} ",
    f"drupe_session={TOKEN};",
    f"_ga=GA1.1.1234.5678; theme=dark; drupe_session={TOKEN}; lang=en-US",
    f"drupe_session=old; drupe_session={TOKEN}",  # the last one wins
    f"drupe_session={TOKEN};other=1",
    f"a=b=c; drupe_session={TOKEN}",
    "drupe_session=",  # empty: no session
    "theme=dark",
    "",
    f"path=/; drupe_session={TOKEN}",  # an attribute before any cookie: refused
    f"drupe_session={TOKEN}; Path=/",  # an attribute of the session cookie
    f"drupe_session={TOKEN}; secure",
    f"drupe_session={TOKEN}; Max-Age=3",
    f"$Version=1; drupe_session={TOKEN}",
    f'drupe_session="{TOKEN}"',  # quoted
    'drupe_session="a\\"b"',
    f"drupe_session = {TOKEN}",  # spaces around '='
    f"foo/bar=1; drupe_session={TOKEN}",  # a key Morsel refuses: the whole header is refused
    f"foo bar; drupe_session={TOKEN}",  # a key without a value: refused
    f"bad,comma=1; drupe_session={TOKEN}",
    f"x=1,2; drupe_session={TOKEN}",
    f"ünï=1; drupe_session={TOKEN}",
    f"drupe_session={TOKEN}\t; x=1",
    f"drupe_session={TOKEN}\t",
    f"\tdrupe_session={TOKEN}\r\n",
    f"drupe_session={TOKEN}; ; x=1",
    f"Drupe_Session={TOKEN}",  # names are case-sensitive
    f"drupe_session={TOKEN}%3D; x=%22q%22",
    f"expires=Wed, 21 Oct 2026 07:28:00 GMT; drupe_session={TOKEN}",
    f"drupe_session={TOKEN}; expires=Wed, 21 Oct 2026 07:28:00 GMT",
]


def test_the_attribute_names_are_morsels() -> None:
    assert frozenset(Morsel._reserved) == _RESERVED  # type: ignore[attr-defined]


@pytest.mark.parametrize("raw", CORPUS)
def test_a_header_reads_as_simplecookie_reads_it(raw: str) -> None:
    assert _ours(raw) == _reference(raw)


def test_the_plain_headers_find_the_session() -> None:
    """Not a vacuous comparison: the plain headers do present the session."""
    assert _ours(CORPUS[0]) == TOKEN
    assert _ours(CORPUS[3]) == TOKEN
    assert _ours(CORPUS[4]) == TOKEN
    assert _ours("drupe_session=") is None
    assert _ours(f"path=/; drupe_session={TOKEN}") is None


def test_generated_headers_read_as_simplecookie_reads_them() -> None:
    """~9,500 headers assembled from pieces of every kind, in every order (seeded)."""
    pieces = [
        f"drupe_session={TOKEN}",
        "drupe_session=second",
        "drupe_session=",
        "theme=dark",
        "a=b=c",
        "Path=/",
        "secure",
        "$Version=1",
        '"q"=1',
        'x="y z"',
        "k/v=1",
        "n v",
        "x=1,2",
        "e=%41",
        "",
        " ",
    ]
    separators = ["; ", ";", " ; ", ";  ", ", ", " ", "\t"]
    rng = random.Random(20)
    headers = {
        sep.join(combo)
        for size in (1, 2, 3)
        for combo in itertools.permutations(pieces, size)
        for sep in separators[:2]
    }
    for _ in range(3_000):
        count = rng.randint(1, 5)
        parts = [rng.choice(pieces) for _ in range(count)]
        raw = "".join(part + rng.choice(separators) for part in parts)
        headers.add(raw if rng.random() < 0.5 else raw.rstrip())
    found = 0
    for raw in sorted(headers):
        expected = _reference(raw)
        assert _ours(raw) == expected, raw
        found += expected is not None
    assert found > 500  # both outcomes are well represented
    assert len(headers) - found > 500
