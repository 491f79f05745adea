"""Secrets at rest (webhook secrets, a notification's credentials): encrypted with SECRET_ENCRYPTION_KEY (Fernet),
readable again only to use them.

The setting may list several keys, comma-separated: the first seals, every one opens (MultiFernet), so a key is
rotated by putting the new one first, running `python -m app rotate-secrets`, then dropping the old one."""

import base64
import hashlib
from collections import OrderedDict

from cryptography.fernet import Fernet, InvalidToken, MultiFernet


class SecretsUnavailable(RuntimeError):
    """No encryption key is configured, or it is not the key the secrets were sealed with."""


OPENED_KEPT = 10_000  # opened secrets kept in memory, least recently used first out


def keys_of(setting: str | None) -> list[str]:
    """The keys SECRET_ENCRYPTION_KEY lists, the sealing one first."""
    return [key.strip() for key in (setting or "").split(",") if key.strip()]


class SecretBox:
    """Seals and opens webhook secrets. An opened secret is kept in memory under its sealed form, so signing
    an attempt costs no decryption; a rotation seals a new secret, which is opened once when first used."""

    def __init__(self, key: str | None) -> None:
        self._keys = [Fernet(_fernet_key(each)) for each in keys_of(key)]
        self._fernet = MultiFernet(self._keys) if self._keys else None
        self._opened: OrderedDict[str, str] = OrderedDict()
        self.decryptions = 0

    def _require(self) -> MultiFernet:
        if self._fernet is None:
            raise SecretsUnavailable(
                "SECRET_ENCRYPTION_KEY is not set, so webhook and notification secrets cannot be stored or read; "
                "set it (make run creates one in .env) and restart"
            )
        return self._fernet

    def reseal(self, sealed: str) -> str | None:
        """`sealed` sealed again with the first key, or None when it already is; SecretsUnavailable when no key
        opens it."""
        fernet = self._require()
        try:
            self._keys[0].decrypt(sealed.encode())
            return None
        except InvalidToken:
            pass
        try:
            return fernet.rotate(sealed.encode()).decode()
        except InvalidToken as exc:
            raise _unopenable() from exc

    def seal(self, plain: str) -> str:
        return self._require().encrypt(plain.encode()).decode()

    def open(self, sealed: str) -> str:
        plain = self._opened.get(sealed)
        if plain is not None:
            self._opened.move_to_end(sealed)
            return plain
        plain = self._decrypt(sealed)
        self._opened[sealed] = plain
        if len(self._opened) > OPENED_KEPT:
            self._opened.popitem(last=False)
        return plain

    def unseal(self, sealed: str) -> str:
        """`sealed` opened, and not kept: for a secret used once or twice (a job's), not one signing every attempt."""
        return self._decrypt(sealed)

    def _decrypt(self, sealed: str) -> str:
        self.decryptions += 1
        try:
            return self._require().decrypt(sealed.encode()).decode()
        except InvalidToken as exc:
            raise _unopenable() from exc


def _unopenable() -> SecretsUnavailable:
    return SecretsUnavailable(
        "a stored secret does not open with any key of SECRET_ENCRYPTION_KEY; was a key changed or dropped "
        "before `python -m app rotate-secrets` re-encrypted the secrets with the first one?"
    )


def _fernet_key(key: str) -> bytes:
    """A Fernet key as given, or one derived from any other passphrase."""
    try:
        if len(base64.urlsafe_b64decode(key.encode())) == 32:
            return key.encode()
    except ValueError:
        pass
    return base64.urlsafe_b64encode(hashlib.sha256(key.encode()).digest())
