"""Typed AMQP values: the wire types the hub requires (a short owner level, a long group id).

Part of the adapter :mod:`airflow_provider_eh.client.sdk_internals`: the rest of the package calls these
names from there, never from this module.
"""

from __future__ import annotations

from typing import Any

# ---- typed AMQP values (fencing.py, wire.py) -----------------------------------------------------


def typed_value_keys() -> tuple[Any, Any]:
    """``(TYPE, VALUE)``: the keys of a pre-typed value for the SDK's encoder; ``ImportError`` on another transport.

    Private: the SDK's encoder guesses an untyped value's AMQP type; the hub wants a short, an int and
    a long where Python has one ``int``, and guessing costs more per event than the rest of it.
    """
    from azure.eventhub._pyamqp._encode import TYPE, VALUE

    return TYPE, VALUE


def amqp_type(name: str) -> Any:
    """The SDK's AMQP type ``name`` (``"long"``, ``"short"``, ``"int"``, ``"symbol"``, ``"string"``)."""
    from azure.eventhub._pyamqp.types import AMQPTypes  # private: the type names of typed values

    return getattr(AMQPTypes, name)


def typed(name: str, value: Any) -> dict[Any, Any]:
    """``value`` typed as the AMQP type ``name`` for the SDK's encoder."""
    key_type, key_value = typed_value_keys()
    return {key_type: amqp_type(name), key_value: value}


def encode_value(out: bytearray, value: Any) -> None:
    """Append ``value``'s AMQP encoding, by the SDK's own encoder (private: the reference our bytes are proven against)."""
    from azure.eventhub._pyamqp._encode import encode_value as encode

    encode(out, value)
