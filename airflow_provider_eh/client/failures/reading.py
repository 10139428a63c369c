"""Reading an error: its whole chain (``__cause__``, ``__context__``, the AMQP error inside an ``EventHubError``, the
socket error inside an aiohttp or urllib3 one), its classes, condition, status and the resolver's or TLS's reason.
"""

from __future__ import annotations

import re
import socket
import ssl
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    pass

_PROXY_STATUS = re.compile(r"(?:CONNECT via proxy status:|Tunnel connection failed:|proxy status:?)\s*(\d{3})", re.I)
_STATUS_CODE = re.compile(r"Status code:?\s*(\d{3})", re.I)
_CHAIN_ATTRIBUTES = ("__cause__", "__context__", "inner_error", "inner_exception", "os_error", "certificate_error",
                     "reason", "error")


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and every exception it carries, outermost first, each once."""
    seen: dict[int, BaseException] = {}
    todo = [exc]
    while todo:
        item = todo.pop(0)
        if id(item) in seen:
            continue
        seen[id(item)] = item
        for name in _CHAIN_ATTRIBUTES:
            inner = getattr(item, name, None)
            if isinstance(inner, BaseException):
                todo.append(inner)
        todo.extend(arg for arg in getattr(item, "args", ()) if isinstance(arg, BaseException))
    return list(seen.values())


def _names(chain: list[BaseException]) -> set[str]:
    return {cls.__name__ for item in chain for cls in type(item).__mro__}


def _condition(item: BaseException) -> str:
    """An AMQP error's condition as the wire spells it (``amqp:not-found``), or ``""``."""
    condition = getattr(item, "condition", None)
    if condition is None:
        return ""
    value = getattr(condition, "value", condition)
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _status(item: BaseException) -> int | None:
    for name in ("status_code", "status"):
        value = getattr(item, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    return None


_DNS_TEXT = re.compile(r"Name or service not known|nodename nor servname|No address associated|"
                       r"Temporary failure in name resolution|getaddrinfo failed")
_TLS_TEXT = re.compile(r"CERTIFICATE_VERIFY_FAILED|WRONG_VERSION_NUMBER|certificate verify failed|SSLError|"
                       r"record layer failure|UNEXPECTED_EOF_WHILE_READING|TLSV1_ALERT")
_VERIFY_MESSAGE = re.compile(r"certificate verify failed: ([^(\n]+?)\s*(?:\(_ssl|$|\n)", re.M)


@dataclass(frozen=True)
class _Reading:
    """What an error's chain (or a reported error's type and text) says, in the few facts the map needs.

    :param dns: why a name did not resolve (``None``: no resolution failure); ``dns_temporary``: the resolver
        did not answer (``EAI_AGAIN``), the name may be right.
    :param tls: why TLS failed (``None``: no TLS failure); ``tls_verify``: the certificate did not verify.
    """

    proxy_status: int | None
    dns: str | None
    dns_temporary: bool
    tls: str | None
    tls_verify: bool
    refused: bool
    conditions: frozenset[str]
    status: int | None
    text: str
    names: frozenset[str]

    @classmethod
    def of(cls, exc: BaseException) -> _Reading:
        chain = _chain(exc)
        proxy_status = next((_status(i) for i in chain if type(i).__name__ == "ClientHttpProxyError"), None)
        statuses = [s for s in (_status(i) for i in chain) if s]
        gai = next((i for i in chain if isinstance(i, socket.gaierror)), None)
        tls = next((i for i in chain if isinstance(i, ssl.SSLError)), None)
        reading = cls.of_text(
            "\n".join(str(item) for item in chain), _names(chain), status=statuses[0] if statuses else None,
            conditions=frozenset(c for c in (_condition(i) for i in chain) if c), proxy_status=proxy_status,
        )
        facts: dict[str, object] = {}
        if gai is not None:
            facts.update(dns=gai.strerror or "the name does not resolve", dns_temporary=gai.errno == socket.EAI_AGAIN)
        if tls is not None:
            verify = isinstance(tls, ssl.SSLCertVerificationError)
            facts.update(tls_verify=verify or reading.tls_verify,
                         tls=(getattr(tls, "verify_message", None) if verify else getattr(tls, "reason", None))
                         or reading.tls or type(tls).__name__)
        if any(isinstance(i, ConnectionRefusedError) for i in chain):
            facts["refused"] = True
        return replace(reading, **facts)  # type: ignore[arg-type]

    @classmethod
    def of_text(cls, text: str, names: set[str], *, status: int | None = None,
                conditions: frozenset[str] = frozenset(), proxy_status: int | None = None) -> _Reading:
        """The facts a text says (an executor's report carries the error's type name and first line only)."""
        match = _PROXY_STATUS.search(text)
        if proxy_status is None and match:
            proxy_status = int(match.group(1))
        dns_match = _DNS_TEXT.search(text)
        dns = dns_match.group(0) if dns_match else ("the name does not resolve" if "gaierror" in names else None)
        tls_match = _TLS_TEXT.search(text)
        verify = "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text
        reason = _VERIFY_MESSAGE.search(text)
        tls = (reason.group(1).strip() if reason else tls_match.group(0)) if tls_match else None
        code = _STATUS_CODE.search(text)
        return cls(
            proxy_status=proxy_status, dns=dns, dns_temporary=bool(dns and "Temporary failure" in dns),
            tls=tls, tls_verify=verify, refused="Connection refused" in text or "ConnectionRefusedError" in names,
            conditions=conditions, status=status or (int(code.group(1)) if code else None), text=text,
            names=frozenset(names),
        )

    def condition(self, *spellings: str) -> bool:
        """True when an AMQP condition, or the text, says one of ``spellings`` (``not-found``, ``NotFound``, ...)."""
        found = " ".join(self.conditions) + "\n" + self.text
        return any(s.lower() in found.lower() for s in spellings)

    def any_of(self, *names: str) -> bool:
        return bool(self.names.intersection(names))


_FAMILIES = ("EventHubError", "AMQPException", "AzureError", "WebSocketException", "ClientError", "HTTPError",
             "RequestException", "ProxyError", "OperationTimeoutError")


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from blob storage (an Azure Core error) rather than from the hub (the Event Hubs SDK's)."""
    names = {cls.__name__ for cls in type(exc).__mro__}
    return "AzureError" in names and "EventHubError" not in names


def _is_service_failure(exc: BaseException) -> bool:
    """True for what the map reads: the SDKs' errors and the network's, not a bug or bad input of ours."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False  # a local file (a CA bundle that is not there), not the network
    if isinstance(exc, (OSError, TimeoutError)):
        return True
    return bool({cls.__name__ for cls in type(exc).__mro__}.intersection(_FAMILIES))


