"""Typed events: every row of a batch encoded against one registered schema by Microsoft's encoder.

:func:`resolve_schema` finds the schema a publish uses in a namespace's Schema Registry (an inline
definition, registered only when asked, or the latest version of a schema registered by name), and
:class:`TypedBatch` encodes every row with Microsoft's ``AvroEncoder`` or ``JsonSchemaEncoder``, so that
each event's content type carries the schema id (``avro/binary+<id>``, ``application/json;serialization=Json+<id>``...)
as Microsoft's consumers expect. All rows are encoded before anything is sent: a row that does not
fit fails the batch naming the row, the field and the schema, and nothing of the batch is sent.

The content type is the same for every event of the batch; the publisher sets it on each event and
the fingerprint covers it (:class:`~airflow_provider_eh.publishing.fingerprint.Fingerprint`), so the
same rows under another schema version are other content (``BatchContentChangedError`` unless
``generation`` is raised). Apache Avro's binary encoding of a value is deterministic, so a re-run with
the same rows and schema has the same fingerprint.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from airflow_provider_eh.errors import InvalidEventError, SchemaIncompatibleError, SchemaNotRegisteredError

#: the formats a publish encodes with, by the name the registry gives them
FORMATS = ("Avro", "Json")
#: the JSON Schema draft assumed when a definition names none (``$schema``)
DEFAULT_JSON_DRAFT = "https://json-schema.org/draft/2020-12/schema"
#: the compatibility checks a publish may ask for (:mod:`~airflow_provider_eh.publishing.compatibility`)
COMPATIBILITY_MODES = ("None", "Backward", "Forward", "Full")


@dataclass(frozen=True)
class SchemaUsed:
    """The registered schema a batch is encoded against (what the result and the ledger record)."""

    group: str
    name: str
    id: str
    version: int | None
    format: str

    def describe(self) -> str:
        version = f" version {self.version}" if self.version is not None else ""
        return f"schema {self.group}/{self.name}{version} (id {self.id})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def schema_format(value: Any) -> str:
    """``"Avro"`` or ``"Json"`` (any case), or ``ValueError`` naming ``schema_format``."""
    for name in FORMATS:
        if isinstance(value, str) and value.lower() == name.lower():
            return name
    raise ValueError(f"schema_format={value!r}: must be one of {', '.join(FORMATS)}")


def compatibility_mode(value: Any) -> str:
    """``"None"``, ``"Backward"``, ``"Forward"`` or ``"Full"`` (any case), or ``ValueError`` naming ``schema_compatibility``."""
    for name in COMPATIBILITY_MODES:
        if isinstance(value, str) and value.lower() == name.lower():
            return name
    raise ValueError(f"schema_compatibility={value!r}: must be one of {', '.join(COMPATIBILITY_MODES)}")


def load_definition(schema: Any = None, schema_file: str | None = None) -> str | None:
    """The inline definition as JSON text: ``schema`` (a dict, or JSON text), or the text of ``schema_file``;
    ``ValueError`` naming the parameter when it is not a JSON object."""
    if schema is not None and schema_file:
        raise ValueError("give `schema` or `schema_file`, not both")
    if schema_file:
        try:
            text = Path(schema_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise ValueError(f"schema_file={schema_file!r}: cannot be read ({exc.strerror or exc})") from None
        name, schema = "schema_file", text
    elif schema is None:
        return None
    else:
        name = "schema"
    if isinstance(schema, Mapping):
        return json.dumps(schema)
    if not isinstance(schema, str):
        raise ValueError(f"{name}: a {type(schema).__name__}; give a dict or the schema's JSON text")
    try:
        parsed = json.loads(schema)
    except ValueError as exc:
        raise ValueError(f"{name}: not JSON ({exc}); give an Avro schema or a JSON Schema as JSON text") from None
    if not isinstance(parsed, dict):
        raise ValueError(f"{name}: a JSON {type(parsed).__name__}; a schema is a JSON object")
    return schema


def name_of(definition: str, fmt: str, schema_name: str | None) -> str:
    """The name a definition is registered under: an Avro record's full name (what ``AvroEncoder`` uses), a
    JSON Schema's ``schema_name``, else its ``title``."""
    parsed = json.loads(definition)
    if fmt == "Avro":
        name, namespace = parsed.get("name"), parsed.get("namespace")
        if not isinstance(name, str) or not name:
            raise ValueError("schema: an Avro schema for events is a record with a 'name'")
        full = name if "." in name or not namespace else f"{namespace}.{name}"
        if schema_name and schema_name != full:
            raise ValueError(f"schema_name={schema_name!r}: an Avro schema is registered under its full name "
                             f"{full!r}; leave schema_name out or give that")
        return full
    name = schema_name or parsed.get("title")
    if not isinstance(name, str) or not name:
        raise ValueError("schema: a JSON Schema needs a 'title', or give schema_name, to be registered under")
    return name


def resolve_schema(client: Any, group: str, fmt: str, *, definition: str | None, schema_name: str | None,
                   auto_register: bool, versions: Callable[[str, str], list[int] | None],
                   compatibility: str = "None") -> tuple[str, SchemaUsed]:
    """
    ``(definition, SchemaUsed)`` of the schema a publish encodes with, from Microsoft's ``SchemaRegistryClient``.

    An inline ``definition`` is looked up by its content (registered with ``auto_register``, else
    :class:`~airflow_provider_eh.errors.SchemaNotRegisteredError`); ``schema_name`` alone is the latest
    registered version of that name (``versions(group, name)`` lists them:
    :meth:`~airflow_provider_eh.client.schema_registry.SchemaRegistryEndpoint.schema_versions`).
    With a ``compatibility`` mode other than ``"None"``, an inline definition is first checked against
    the latest registered version of its name (:func:`check_compatible`), before anything is registered.
    """
    from azure.core.exceptions import ResourceNotFoundError

    if definition is not None:
        name = name_of(definition, fmt, schema_name)
        if compatibility != "None":
            check_compatible(client, group, name, fmt, definition, compatibility, versions)
        try:
            props = client.get_schema_properties(group, name, definition, fmt)
        except ResourceNotFoundError:
            if not auto_register:
                raise SchemaNotRegisteredError(
                    f"schema {name!r} ({fmt}) is not registered in schema group {group!r} with this definition; "
                    "register it (a new version of the schema), or set auto_register_schema=True"
                ) from None
            props = client.register_schema(group, name, definition, fmt)
        return definition, SchemaUsed(group, name, props.id, props.version, fmt)
    if not schema_name:
        raise ValueError("give the schema: `schema`, `schema_file` or `schema_name` (one already registered)")
    known = versions(group, schema_name)
    if not known:
        raise SchemaNotRegisteredError(f"schema {schema_name!r} is not registered in schema group {group!r}; "
                                       "register it, or give its definition as `schema` or `schema_file`")
    fetched = client.get_schema(group_name=group, name=schema_name, version=max(known))
    props = fetched.properties
    registered = str(getattr(props.format, "value", props.format))  # a SchemaFormat (a str enum) or its text
    if registered.lower() != fmt.lower():
        raise ValueError(f"schema_format={fmt!r}: schema {group}/{schema_name} is registered as {registered}")
    return fetched.definition, SchemaUsed(group, schema_name, props.id, props.version, fmt)


#: the content type of each format's events, before ``+<schema id>`` (what Microsoft's encoders write)
MIME_TYPES = {"Avro": "avro/binary", "Json": "application/json;serialization=Json"}


def top_level_fields(definition: str, fmt: str) -> tuple[str, ...] | None:
    """The names an Avro record's fields or a JSON Schema's ``properties`` give; ``None`` when it names none."""
    parsed = json.loads(definition)
    if fmt == "Avro":
        fields = parsed.get("fields") if parsed.get("type") == "record" else None
        return tuple(f["name"] for f in fields if isinstance(f, dict) and "name" in f) if isinstance(fields, list) else None
    properties = parsed.get("properties")
    return tuple(properties) if isinstance(properties, dict) else None


class ResolvedSchemaClient:
    """
    A stand-in for ``SchemaRegistryClient`` that knows one resolved schema and asks no registry.

    Microsoft's encoders look a schema's id up by its definition (``AvroEncoder``) or its definition up by
    id (``JsonSchemaEncoder``) through their client; given this one, they encode exactly as with the real
    client and make no request, so a Spark executor encodes its rows without reaching the registry.
    """

    def __init__(self, definition: str, used: SchemaUsed):
        self.definition = definition
        self.used = used

    def get_schema_properties(self, group_name: str, name: str, definition: str, format: Any, **kwargs: Any) -> Any:
        """The resolved schema's properties when asked for its definition (whatever name the encoder derives:
        a schema registered by name under another one than its Avro full name is still that schema)."""
        if (group_name, definition) != (self.used.group, self.definition):
            raise LookupError(f"only {self.used.describe()} is resolved here, not another definition of {group_name}/{name}")
        return self._properties()

    def get_schema(self, schema_id: str | None = None, **kwargs: Any) -> Any:
        if schema_id not in (None, self.used.id):
            raise LookupError(f"only {self.used.describe()} is resolved here, not schema id {schema_id}")
        from types import SimpleNamespace

        return SimpleNamespace(definition=self.definition, properties=self._properties())

    def _properties(self) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(id=self.used.id, format=self.used.format, group_name=self.used.group,
                               name=self.used.name, version=self.used.version)

    def close(self) -> None:
        """Nothing to release."""

    def __enter__(self) -> ResolvedSchemaClient:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class RowEncoder:
    """
    Encodes rows against one resolved schema with Microsoft's own encoder, asking no registry.

    Picklable (the definition and the schema travel; the encoder is built where it first runs), so a
    Spark executor encodes each row's body to the very bytes and content type Microsoft's ``AvroEncoder``
    or ``JsonSchemaEncoder`` gives with a registry client: the encoder runs unchanged on a
    :class:`ResolvedSchemaClient`.

    :param definition: the schema's definition (JSON text).
    :param used: the registered schema (:func:`resolve_schema`).
    """

    def __init__(self, definition: str, used: SchemaUsed):
        self.definition = definition
        self.used = used
        self.content_type = f"{MIME_TYPES[used.format]}+{used.id}"
        self.fields = top_level_fields(definition, used.format)
        self._encode: Callable[[Any], Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"definition": self.definition, "used": self.used, "content_type": self.content_type,
                "fields": self.fields}

    def select(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The columns of a whole row that the schema names (all of them when it names none): a row carries
        columns a schema need not hold (its key, its order), and Avro refuses a record with more keys."""
        if self.fields is None:
            return dict(row)
        return {name: row[name] for name in self.fields if name in row}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._encode = None

    def _encoder(self) -> Callable[[Any], Any]:
        client: Any = ResolvedSchemaClient(self.definition, self.used)  # stands in for a SchemaRegistryClient
        if self.used.format == "Avro":
            from azure.schemaregistry.encoder.avroencoder import AvroEncoder

            avro = AvroEncoder(client=client, group_name=self.used.group)
            return functools.partial(avro.encode, schema=self.definition)
        from azure.schemaregistry.encoder.jsonencoder import JsonSchemaEncoder

        draft = json.loads(self.definition).get("$schema") or DEFAULT_JSON_DRAFT
        return functools.partial(JsonSchemaEncoder(client=client, validate=draft).encode, schema_id=self.used.id)

    def encode(self, value: Any, row: object) -> bytes:
        """The encoded body of one row; ``InvalidEventError`` naming ``row`` (its description), the field and the
        schema when it does not fit."""
        encode = self._encode
        if encode is None:
            encode = self._encode = self._encoder()
        try:
            content = encode(value)
        except Exception as exc:
            raise InvalidEventError(
                f"{row} does not fit {self.used.describe()}: {_cause(exc)}. Nothing of this batch was sent; "
                "fix the row, or publish with a schema version it fits"
            ) from None
        if content["content_type"] != self.content_type:  # Microsoft's encoder changed its content type
            raise InvalidEventError(f"{row}: the encoder gave content type {content['content_type']!r}, "
                                    f"not {self.content_type!r}")
        return bytes(content["content"])


class TypedBatch:
    """
    Encodes a batch's events, each body a row, with one :class:`RowEncoder`.

    :param rows: the encoder of the resolved schema.
    """

    def __init__(self, rows: RowEncoder):
        self.rows = rows
        self.content_type = rows.content_type

    def encode(self, events: Iterable[Any]) -> list[Any]:
        """Every event with its body (a row) encoded; a mapping with ``body`` keeps its other fields.
        ``InvalidEventError`` naming the row (index, and partition key if any), the field and the schema
        when a row does not fit: raised before anything is sent."""
        out: list[Any] = []
        encode = self.rows.encode
        for index, raw in enumerate(events):
            keyed = isinstance(raw, Mapping) and "body" in raw
            if keyed:
                key = raw.get("partition_key")
                label = _EventLabel(index, key)
                out.append({**raw, "body": encode(raw["body"], label)})
            else:
                out.append(encode(raw, _EventLabel(index, None)))
        return out


class _EventLabel:
    """An event's description in an error message, written only when one is."""

    __slots__ = ("index", "key")

    def __init__(self, index: int, key: Any):
        self.index, self.key = index, key

    def __str__(self) -> str:
        return f"event {self.index}" + (f" (partition_key {self.key!r})" if self.key is not None else "")


def check_compatible(client: Any, group: str, name: str, fmt: str, definition: str, mode: str,
                     versions: Callable[[str, str], list[int] | None]) -> None:
    """:class:`~airflow_provider_eh.errors.SchemaIncompatibleError` naming the fields at fault when ``definition``
    is not ``mode`` compatible with the latest registered version of ``name``; nothing when none is registered."""
    from airflow_provider_eh.publishing.compatibility import incompatibilities

    known = versions(group, name)
    if not known:
        return
    latest = client.get_schema(group_name=group, name=name, version=max(known))
    problems = incompatibilities(fmt, mode, latest.definition, definition, latest_label=f"version {max(known)}")
    if problems:
        raise SchemaIncompatibleError(
            f"schema {group}/{name}: the definition given is not {mode.lower()} compatible with the latest registered "
            f"version {max(known)}: " + "; ".join(problems) + ". Nothing was registered or sent; change the schema "
            "(a default for an added field, say), or publish with schema_compatibility='None' on purpose"
        )


def _cause(exc: BaseException) -> str:
    """The innermost message of an encoder's error: Avro's names the field ('The datum ... provided for "amount"
    ...'); a JSON Schema validation error's path (``$.amount``) is added to its message."""
    while exc.__cause__ is not None:
        exc = exc.__cause__
    message = " ".join(str(getattr(exc, "message", None) or exc).split())[:500]
    path = getattr(exc, "json_path", None)
    return f"field {path}: {message}" if isinstance(path, str) and path != "$" else message
