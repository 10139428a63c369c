"""The Schema Registry's data: schema groups, schemas and their versions, persisted in ``schemas.json``.

Broker layer: what the HTTPS data plane (``registry_http``) and the admin API call. A schema group
has a format (``Avro``, ``Json``, ``Custom``) and a compatibility mode (``None``, ``Backward``,
``Forward``; checked for Avro, see ``avro_schema``); a schema is a name in a group with numbered
versions, each with an id unique in the namespace (32 hex digits, as the service's). Registering
the definition of an existing version again returns that version; definitions are compared as
JSON values for Avro and JSON Schema (whitespace and key order aside), as text for Custom.

A refusal is a :class:`RegistryError` with the HTTP status and the service's error code
(``ItemNotFound``, ``InvalidSchemaType``, ``InvalidRequest``, ``InvalidSchema``).
``DATA_DIR/schemas.json`` is rewritten (fsync, then rename) on every change, so schemas survive a
restart like hubs do.
"""

from __future__ import annotations

import json
import logging
import re
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import avro_schema
from .store import write_json

_LOG = logging.getLogger("eventhubs_local")
FORMATS = ("Avro", "Json", "Custom")
COMPATIBILITIES = ("None", "Backward", "Forward")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,49}$")
_SCHEMA_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,255}$")
MAX_DEFINITION = 1024 * 1024


class RegistryError(Exception):
    """A request the registry refuses: HTTP ``status``, the service's error ``code`` and the reason."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message


def canonical(value: str, fallback: tuple[str, ...], what: str) -> str:
    """``value`` spelt as in ``fallback`` (any case), or ``ValueError`` naming ``what`` and the choices."""
    match = next((v for v in fallback if v.lower() == str(value).strip().lower()), None)
    if match is None:
        raise ValueError(f"{what} {value!r} is not one of {', '.join(fallback)}")
    return match


@dataclass
class Version:
    """One registered version of a schema."""

    id: str
    version: int
    definition: str
    created_at: int


@dataclass
class SchemaGroup:
    """A group: its format, compatibility mode and schemas (name -> versions, oldest first)."""

    name: str
    format: str
    compatibility: str
    created_at: int
    schemas: dict[str, list[Version]] = field(default_factory=dict)

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "format": self.format, "compatibility": self.compatibility,
                "created_at": self.created_at,
                "schemas": {name: [v.version for v in versions] for name, versions in self.schemas.items()}}

    def versions(self, name: str) -> list[Version]:
        found = next((v for k, v in self.schemas.items() if k.lower() == name.lower()), None)
        if found is None:
            raise RegistryError(404, "ItemNotFound", f"Schema '{self.name}/{name}' does not exist.")
        return found


def _comparable(fmt: str, definition: str) -> Any:
    if fmt == "Custom":
        return definition
    try:
        return json.dumps(json.loads(definition), sort_keys=True, separators=(",", ":"))
    except ValueError:
        return definition


class Registry:
    """Every schema group of one data directory."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / "schemas.json"
        self.groups: dict[str, SchemaGroup] = {}
        self.by_id: dict[str, tuple[SchemaGroup, str, Version]] = {}
        if self.path.exists():
            for entry in json.loads(self.path.read_text()).get("groups", []):
                group = SchemaGroup(entry["name"], entry["format"], entry["compatibility"], entry["created_at"])
                for name, versions in entry.get("schemas", {}).items():
                    group.schemas[name] = [Version(**v) for v in versions]
                self._index(group)

    def _index(self, group: SchemaGroup) -> None:
        self.groups[group.name.lower()] = group
        for name, versions in group.schemas.items():
            for version in versions:
                self.by_id[version.id] = (group, name, version)

    def _save(self) -> None:
        data = {"groups": [
            {"name": g.name, "format": g.format, "compatibility": g.compatibility, "created_at": g.created_at,
             "schemas": {n: [vars(v) for v in vs] for n, vs in g.schemas.items()}}
            for g in self.groups.values()
        ]}
        write_json(self.path, data)

    # -- groups (admin API, command line) ---------------------------------------------------------

    def create_group(self, name: str, format: str = "Avro", compatibility: str = "None") -> tuple[SchemaGroup, bool]:
        """Create a group, or change the compatibility mode of one of the same format; ``(group, created)``.

        :raises ValueError: naming the bad name, format or compatibility mode, or a group of another format.
        """
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(f"invalid schema group name {name!r}: use letters, digits, '.', '-', '_' (max 50)")
        fmt = canonical(format, FORMATS, "schema group format")
        compat = canonical(compatibility, COMPATIBILITIES, "schema group compatibility")
        existing = self.groups.get(name.lower())
        if existing is not None:
            if existing.format != fmt:
                raise ValueError(f"schema group {existing.name!r} exists with format {existing.format}, not {fmt}")
            existing.compatibility = compat
            self._save()
            return existing, False
        group = SchemaGroup(name, fmt, compat, int(time.time() * 1000))
        self.groups[name.lower()] = group
        self._save()
        _LOG.info("schema group %s created: format %s, compatibility %s", name, fmt, compat)
        return group, True

    def group(self, name: str) -> SchemaGroup:
        group = self.groups.get(name.lower())
        if group is None:
            raise RegistryError(404, "ItemNotFound", f"Schema group '{name}' does not exist. Create it with "
                                                     "--schema-group or the admin API (POST /schema-groups).")
        return group

    # -- the data plane ---------------------------------------------------------------------------

    def _checked(self, group_name: str, name: str, fmt: str, definition: str) -> SchemaGroup:
        group = self.group(group_name)
        if not _SCHEMA_NAME.match(name):
            raise RegistryError(400, "InvalidRequest", f"invalid schema name {name!r}: use letters, digits, '.', '-', '_'")
        if fmt != group.format:
            raise RegistryError(415, "InvalidSchemaType",
                                f"Invalid schema type for request: the schema group '{group.name}' holds "
                                f"{group.format} schemas, the request's content type says {fmt}.")
        if not definition:
            raise RegistryError(400, "InvalidRequest", "Error when consuming request body: the body is empty.")
        if len(definition.encode()) > MAX_DEFINITION:
            raise RegistryError(400, "InvalidRequest", f"the schema is over {MAX_DEFINITION} bytes")
        return group

    def register(self, group_name: str, name: str, fmt: str, definition: str) -> tuple[SchemaGroup, str, Version]:
        """Register ``definition`` as the next version of ``name`` (or return the version that has it)."""
        group = self._checked(group_name, name, fmt, definition)
        parsed = self._validate(group, definition)
        key = next((k for k in group.schemas if k.lower() == name.lower()), name)
        versions = group.schemas.get(key, [])
        same = _comparable(group.format, definition)
        for version in versions:
            if _comparable(group.format, version.definition) == same:
                return group, key, version
        if versions and parsed is not None and group.compatibility != "None":
            latest = avro_schema.parse(versions[-1].definition)
            if group.compatibility == "Backward":
                problems = avro_schema.incompatibilities(latest, parsed)
                how = "it cannot read data written with"
            else:
                problems = avro_schema.incompatibilities(parsed, latest)
                how = "data written with it cannot be read with"
            if problems:
                raise RegistryError(400, "InvalidSchema",
                                    f"Schema '{group.name}/{key}' is not {group.compatibility.lower()} compatible: "
                                    f"{how} version {versions[-1].version}: " + "; ".join(problems))
        version = Version(uuid.uuid4().hex, (versions[-1].version + 1) if versions else 1, definition,
                          int(time.time() * 1000))
        group.schemas[key] = [*versions, version]
        self.by_id[version.id] = (group, key, version)
        self._save()
        _LOG.info("schema %s/%s version %d registered: id %s", group.name, key, version.version, version.id)
        return group, key, version

    @staticmethod
    def _validate(group: SchemaGroup, definition: str) -> avro_schema.Node | None:
        if group.format == "Avro":
            try:
                return avro_schema.parse(definition)
            except avro_schema.AvroSchemaError as exc:
                raise RegistryError(400, "InvalidSchema", f"Invalid Avro schema: {exc}") from None
        if group.format == "Json":
            try:
                value = json.loads(definition)
            except ValueError as exc:
                raise RegistryError(400, "InvalidSchema", f"Invalid JSON schema: not JSON: {exc}") from None
            if not isinstance(value, (dict, bool)):
                raise RegistryError(400, "InvalidSchema", "Invalid JSON schema: it must be an object or a boolean")
        return None

    def find(self, group_name: str, name: str, fmt: str, definition: str) -> tuple[SchemaGroup, str, Version]:
        """The version of ``name`` whose definition is ``definition`` (404 ``ItemNotFound`` if none)."""
        group = self._checked(group_name, name, fmt, definition)
        versions = group.versions(name)
        key = next(k for k in group.schemas if k.lower() == name.lower())
        same = _comparable(group.format, definition)
        for version in versions:
            if _comparable(group.format, version.definition) == same:
                return group, key, version
        raise RegistryError(404, "ItemNotFound", f"No version of schema '{group.name}/{key}' has this definition.")

    def by_schema_id(self, schema_id: str) -> tuple[SchemaGroup, str, Version]:
        if not re.fullmatch(r"[0-9a-fA-F]{32}", schema_id):
            raise RegistryError(400, "InvalidRequest", f"Invalid schema id {schema_id!r}: 32 hexadecimal digits expected.")
        found = self.by_id.get(schema_id.lower())
        if found is None:
            raise RegistryError(404, "ItemNotFound", f"Schema id '{schema_id}' does not exist.")
        return found

    def by_version(self, group_name: str, name: str, version: int) -> tuple[SchemaGroup, str, Version]:
        group = self.group(group_name)
        versions = group.versions(name)
        key = next(k for k in group.schemas if k.lower() == name.lower())
        found = next((v for v in versions if v.version == version), None)
        if found is None:
            raise RegistryError(404, "ItemNotFound", f"Schema '{group.name}/{key}' has no version {version}.")
        return group, key, found
