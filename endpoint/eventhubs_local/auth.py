r"""Validation of Azure SAS tokens put on ``$cbs`` when the server runs with ``--require-auth``.

A token is ``SharedAccessSignature sr=<url-encoded audience>&sig=<base64 HMAC-SHA256>&se=<expiry>&skn=<key name>``;
the signature covers ``url-encoded audience + "\n" + expiry`` with the shared access key.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from urllib.parse import parse_qs, quote_plus, urlparse


class AuthError(Exception):
    """A token that does not grant access; the message says why."""


def sign(audience: str, key_name: str, key: str, expiry: int) -> str:
    """A SAS token, as the SDK builds it (for tests and tools)."""
    encoded = quote_plus(audience)
    signature = base64.b64encode(hmac.new(key.encode(), f"{encoded}\n{expiry}".encode(), hashlib.sha256).digest())
    from urllib.parse import urlencode

    return "SharedAccessSignature " + urlencode({"sr": audience, "sig": signature, "se": str(expiry), "skn": key_name})


def audience_hub(audience: str) -> str:
    """The hub an audience (``sb://host/hub[/consumergroups/cg]``) is for, lower case."""
    parsed = urlparse(audience if "://" in audience else "sb://" + audience)
    path = parsed.path.strip("/")
    return path.split("/", 1)[0].lower() if path else ""


class SasValidator:
    """Checks tokens against one key name and key."""

    def __init__(self, key_name: str, key: str):
        self.key_name = key_name
        self.key = key

    def validate(self, token: str, audience: str, now: float | None = None) -> str:
        """Return the hub the token grants (lower case) or raise ``AuthError``."""
        if not token.startswith("SharedAccessSignature "):
            raise AuthError("token is not a SharedAccessSignature")
        fields = {k: v[0] for k, v in parse_qs(token[len("SharedAccessSignature "):], keep_blank_values=True).items()}
        for required in ("sr", "sig", "se"):
            if required not in fields:
                raise AuthError(f"token lacks '{required}'")
        if fields.get("skn") != self.key_name:
            raise AuthError(f"token is signed with key name {fields.get('skn')!r}, expected {self.key_name!r}")
        try:
            expiry = int(fields["se"])
        except ValueError:
            raise AuthError(f"token expiry {fields['se']!r} is not an integer") from None
        if expiry < (now if now is not None else time.time()):
            raise AuthError("token has expired")
        expected = base64.b64encode(
            hmac.new(self.key.encode(), f"{quote_plus(fields['sr'])}\n{expiry}".encode(), hashlib.sha256).digest()
        ).decode()
        if not hmac.compare_digest(expected, fields["sig"]):
            raise AuthError("token signature does not match the shared access key")
        token_hub = audience_hub(fields["sr"])
        requested_hub = audience_hub(audience)
        if not token_hub or token_hub != requested_hub:
            raise AuthError(f"token is for {fields['sr']!r}, not for hub {requested_hub!r}")
        return token_hub
