"""``SecretBox``: secrets kept in the database (a stored provider's API key), sealed at rest.

Contract:

* ``seal(plain)`` returns ``"fernet:" + token``: Fernet from ``cryptography`` (AES-128-CBC and
  HMAC-SHA256 over a random IV and a timestamp), so the same key sealed twice differs and a
  changed byte is refused. ``open(stored)`` returns the plain text. A stored value without the
  prefix was written before sealing existed: it opens as itself (``is_sealed`` tells them apart,
  and the runtime seals such values when it starts).
* The key comes from ``DRUPE_SECRET_KEY`` when it is set (a Fernet key, or any random string of
  at least 32 characters, stretched with HKDF-SHA256), else from the file ``secret.key`` in the
  data dir, created on first use with mode 0600. Nodes of a cluster on different hosts need the
  same ``DRUPE_SECRET_KEY`` (``docs/deploy.md``).
* Rotation: ``open`` also accepts the *previous* keys, ``DRUPE_SECRET_KEY_PREVIOUS`` (comma-
  separated, each in the same two forms) and, when ``DRUPE_SECRET_KEY`` is set, the data dir's
  ``secret.key`` if there is one (read, never made: moving from the file to the variable is a
  rotation too). ``seal`` always uses the current key. ``reseal(stored)`` is the value to store
  instead: sealed under the current key, or None when it already is; the runtime re-seals every
  stored secret when it starts, so after one start the previous keys can be dropped.
* The key is read on first use, not when the box is made, so a process that never seals or
  opens a secret reads and creates nothing.
* A value sealed under none of the keys raises ``SecretUnreadable``; its message names where
  this process's key came from and what to do, never the value or the key.
* Nothing here logs; neither the key nor a secret appears in a ``repr``.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from drupe.errors import ConfigError, PersistenceError
from drupe.settings_env import read_environment

if TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet

__all__ = ["KEY_FILE", "PREFIX", "SecretBox", "SecretUnreadable", "is_sealed"]

PREFIX: Final = "fernet:"
KEY_FILE: Final = "secret.key"
_MIN_PASSPHRASE: Final = 32
_HKDF_INFO: Final = b"drupe secret box v1"


class SecretUnreadable(PersistenceError):
    """A stored secret was sealed under another key."""


def is_sealed(stored: str) -> bool:
    """Whether a stored value was sealed (else it predates sealing and is plain text)."""
    return stored.startswith(PREFIX)


def _fernet_key(secret: str, variable: str = "DRUPE_SECRET_KEY") -> bytes:
    """A Fernet key from ``DRUPE_SECRET_KEY``: itself when it is one, else derived."""
    raw = secret.strip().encode()
    try:
        if len(base64.urlsafe_b64decode(raw)) == 32:
            return raw
    except (binascii.Error, ValueError):
        pass
    if len(secret.strip()) < _MIN_PASSPHRASE:
        raise ConfigError(
            f"{variable} must be a Fernet key or a random string of at least "
            f'{_MIN_PASSPHRASE} characters; make one with: python -c "from cryptography.fernet '
            'import Fernet; print(Fernet.generate_key().decode())"'
        )
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.kdf.hkdf import HKDF

    derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_HKDF_INFO).derive(raw)
    return base64.urlsafe_b64encode(derived)


def _file_key(path: Path) -> bytes:
    """The key in ``path``, made (mode 0600, never overwritten) when there is none."""
    try:
        return path.read_bytes().strip()
    except FileNotFoundError:
        pass
    from cryptography.fernet import Fernet

    path.parent.mkdir(parents=True, exist_ok=True)
    key = Fernet.generate_key()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first: use theirs
        return path.read_bytes().strip()
    with os.fdopen(descriptor, "wb") as file:
        file.write(key + b"\n")
    return key


class SecretBox:
    """Seals and opens secrets with the process's key; see the module docstring."""

    __slots__ = ("_all", "_data_dir", "_fernet", "_previous", "_source")

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._fernet: Fernet | None = None
        self._all: MultiFernet | None = None
        self._previous: tuple[str, ...] = ()
        self._source = ""

    def __repr__(self) -> str:
        return f"SecretBox({self._data_dir})"

    def _box(self) -> Fernet:
        from cryptography.fernet import Fernet  # imported on first use: not on the boot path

        if self._fernet is None:
            from cryptography.fernet import MultiFernet

            environment = read_environment()
            path = self._data_dir / KEY_FILE
            previous = [
                Fernet(_fernet_key(item, "each of DRUPE_SECRET_KEY_PREVIOUS"))
                for item in (environment.SECRET_KEY_PREVIOUS or "").split(",")
                if item.strip()
            ]
            sources = ["DRUPE_SECRET_KEY_PREVIOUS"] * len(previous)
            if environment.SECRET_KEY:
                current, source = Fernet(_fernet_key(environment.SECRET_KEY)), "DRUPE_SECRET_KEY"
                try:  # the key file of before the variable: a previous key, never made here
                    previous.append(Fernet(path.read_bytes().strip()))
                    sources.append(str(path))
                except FileNotFoundError:
                    pass
                except (OSError, ValueError) as err:
                    raise PersistenceError(f"cannot use the secret key file {path}: {err}") from err
            else:
                try:
                    current, source = Fernet(_file_key(path)), str(path)
                except (OSError, ValueError) as err:
                    raise PersistenceError(f"cannot use the secret key file {path}: {err}") from err
            self._all = MultiFernet([current, *previous])
            self._previous = tuple(dict.fromkeys(sources))
            self._fernet, self._source = current, source
        return self._fernet

    @property
    def source(self) -> str:
        """Where the key came from (``DRUPE_SECRET_KEY`` or the key file's path)."""
        self._box()
        return self._source

    @property
    def previous_keys(self) -> tuple[str, ...]:
        """Where the previous keys ``open`` accepts come from (``DRUPE_SECRET_KEY_PREVIOUS``,
        the key file's path); empty without any."""
        self._box()
        return self._previous

    def seal(self, plain: str) -> str:
        return PREFIX + self._box().encrypt(plain.encode()).decode()

    def open(self, stored: str) -> str:
        if not is_sealed(stored):
            return stored
        from cryptography.fernet import InvalidToken

        self._box()
        assert self._all is not None
        try:
            return self._all.decrypt(stored[len(PREFIX) :].encode()).decode()
        except InvalidToken:
            raise self._unreadable() from None

    def reseal(self, stored: str) -> str | None:
        """``stored`` sealed under the current key, or None when it already is (a plain value
        is sealed); raises ``SecretUnreadable`` when none of the keys opens it."""
        if not is_sealed(stored):
            return self.seal(stored)
        from cryptography.fernet import InvalidToken

        token = stored[len(PREFIX) :].encode()
        try:
            self._box().decrypt(token)
            return None
        except InvalidToken:
            pass
        assert self._all is not None
        try:
            return PREFIX + self._all.rotate(token).decode()
        except InvalidToken:
            raise self._unreadable() from None

    def _unreadable(self) -> SecretUnreadable:
        also = " or a previous key" if self._previous else ""
        return SecretUnreadable(
            f"a stored secret was sealed with another key than this process's "
            f"({self._source}){also}: give every node the same DRUPE_SECRET_KEY (a rotated "
            "key's old value goes in DRUPE_SECRET_KEY_PREVIOUS), or enter the secret again"
        )
