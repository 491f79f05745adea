"""What a client or a log sees of a credential: `***` (CONTRACT "Secrets in payloads", DESIGN.md rule 21)."""

import re

MASK = "***"

# A URL's user info (`user:password@`), up to the `@` that ends it within the authority.
_USER_INFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s@\"'<>]*@")
# A query parameter named like a credential: token, key, secret, password or signature, alone or as the end of
# a longer name (access_token, api_key, client_secret, X-Amz-Signature), whatever its case.
_CREDENTIAL_PARAM = re.compile(r"(?i)([?&;](?:[\w.\-]*[_\-])?(?:token|key|secret|password|signature)=)[^&;#\s\"'<>]*")


def mask_urls(text: str) -> str:
    """`text` with every URL's user info and the values of its credential-like query parameters written `***`."""
    if "://" not in text and "=" not in text:
        return text
    text = _USER_INFO.sub(r"\1" + MASK + "@", text)
    return _CREDENTIAL_PARAM.sub(r"\1" + MASK, text)
