"""The driver's claims, checked by senders in other processes: a hold relay and the tickets it answers.

On the Spark path the driver holds each partition's claim (a blob lease renewed in the background,
or a Variables claim token) while executors, in other processes and often on other machines, send.
A driver that stalls (a frozen VM, a long GC pause, SIGSTOP) stops renewing; its lease runs out and
another run may take the partition over, while its executors go on sending. The claim's deadline
(:class:`~airflow_provider_eh.publishing.claim.StateClaim`) lives in the driver's process, so the
executors must ask for it:

* :class:`HoldRelay` (driver): a small TCP server on the address the executors already reach the
  driver at. Asked ``"<token> <partition>"``, it checks that partition's claim exactly as the local
  sender does before each SDK batch (the deadline; the Variables backend reads its token back) and
  answers how many seconds the hold is surely still the driver's, or that it is lost.
* :class:`HoldTicket` (picklable, sent with the plans): where to ask, for which partition, with a
  secret token that only this run's executors have.
* :class:`HoldWatch` (executor): the sender's ``stop_check``. It keeps a deadline on the executor's
  own monotonic clock: the moment a question was *sent*, plus the seconds answered; it asks again
  once half of that is gone, and raises :class:`~airflow_provider_eh.errors.ProducerDisconnectedError`
  when the relay says the claim is lost, or when its deadline passes unconfirmed (a paused driver
  accepts a connection in its kernel but never answers).

No wall clocks cross machines: each side measures only its own intervals, so clocks may differ in
time of day as long as they run at about the same rate (the claim's safety margin absorbs drift).
"""

from __future__ import annotations

import hmac
import json
import logging
import secrets
import socket
import socketserver
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_eh.errors import ProducerDisconnectedError

if TYPE_CHECKING:
    from airflow_provider_eh.publishing.claim import StateClaim

log = logging.getLogger(__name__)

#: the longest an executor waits for one answer; a paused driver never answers
ASK_TIMEOUT = 5.0


@dataclass(frozen=True)
class HoldTicket:
    """What an executor needs to ask the driver about one partition's claim (pickled with the plan).

    ``repr`` leaves the token out: a ticket may reach a log line or a Spark error message.
    """

    host: str
    port: int
    partition_id: str
    token: str

    def __repr__(self) -> str:
        return f"HoldTicket(host={self.host!r}, port={self.port}, partition_id={self.partition_id!r}, token=***)"

    def watch(self) -> HoldWatch:
        return HoldWatch(self)


class HoldRelay:
    """
    Answers executors' questions about the driver's claims until closed; a context manager.

    :param host: the address to listen on and to give the executors (the driver's address as Spark's
        executors reach it: ``spark.driver.host``).
    :param port: 0 (default): any free port.
    """

    def __init__(self, host: str, port: int = 0):
        self._claims: dict[str, StateClaim] = {}
        self._lock = threading.Lock()
        self._token = secrets.token_hex(16)
        relay = self

        class Handler(socketserver.StreamRequestHandler):
            timeout = ASK_TIMEOUT

            def handle(self) -> None:
                try:
                    line = self.rfile.readline(1024).decode("utf-8", "replace").strip()
                except OSError:
                    return
                self.wfile.write((json.dumps(relay.answer(line)) + "\n").encode())

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, port), Handler)
        self.host = host
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="eh-hold-relay", daemon=True)
        self._thread.start()
        log.info("hold relay for the executors listening on %s:%d", host, self.port)

    def ticket(self, partition_id: str, claim: StateClaim) -> HoldTicket:
        """Register ``claim`` as the hold of ``partition_id`` (replacing an earlier attempt's) and return its ticket."""
        with self._lock:
            self._claims[partition_id] = claim
        return HoldTicket(self.host, self.port, partition_id, self._token)

    def tickets(self, claims: Mapping[str, StateClaim]) -> dict[str, HoldTicket]:
        return {pid: self.ticket(pid, claim) for pid, claim in claims.items()}

    def answer(self, line: str) -> dict[str, object]:
        """The answer to one question ``"<token> <partition>"``: ``{"held": seconds}`` or ``{"lost": reason}``."""
        token, _, partition = line.partition(" ")
        if not hmac.compare_digest(token.encode(), self._token.encode()):
            return {"refused": "wrong token"}
        with self._lock:
            claim = self._claims.get(partition)
        if claim is None:
            return {"lost": f"the driver holds no claim on partition {partition}"}
        try:
            claim.check()  # what the local sender does before each SDK batch
        except ProducerDisconnectedError:
            return {"lost": claim.lost_reason or "the claim was lost"}
        if claim.held_until is None:
            return {"lost": "the claim has no deadline"}
        return {"held": max(0.0, claim.held_until - time.monotonic())}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> HoldRelay:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def parse_address(text: str) -> tuple[str, int]:
    """``"host"`` or ``"host:port"`` (``"[::1]:7078"`` for IPv6) as ``(host, port)``; port 0: any free one."""
    host, port = text.strip(), ""
    if host.startswith("["):
        host, _, rest = host[1:].partition("]")
        port = rest.lstrip(":")
    elif host.count(":") == 1:
        host, port = host.split(":")
    if not host or (port and not (port.isdigit() and 0 < int(port) < 65536)):
        raise ValueError(f"hold_relay={text!r}: give a host name or address, optionally with ':port' (1 to 65535), "
                         "or True (the address executors reach the driver at), or False (no check on the executors)")
    return host, int(port or 0)


def address_towards(host: str, port: int) -> str:
    """This machine's address on the route to ``host`` (no packet is sent): what ``host`` can reach us at."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as probe:
            probe.connect((host, port))
            return str(probe.getsockname()[0])
    except OSError:
        return socket.gethostbyname(socket.gethostname())


class HoldWatch:
    """
    The executor's check of the driver's claim before each SDK batch (``__call__``); see the module.

    The first call asks and must get an answer: an executor that cannot reach the driver's relay
    does not send at all.
    """

    def __init__(self, ticket: HoldTicket):
        self.ticket = ticket
        self.held_until: float | None = None  # the executor's monotonic clock
        self._ask_after = 0.0
        self._last_problem = ""

    def _ask(self) -> dict[str, object]:
        t = self.ticket
        wait = ASK_TIMEOUT if self.held_until is None else max(0.2, min(ASK_TIMEOUT, self.held_until - time.monotonic()))
        with socket.create_connection((t.host, t.port), timeout=wait) as conn:
            conn.settimeout(wait)
            conn.sendall(f"{t.token} {t.partition_id}\n".encode())
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(4096)
                if not chunk:
                    break
                data += chunk
        return json.loads(data.decode() or "{}")

    def __call__(self) -> None:
        now = time.monotonic()
        if self.held_until is not None and now < self._ask_after:
            return
        asked = now
        try:
            answer = self._ask()
        except (OSError, ValueError) as exc:
            self._last_problem = f"{type(exc).__name__}: {exc}"
            answer = {}
        pid, where = self.ticket.partition_id, f"{self.ticket.host}:{self.ticket.port}"
        if "lost" in answer:
            raise ProducerDisconnectedError(
                f"partition {pid}: the driver no longer holds the partition ({answer['lost']}); this executor "
                "stopped before its next SDK batch. A retry recovers by read-back."
            )
        if "refused" in answer:
            raise ProducerDisconnectedError(f"partition {pid}: the driver's hold relay at {where} refused this "
                                            f"executor's ticket ({answer['refused']}); nothing more is sent.")
        if "held" in answer:
            held = float(answer["held"])  # type: ignore[arg-type]
            self.held_until = asked + held
            self._ask_after = asked + held / 2
            return
        if self.held_until is None:
            raise ProducerDisconnectedError(
                f"partition {pid}: this executor could not reach the driver's hold relay at {where} "
                f"({self._last_problem or 'no answer'}), so it cannot tell whether the driver still owns the "
                "partition and sends nothing. Executors must reach the driver at that address (spark.driver.host; "
                "with Spark Connect, the machine running the task: hold_relay='host' names the address to use), or "
                "turn the check off with hold_relay=False where the hub fences (idempotent publishing enabled)."
            )
        if now >= self.held_until:
            raise ProducerDisconnectedError(
                f"partition {pid}: the driver's hold could not be confirmed for {now - self.held_until:.1f}s past its "
                f"deadline (relay {where}: {self._last_problem or 'no answer'}): the driver may be paused or cut off, "
                "and another run may have taken the partition over. This executor stopped before its next SDK "
                "batch; a retry recovers by read-back."
            )
        # no answer yet, but the last one still holds: ask again before the next batch
