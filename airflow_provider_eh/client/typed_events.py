"""Typed events on the consuming side: decoding an event by the schema id in its content type.

Microsoft's encoders put the schema id in each event's content type: ``avro/binary+<id>``
(``AvroEncoder``) and ``application/json;serialization=Json+<id>`` (``JsonSchemaEncoder``).
:func:`typed_content` reads the format and the id from a content type (``None``: an event that is not
typed, decoded as before). :class:`TypedDecoder` decodes with Microsoft's decoder
(``AvroEncoder.decode``, ``JsonSchemaEncoder.decode``); :class:`AsyncTypedDecoder` is its twin over
``azure.schemaregistry.aio`` and the encoders' aio variants, for triggers (nothing blocks the
triggerer's event loop).

Both fetch each schema once per decoder and keep it (at most :data:`CACHED_SCHEMAS` ids, the oldest
dropped first); an id the registry does not know is remembered as unknown too, so a hub full of
events of a deleted schema costs one request. The registry is found only when the first typed event
arrives, so a stream without typed events never needs one.

What cannot be decoded raises :class:`UndecodableEventError` (a dead letter for ingestion, a
``decode_error`` for a trigger's filter): an unknown schema id, content that does not decode or does
not match its schema, or no registry configured. A registry that refuses the credential
(:class:`~airflow_provider_eh.errors.CredentialRefusedError`) or cannot be reached
(:class:`~airflow_provider_eh.errors.ConnectionUnreachableError`, retryable) is the run's failure, not
the event's, named with the connection and the registry's address.
"""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
import uuid
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

from airflow_provider_eh.client.failures import FailureSite, provider_error
from airflow_provider_eh.client.schema_types import Duration, FieldType, fields_of, normalizer
from airflow_provider_eh.errors import UndecodableEventError
from airflow_provider_eh.extras import require_extra

#: the content types of Microsoft's encoders, before ``+<schema id>``, and the format each names
MIME_TYPES = {"avro/binary": "Avro", "application/json;serialization=Json": "Json"}
#: schema ids a decoder keeps at most
CACHED_SCHEMAS = 256
#: what a reason says to do when no registry is configured
SET_REGISTRY = ("set schema_registry_conn_id (an azure_event_hubs connection to the namespace whose Schema Registry "
                "holds the schema; the local endpoint's needs 'schema_registry_namespace' and 'ca_bundle'), then "
                "replay the dead letter")


@dataclass(frozen=True)
class TypedContent:
    """What a typed event's content type names: the format (``Avro`` or ``Json``) and the schema id."""

    format: str
    schema_id: str


@functools.lru_cache(maxsize=1024)  # a few content types, one per schema: each event of a batch asks several times
def typed_content(content_type: str | None) -> TypedContent | None:
    """The format and schema id of a content type of Microsoft's encoders; ``None`` for any other (or none)."""
    if not content_type or "+" not in content_type:
        return None
    mime, _, schema_id = content_type.rpartition("+")
    fmt = MIME_TYPES.get(mime.replace(" ", ""))
    if fmt is None or not schema_id.strip():
        return None
    return TypedContent(fmt, schema_id.strip())


def json_default(value: Any) -> Any:
    """A decoded value JSON does not hold, as JSON text holds it: bytes as base64, times and durations as ISO 8601,
    decimals and UUIDs as text (Avro's ``bytes``, ``fixed`` and logical types)."""
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, Duration):
        return value.iso()
    raise TypeError(f"a decoded value of type {type(value).__name__} has no JSON form")


def json_safe(value: Any) -> Any:
    """``value`` with every part JSON does not hold in a JSON form (for payloads, filters and XCom): a duration as
    ``{"months", "days", "milliseconds"}`` (its three counts apart, as Avro has them), anything else as
    :func:`json_default`'s text (an instant ISO 8601 with its offset, a local time without)."""
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, Duration):
        return {"months": value.months, "days": value.days, "milliseconds": value.milliseconds}
    return json_default(value)


def validate_json(schema: Mapping[str, Any], content: Any) -> None:
    """Validate ``content`` against a JSON Schema of the draft it names (``$schema``; 2020-12 when none):
    the ``validate`` of ``JsonSchemaEncoder``, so one decoder reads events of schemas of any draft."""
    import jsonschema  # type: ignore[import-untyped]  # Airflow's own dependency, and the JSON encoder's

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls(schema).validate(content)


def _cause(exc: BaseException) -> str:
    """The innermost message of a decoder's error, on one line (a JSON Schema error with its path)."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    message = " ".join(str(getattr(exc, "message", None) or exc).split())[:400]
    path = getattr(exc, "json_path", None)
    return f"field {path}: {message}" if isinstance(path, str) and path != "$" else message


class _Unknown:
    """A schema id the registry answered 404 for (remembered, so it is asked once)."""

    def __init__(self, message: str):
        self.message = message


class _Cache:
    """Schemas by id, at most ``size``, the oldest dropped first; counts what it fetched."""

    def __init__(self, size: int):
        self.size = size
        self.fetched = 0
        self._known: OrderedDict[str, Any] = OrderedDict()

    def get(self, schema_id: str) -> Any:
        return self._known.get(schema_id)

    def put(self, schema_id: str, found: Any) -> Any:
        self.fetched += 1
        self._known[schema_id] = found
        while len(self._known) > self.size:
            self._known.popitem(last=False)
        return found

    @staticmethod
    def answer(schema_id: str, found: Any) -> Any:
        if isinstance(found, _Unknown):
            from azure.core.exceptions import ResourceNotFoundError

            raise ResourceNotFoundError(found.message)
        return found


class _CachingClient:
    """A ``SchemaRegistryClient`` to an encoder: ``get_schema(id)`` (what decoding calls) through the cache,
    anything else the client's own."""

    def __init__(self, client: Any, cache: _Cache):
        self._client = client
        self._cache = cache

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):  # not yet set (a copy, a pickle): never the client's private names
            raise AttributeError(name)
        return getattr(self._client, name)

    def get_schema(self, schema_id: str, **kwargs: Any) -> Any:
        from azure.core.exceptions import ResourceNotFoundError

        found = self._cache.get(schema_id)
        if found is None:
            try:
                found = self._cache.put(schema_id, self._client.get_schema(schema_id, **kwargs))
            except ResourceNotFoundError as exc:
                found = self._cache.put(schema_id, _Unknown(str(exc.message or exc)))
        return self._cache.answer(schema_id, found)

    def close(self) -> None:
        self._client.close()


class _AsyncCachingClient(_CachingClient):
    """The same over the aio client."""

    async def get_schema(self, schema_id: str, **kwargs: Any) -> Any:
        from azure.core.exceptions import ResourceNotFoundError

        found = self._cache.get(schema_id)
        if found is None:
            try:
                found = self._cache.put(schema_id, await self._client.get_schema(schema_id, **kwargs))
            except ResourceNotFoundError as exc:
                found = self._cache.put(schema_id, _Unknown(str(exc.message or exc)))
        return self._cache.answer(schema_id, found)

    async def close(self) -> None:  # type: ignore[override]
        await self._client.close()


def _undecodable(typed: TypedContent, exc: BaseException) -> UndecodableEventError | None:
    """The event's failure for what a decoder raised, or ``None`` when it is the registry's (raised as it is)."""
    from azure.core.exceptions import ResourceNotFoundError

    if isinstance(exc, ResourceNotFoundError):
        return UndecodableEventError(
            f"schema id {typed.schema_id} ({typed.format}) is not in the Schema Registry ({_cause(exc)}); "
            "check that the producer and this task use the same namespace's registry")
    if isinstance(exc, (ValueError, TypeError, KeyError, IndexError, EOFError, UnicodeDecodeError)):
        # the encoders' InvalidContentError and InvalidSchemaError are ValueErrors; Avro's reader raises the others
        what = "does not match its JSON schema" if typed.format == "Json" else "does not decode as Avro"
        return UndecodableEventError(f"schema id {typed.schema_id} ({typed.format}): the content {what}: {_cause(exc)}")
    return None


def _registry_site(conn_id: str | None, registry: Any) -> FailureSite:
    """Where the registry's failures happen, for the one error map: a refused credential or a registry that cannot
    be reached is the run's failure, not the event's. ``registry``: its endpoint (any object with the namespace;
    a ``ca_bundle`` when it has one), or ``None`` before it is known."""
    return FailureSite.of_registry(
        conn_id or "schema_registry_conn_id", registry.fully_qualified_namespace if registry is not None else "?",
        ca_bundle=getattr(registry, "ca_bundle", None), done="Nothing of the batch was committed.")


def _missing(typed: TypedContent, why: str) -> UndecodableEventError:
    return UndecodableEventError(
        f"schema id {typed.schema_id} ({typed.format}): the event is typed but {why}; {SET_REGISTRY}")


class _Decoding:
    """What the sync and async decoders share: the registry given, the schema cache, the encoders per format,
    and how a failure to reach the registry or to decode is told."""

    def __init__(self, registry: Any, *, cache_size: int = CACHED_SCHEMAS, conn_id: str | None = None):
        self._registry = registry
        self.conn_id = conn_id
        self.site = _registry_site(conn_id, None)
        self.cache = _Cache(cache_size)
        self._client: Any = None
        self._encoders: dict[str, Any] = {}
        self._unavailable: str | None = None if registry is not None else "no Schema Registry is configured"
        self._shapes: dict[str, tuple[dict[str, FieldType], Any]] = {}  # schema id -> (fields, normalizer)

    def _shape(self, typed: TypedContent) -> tuple[dict[str, FieldType], Any]:
        """The fields of a decoded event's schema and its :func:`normalizer`, read from the schema once."""
        shape = self._shapes.get(typed.schema_id)
        if shape is None:
            schema = self.cache.get(typed.schema_id)
            definition = getattr(schema, "definition", None)
            if not isinstance(definition, str):
                return {}, None
            shape = self._shapes[typed.schema_id] = (fields_of(definition, typed.format),
                                                     normalizer(definition, typed.format))
        return shape

    def fields(self, content_type: str | None) -> dict[str, FieldType]:
        """The fields of the schema of an event this decoder decoded (by its content type); ``{}`` when none is known."""
        typed = typed_content(content_type)
        return {} if typed is None else self._shape(typed)[0]

    def _normalized(self, typed: TypedContent, value: Any) -> Any:
        """A decoded record with the values of its schema's kinds (:func:`normalizer`); raises for a value its format
        names and that it does not hold (a JSON ``date-time`` that is no instant), as content that does not decode."""
        fix = self._shape(typed)[1]
        return value if fix is None else fix(value)

    def _check(self, typed: TypedContent) -> None:
        """Raise when no event of ``typed`` can be decoded here: the extra missing, or no usable registry."""
        require_extra("schemaregistry", f"decoding typed events (schema id {typed.schema_id})")
        if self._unavailable is not None:
            raise _missing(typed, self._unavailable)

    def _unusable(self, typed: TypedContent, exc: BaseException) -> UndecodableEventError:
        """The registry could not be had (``exc``): this and every later typed event are undecodable."""
        self._unavailable = f"its Schema Registry cannot be used ({exc})"
        return _missing(typed, self._unavailable)

    def _encoder_of(self, typed: TypedContent, *, aio: bool) -> Any:
        if typed.format not in self._encoders:
            self._encoders[typed.format] = _new_encoder(typed.format, self._client, aio=aio)
        return self._encoders[typed.format]

    def _raise_failure(self, typed: TypedContent, exc: Exception) -> NoReturn:
        """Raise what a failed decode means: the event's (undecodable) or the registry's (the run's)."""
        failure = _undecodable(typed, exc)
        if failure is not None:
            raise failure from None
        unavailable = provider_error(exc, self.site)
        if unavailable is None:
            raise exc
        raise unavailable from exc


def _typed_or_raise(content_type: str) -> TypedContent:
    typed = typed_content(content_type)
    if typed is None:
        raise UndecodableEventError(f"content type {content_type!r} names no schema id")
    return typed


class TypedDecoder(_Decoding):
    """
    Decodes typed events with Microsoft's decoders; one per run (its schema cache lives as long).

    :param registry: the :class:`~airflow_provider_eh.client.schema_registry.SchemaRegistryEndpoint`, or a
        callable giving it (called at the first typed event; what it raises makes every typed event
        undecodable with that message), or ``None``: no registry configured.
    :param cache_size: schema ids kept at most.
    :param conn_id: the registry's Airflow connection, named when the registry fails.
    """

    def _encoder(self, typed: TypedContent) -> Any:
        self._check(typed)
        if self._client is None:
            try:
                registry = self._registry() if callable(self._registry) else self._registry
            except Exception as exc:
                raise self._unusable(typed, exc) from None
            self.site = _registry_site(self.conn_id, registry)
            self._client = _CachingClient(registry.client(), self.cache)
        return self._encoder_of(typed, aio=False)

    def decode(self, body: bytes, content_type: str) -> Any:
        """The decoded value (an Avro record or a JSON value) of a typed event's body.

        :raises UndecodableEventError: the event cannot be decoded (the message names the schema id and why).
        """
        typed = _typed_or_raise(content_type)
        encoder = self._encoder(typed)
        try:
            return self._normalized(typed, encoder.decode({"content": body, "content_type": content_type}))
        except Exception as exc:
            self._raise_failure(typed, exc)

    def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            self._encoders.clear()
            client.close()


def _new_encoder(fmt: str, client: Any, *, aio: bool) -> Any:
    """Microsoft's encoder of ``fmt`` (``Avro`` or ``Json``) over ``client``; its aio twin with ``aio``."""
    if fmt == "Avro":
        if aio:
            from azure.schemaregistry.encoder.avroencoder.aio import AvroEncoder as AsyncAvroEncoder

            return AsyncAvroEncoder(client=client)
        from azure.schemaregistry.encoder.avroencoder import AvroEncoder

        return AvroEncoder(client=client)
    if aio:
        from azure.schemaregistry.encoder.jsonencoder.aio import JsonSchemaEncoder as AsyncJsonSchemaEncoder

        return AsyncJsonSchemaEncoder(client=client, validate=validate_json)
    from azure.schemaregistry.encoder.jsonencoder import JsonSchemaEncoder

    return JsonSchemaEncoder(client=client, validate=validate_json)


class AsyncTypedDecoder(_Decoding):
    """
    :class:`TypedDecoder` over the aio clients, for triggers.

    :param registry: an async callable giving the
        :class:`~airflow_provider_eh.client.schema_registry.SchemaRegistryEndpoint` (the hook reads the
        connection in a thread), awaited at the first typed event; ``None``: no registry configured.
    :param cache_size: schema ids kept at most.
    :param conn_id: the registry's Airflow connection, named when the registry fails.
    """

    async def _encoder(self, typed: TypedContent) -> Any:
        self._check(typed)
        if self._client is None:
            assert self._registry is not None
            try:
                registry = await self._registry()
            except Exception as exc:
                raise self._unusable(typed, exc) from None
            self.site = _registry_site(self.conn_id, registry)
            self._client = _AsyncCachingClient(registry.async_client(), self.cache)
        return self._encoder_of(typed, aio=True)

    async def decode(self, body: bytes, content_type: str) -> Any:
        """As :meth:`TypedDecoder.decode`."""
        typed = _typed_or_raise(content_type)
        encoder = await self._encoder(typed)
        try:
            return self._normalized(typed, await encoder.decode({"content": body, "content_type": content_type}))
        except Exception as exc:
            self._raise_failure(typed, exc)

    async def close(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            self._encoders.clear()
            await client.close()
