r"""Validation of Azure SAS tokens put on ``$cbs`` when the server runs with ``--require-auth``.

A token is ``SharedAccessSignature sr=<url-encoded audience>&sig=<base64 HMAC-SHA256>&se=<expiry>&skn=<key name>``;
the signature covers ``url-encoded audience + "\n" + expiry`` with the shared access key.

Keys are the namespace's shared access authorization rules: a name, a key and its rights (``Send``,
``Listen``, ``Manage``; ``Manage`` implies the other two). The main key has every right; further rules
(``--sas-rule NAME=KEY:Listen``) may have fewer. A valid token is accepted on ``$cbs`` whatever its
rights, as the service does; a link that needs a right the token lacks is refused at attach
(``entities.hub_for``).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import parse_qs, quote_plus, urlparse

SEND, LISTEN, MANAGE = "Send", "Listen", "Manage"
RIGHTS = (SEND, LISTEN, MANAGE)
ALL_RIGHTS = frozenset(RIGHTS)


class AuthError(Exception):
    """A token that does not grant access; the message says why."""


@dataclass(frozen=True)
class Grant:
    """What a valid token opens: one hub (lower case) with the rights of the rule that signed it."""

    hub: str
    rights: frozenset[str]


def parse_rights(names: str | Iterable[str]) -> frozenset[str]:
    """Rights from a comma list or names (any case); ``Manage`` brings ``Send`` and ``Listen`` with it.

    Raises ``ValueError`` naming an unknown right, or when none is given.
    """
    items = names.split(",") if isinstance(names, str) else list(names)
    rights: set[str] = set()
    for item in items:
        name = item.strip()
        match = next((r for r in RIGHTS if r.lower() == name.lower()), None)
        if match is None:
            raise ValueError(f"unknown right {name!r}: use {', '.join(RIGHTS)}")
        rights.add(match)
    if not rights:
        raise ValueError(f"a rule needs at least one right of {', '.join(RIGHTS)}")
    return ALL_RIGHTS if MANAGE in rights else frozenset(rights)


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
    """Checks tokens against the main key name and key (every right) and further ``rules``.

    :param rules: key name -> (key, rights) of further authorization rules; rights as ``parse_rights`` reads them.
    """

    def __init__(self, key_name: str, key: str, rules: Mapping[str, tuple[str, Iterable[str]]] | None = None):
        self.key_name = key_name
        self.key = key
        self.rules: dict[str, tuple[str, frozenset[str]]] = {key_name: (key, ALL_RIGHTS)}
        for name, (rule_key, rights) in (rules or {}).items():
            if name == key_name:
                raise ValueError(f"rule {name!r} has the name of the main key, which has every right")
            self.rules[name] = (rule_key, parse_rights(rights))

    def validate(self, token: str, audience: str, now: float | None = None) -> str:
        """Return the hub the token grants (lower case) or raise ``AuthError``."""
        return self.grant(token, audience, now).hub

    def grant(self, token: str, audience: str, now: float | None = None) -> Grant:
        """The hub (lower case) and rights a valid token for ``audience`` grants, or ``AuthError``."""
        fields, rights = self._verified(token, now)
        token_hub = audience_hub(fields["sr"])
        requested_hub = audience_hub(audience)
        if not token_hub or token_hub != requested_hub:
            raise AuthError(f"token is for {fields['sr']!r}, not for hub {requested_hub!r}")
        return Grant(token_hub, rights)

    def namespace_rights(self, token: str, now: float | None = None) -> frozenset[str]:
        """The rights a valid token for the whole namespace grants (the Schema Registry's), or ``AuthError``.

        Its ``sr`` must be the namespace (``https://host/`` or ``sb://host/``), optionally with the path
        ``$schemagroups``: a token for one hub opens only that hub.
        """
        fields, rights = self._verified(token, now)
        scope = audience_hub(fields["sr"])
        if scope not in ("", "$schemagroups"):
            raise AuthError(f"token is for {fields['sr']!r}, not for the namespace (sr=https://<namespace>/)")
        return rights

    def _verified(self, token: str, now: float | None) -> tuple[dict[str, str], frozenset[str]]:
        """A token's fields and its rule's rights, once its key, expiry and signature are checked."""
        if not token.startswith("SharedAccessSignature "):
            raise AuthError("token is not a SharedAccessSignature")
        fields = {k: v[0] for k, v in parse_qs(token[len("SharedAccessSignature "):], keep_blank_values=True).items()}
        for required in ("sr", "sig", "se"):
            if required not in fields:
                raise AuthError(f"token lacks '{required}'")
        rule = self.rules.get(fields.get("skn", ""))
        if rule is None:
            expected = " or ".join(repr(name) for name in self.rules)
            raise AuthError(f"token is signed with key name {fields.get('skn')!r}, expected {expected}")
        key, rights = rule
        try:
            expiry = int(fields["se"])
        except ValueError:
            raise AuthError(f"token expiry {fields['se']!r} is not an integer") from None
        if expiry < (now if now is not None else time.time()):
            raise AuthError("token has expired")
        expected_sig = base64.b64encode(
            hmac.new(key.encode(), f"{quote_plus(fields['sr'])}\n{expiry}".encode(), hashlib.sha256).digest()
        ).decode()
        if not hmac.compare_digest(expected_sig, fields["sig"]):
            raise AuthError("token signature does not match the shared access key")
        return fields, rights
