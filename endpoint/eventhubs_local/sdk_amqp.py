"""The one module of the endpoint that reaches into the SDK's private AMQP codec, ``azure.eventhub._pyamqp``.

The endpoint speaks AMQP with the codec of the SDK it serves, so that every frame it sends is one the SDK
decodes (full-length performatives, its own message formats): ``server.py``'s docstring says why. What it
takes of that codec is named here once, under public names, and nowhere else; the repository test
``tests/repo/test_private_sdk_names.py`` keeps it so. An SDK release that moves any of these fails on import
of this module, naming what moved, rather than somewhere in the middle of a connection.
"""

from __future__ import annotations

from azure.eventhub._pyamqp import _decode, _encode
from azure.eventhub._pyamqp import performatives as perf
from azure.eventhub._pyamqp.endpoints import Source, Target
from azure.eventhub._pyamqp.error import AMQPError

#: AMQP's type codes, and the keys of a typed value (``{TYPE: AMQPTypes.long, VALUE: 5}``)
AMQPTypes = _encode.AMQPTypes
TYPE = _encode.TYPE
VALUE = _encode.VALUE
#: ``encode_value(buffer, value)``: one AMQP value appended to a ``bytearray``
encode_value = _encode.encode_value
#: a performative as the typed value ``encode_value`` writes
describe_performative = _encode.describe_performative
#: ``decode_frame(body) -> (frame type, fields)``
decode_frame = _decode.decode_frame
#: constructor byte -> the decoder of a value of that type
DECODE_BY_CONSTRUCTOR = _decode._DECODE_BY_CONSTRUCTOR

__all__ = [
    "DECODE_BY_CONSTRUCTOR",
    "TYPE",
    "VALUE",
    "AMQPError",
    "AMQPTypes",
    "Source",
    "Target",
    "decode_frame",
    "describe_performative",
    "encode_value",
    "perf",
]
