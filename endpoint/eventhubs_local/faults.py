"""Faults injected at run time through the admin endpoint, optionally scoped to one hub.

Kinds (parameters):

* ``drop_after`` (``transfers``: int) -- close the client's TCP connection abruptly once that many
  more event transfers have been received (the last one is stored, never acknowledged).
* ``store_no_ack`` -- store events but never acknowledge them: the client times out although the
  event landed.
* ``server_busy`` -- reject transfers with ``com.microsoft:server-busy`` without storing them.
* ``delay_ack`` (``ms``: int) -- acknowledge stored events only after that delay.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

KINDS = ("drop_after", "store_no_ack", "server_busy", "delay_ack")


class FaultError(ValueError):
    """A fault request that names an unknown kind or bad parameters."""


@dataclass
class Fault:
    """One active fault: its kind, the hub it is scoped to (None: every hub) and how often it fired."""

    kind: str
    hub: str | None
    params: dict[str, Any] = field(default_factory=dict)
    remaining: int = 0
    triggered: int = 0

    def applies_to(self, hub: str) -> bool:
        return self.hub is None or self.hub.lower() == hub.lower()

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"kind": self.kind, "hub": self.hub, "params": self.params, "triggered": self.triggered}
        if self.kind == "drop_after":
            out["remaining"] = self.remaining
        return out


class Faults:
    """The active faults; at most one of each kind per scope (setting again replaces it)."""

    def __init__(self) -> None:
        self.active: list[Fault] = []

    def set(self, kind: str, hub: str | None = None, **params: Any) -> Fault:
        if kind not in KINDS:
            raise FaultError(f"unknown fault kind {kind!r}; known kinds: {', '.join(KINDS)}")
        fault = Fault(kind, hub, dict(params))
        if kind == "drop_after":
            transfers = params.get("transfers", params.get("n"))
            if not isinstance(transfers, int) or transfers < 1:
                raise FaultError("drop_after needs an integer parameter 'transfers' >= 1")
            fault.remaining = transfers
        elif kind == "delay_ack":
            ms = params.get("ms")
            if not isinstance(ms, (int, float)) or ms < 0:
                raise FaultError("delay_ack needs a number parameter 'ms' >= 0")
        self.active = [f for f in self.active if not (f.kind == kind and f.hub == hub)]
        self.active.append(fault)
        return fault

    def clear(self, kind: str | None = None, hub: str | None = None) -> None:
        self.active = [f for f in self.active if not ((kind is None or f.kind == kind) and (hub is None or f.hub == hub))]

    def forget_hub(self, hub: str) -> None:
        """Drop the faults scoped to ``hub`` (it was deleted; a new hub of that name starts without them)."""
        self.active = [f for f in self.active if f.hub is None or f.hub.lower() != hub.lower()]

    def find(self, kind: str, hub: str) -> Fault | None:
        for fault in self.active:
            if fault.kind == kind and fault.applies_to(hub):
                return fault
        return None

    def describe(self) -> list[dict[str, Any]]:
        return [f.describe() for f in self.active]
