"""Reading an error: its whole chain (``__cause__``, ``__context__``, the AMQP error inside an ``EventHubError``, the
socket error inside an aiohttp or urllib3 one), its kinds, condition, status and the resolver's or TLS's reason.

What an error's class says is read by type, in the SDK adapter (:func:`error_kinds`: ``isinstance`` against the
classes it knows). Text is read only where the SDKs give nothing else: the proxy's CONNECT status that
websocket-client and urllib3 put in their message only, the service's words in an AMQP description (the
status code of a management answer, a missing claim), and an executor's report, which crosses processes as a
class's name and a message.
"""

from __future__ import annotations

import re
import socket
import ssl
from dataclasses import dataclass, replace

from airflow_provider_eh.client.sdk_internals import ErrorKind, amqp_condition, error_kinds, kinds_named

# text only: websocket-client ("failed CONNECT via proxy status: 407") and urllib3 ("Tunnel connection failed: 403")
_PROXY_STATUS = re.compile(r"(?:CONNECT via proxy status:|Tunnel connection failed:|proxy status:?)\s*(\d{3})", re.I)
# text only: the status of an AMQP management answer is in the description the SDK words
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


def _status(item: BaseException) -> int | None:
    for name in ("status_code", "status"):
        value = getattr(item, name, None)
        if isinstance(value, int) and 100 <= value < 600:
            return value
    return None


# text only, for an executor's report: the resolver's and TLS's words as Python and OpenSSL write them
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
    :param kinds: what the classes of the chain say (:class:`ErrorKind`).
    :param said: the innermost error's message, on one line (what the Schema Registry's messages repeat).
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
    kinds: frozenset[ErrorKind]
    said: str = ""

    @classmethod
    def of(cls, exc: BaseException) -> _Reading:
        chain = _chain(exc)
        kinds = [error_kinds(item) for item in chain]
        proxy_status = next((_status(i) for i, k in zip(chain, kinds, strict=True) if ErrorKind.PROXY_ANSWER in k), None)
        statuses = [s for s in (_status(i) for i in chain) if s]
        gai = next((i for i in chain if isinstance(i, socket.gaierror)), None)
        tls = next((i for i in chain if isinstance(i, ssl.SSLError)), None)
        reading = cls.of_text(
            "\n".join(str(item) for item in chain), frozenset().union(*kinds), status=statuses[0] if statuses else None,
            conditions=frozenset(c for c in (amqp_condition(i) for i in chain) if c), proxy_status=proxy_status,
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
        innermost = exc
        while innermost.__cause__ is not None:
            innermost = innermost.__cause__
        facts["said"] = _one_line(str(getattr(innermost, "message", None) or innermost))
        return replace(reading, **facts)  # type: ignore[arg-type]

    @classmethod
    def of_report(cls, error_type: str, message: str) -> _Reading:
        """The facts an executor's report says: its error's class's name and first line, all it carries."""
        reading = replace(cls.of_text(message, kinds_named([error_type])), said=_one_line(message))
        if error_type == "gaierror" and reading.dns is None:
            reading = replace(reading, dns="the name does not resolve")
        return replace(reading, refused=True) if error_type == "ConnectionRefusedError" else reading

    @classmethod
    def of_text(cls, text: str, kinds: frozenset[ErrorKind], *, status: int | None = None,
                conditions: frozenset[str] = frozenset(), proxy_status: int | None = None) -> _Reading:
        """The facts a text says beside what ``kinds`` say (text only where the SDKs give nothing else)."""
        match = _PROXY_STATUS.search(text)
        if proxy_status is None and match:
            proxy_status = int(match.group(1))
        dns_match = _DNS_TEXT.search(text)
        dns = dns_match.group(0) if dns_match else None
        tls_match = _TLS_TEXT.search(text)
        verify = "CERTIFICATE_VERIFY_FAILED" in text or "certificate verify failed" in text
        reason = _VERIFY_MESSAGE.search(text)
        tls = (reason.group(1).strip() if reason else tls_match.group(0)) if tls_match else None
        code = _STATUS_CODE.search(text)
        return cls(
            proxy_status=proxy_status, dns=dns, dns_temporary=bool(dns and "Temporary failure" in dns),
            tls=tls, tls_verify=verify, refused="Connection refused" in text,
            conditions=conditions, status=status or (int(code.group(1)) if code else None), text=text, kinds=kinds,
        )

    def condition(self, *spellings: str) -> bool:
        """True when an AMQP condition, or the service's words, say one of ``spellings`` (``not-found``, ...)."""
        found = " ".join(self.conditions) + "\n" + self.text
        return any(s.lower() in found.lower() for s in spellings)

    def has(self, *kinds: ErrorKind) -> bool:
        """Whether an error of the chain is of one of ``kinds``."""
        return not self.kinds.isdisjoint(kinds)


def _one_line(text: str) -> str:
    return " ".join(text.split())[:400]


def is_storage_error(exc: BaseException) -> bool:
    """Whether ``exc`` came from blob storage (an Azure Core error) rather than from the hub (the Event Hubs SDK's)."""
    kinds = error_kinds(exc)
    return ErrorKind.AZURE_CORE in kinds and ErrorKind.EVENT_HUBS not in kinds


def _is_service_failure(exc: BaseException) -> bool:
    """True for what the map reads: the SDKs' errors and the network's, not a bug or bad input of ours."""
    if isinstance(exc, (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)):
        return False  # a local file (a CA bundle that is not there), not the network
    return ErrorKind.SERVICE in error_kinds(exc)
