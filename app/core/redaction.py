"""Secrets out of log text: API keys, webhook secrets, bearer credentials, URL credentials and the configured
secret values."""

import re
from collections.abc import Iterable
from dataclasses import dataclass

from app.core.config import Settings
from app.core.masking import mask_urls
from app.core.secret_box import keys_of

REDACTED = "[redacted]"
MIN_LITERAL = 8  # a configured value shorter than this would redact ordinary words
_CHAR = r"[^\s\"'`,;)\]}]"  # what a credential may hold: up to a space, quote or bracket

# (pattern, what to keep of the match): the name of a header stays, so a reader still sees what was sent.
PATTERNS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?i)(\bauthorization[\"']?\s*[:=]\s*[\"']?)(?:(?:bearer|basic|token)\s+)?" + _CHAR + "+"), r"\1"),
    (re.compile(r"(?i)(\bbearer\s+)" + _CHAR + "{8,}"), r"\1"),  # not "a bearer of news"
    (re.compile(r"\btq_[A-Za-z0-9_\-]{16,}"), ""),  # API keys (services/api_keys.KEY_PREFIX)
    (re.compile(r"\bwhsec_[A-Za-z0-9+/=_\-]{8,}"), ""),  # webhook secrets (core/signing.PREFIX)
)


@dataclass(frozen=True)
class Redactor:
    """Replaces every secret it knows of in a text with `[redacted]`, and URL credentials with `***`."""

    literals: tuple[str, ...] = ()

    @classmethod
    def of(cls, values: Iterable[str | None]) -> "Redactor":
        """A redactor that also knows these values (the longest first, so none is left half-replaced)."""
        kept = {value for value in values if value and len(value) >= MIN_LITERAL}
        return cls(tuple(sorted(kept, key=len, reverse=True)))

    @classmethod
    def for_settings(cls, settings: Settings) -> "Redactor":
        key = settings.secret_encryption_key
        return cls.of((key, *keys_of(key), settings.admin_api_key))

    def __call__(self, text: str) -> str:
        text = mask_urls(text)
        for literal in self.literals:
            text = text.replace(literal, REDACTED)
        for pattern, kept in PATTERNS:
            text = pattern.sub(kept + REDACTED, text)
        return text
