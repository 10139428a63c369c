"""Whether a schema about to be used is compatible with the latest registered version, naming each field at fault.

Pure logic over two definitions (JSON text); no registry, no Airflow. The modes are those of a schema
group in Azure Schema Registry, plus ``Full``:

* ``Backward``: the new schema reads what the latest version wrote (consumers may move to it first);
* ``Forward``: the latest version reads what the new schema writes (producers may move first);
* ``Full``: both.

**Avro** follows the specification's "Schema Resolution": a field the reader has and the writer lacks
needs a default in the reader; a field the writer has and the reader lacks is skipped; a type may only be
promoted (int to long, float or double; long to float or double; float to double; string and bytes
either way); records, enums and fixed types match by unqualified name (or the reader's aliases); an
enum symbol the writer has and the reader lacks needs the reader's default; a fixed keeps its size; a
union writer needs every branch readable, a union reader some branch that reads the writer. Schemas
are parsed by Apache Avro, the library Microsoft's ``AvroEncoder`` encodes with.

**JSON Schema** (a documented subset, by property, through nested ``properties`` and ``items``): every
instance the writer accepts must stay valid for the reader, so the reader may not require a property the
writer does not, may not narrow a property's ``type`` (``integer`` is within ``number``), may not drop
``enum`` values, and may not refuse additional properties (``additionalProperties: false``) the writer
had as properties. Keywords beyond these (patterns, bounds, ``$ref``, combinators) are not compared.
"""

from __future__ import annotations

import json
from typing import Any

_PROMOTIONS = {
    "int": {"long", "float", "double"},
    "long": {"float", "double"},
    "float": {"double"},
    "string": {"bytes"},
    "bytes": {"string"},
}
_NAMED = ("record", "error", "enum", "fixed")


def incompatibilities(fmt: str, mode: str, latest: str, candidate: str, *, latest_label: str = "the latest version",
                      candidate_label: str = "this schema") -> list[str]:
    """Why ``candidate`` is not ``mode`` compatible with ``latest`` (empty: it is), each naming the field.

    :param fmt: ``"Avro"`` or ``"Json"``.
    :param mode: ``"None"``, ``"Backward"``, ``"Forward"`` or ``"Full"``.
    """
    if mode == "None":
        return []
    directions = {"Backward": [(latest, candidate, latest_label, candidate_label)],
                  "Forward": [(candidate, latest, candidate_label, latest_label)]}
    directions["Full"] = directions["Backward"] + directions["Forward"]
    if mode not in directions:
        raise ValueError(f"compatibility mode {mode!r}: must be None, Backward, Forward or Full")
    check = avro_incompatibilities if fmt == "Avro" else json_incompatibilities
    problems: list[str] = []
    for writer, reader, writer_label, reader_label in directions[mode]:
        for problem in check(writer, reader, writer_label=writer_label, reader_label=reader_label):
            if problem not in problems:
                problems.append(problem)
    return problems


# ---- Avro ----------------------------------------------------------------------------------------


def avro_incompatibilities(writer: str, reader: str, *, writer_label: str = "the writer",
                           reader_label: str = "the reader") -> list[str]:
    """Why data written with Avro schema ``writer`` cannot be read with ``reader`` (empty: it can)."""
    import avro.schema

    resolver = _AvroResolution(writer_label, reader_label)
    resolver.match(avro.schema.parse(writer), avro.schema.parse(reader), "")
    return resolver.problems


def _type_name(schema: Any) -> str:
    if schema.type in _NAMED:
        return f"{schema.type} {schema.fullname}"
    if schema.type == "union":
        return "union [" + ", ".join(_type_name(b) for b in schema.schemas) + "]"
    if schema.type in ("array", "map"):
        inner = schema.items if schema.type == "array" else schema.values
        return f"{schema.type} of {_type_name(inner)}"
    return str(schema.type)


class _AvroResolution:
    """One writer/reader resolution, collecting every problem with the field's path."""

    def __init__(self, writer_label: str, reader_label: str, seen: set[tuple[int, int]] | None = None):
        self.writer_label, self.reader_label = writer_label, reader_label
        self.problems: list[str] = []
        self.seen: set[tuple[int, int]] = set(seen or ())  # (writer, reader) pairs being matched: recursive types

    def _field(self, path: str) -> str:
        return f"field '{path}'" if path else "the schema"

    def readable(self, writer: Any, reader: Any) -> bool:
        probe = _AvroResolution(self.writer_label, self.reader_label, self.seen)
        probe.match(writer, reader, "")
        return not probe.problems

    def match(self, writer: Any, reader: Any, path: str) -> None:
        key = (id(writer), id(reader))
        if key in self.seen:  # a recursive type already being matched
            return
        self.seen.add(key)
        if writer.type == "union":
            for branch in writer.schemas:
                if reader.type == "union" and not any(self.readable(branch, b) for b in reader.schemas):
                    self.problems.append(f"{self._field(path)}: {_type_name(branch)} in {self.writer_label} is not "
                                         f"readable as any of {_type_name(reader)} in {self.reader_label}")
                elif reader.type != "union":
                    self.match(branch, reader, path)
            return
        if reader.type == "union":
            branch = next((b for b in reader.schemas if self.readable(writer, b)), None)
            if branch is None:
                self.problems.append(f"{self._field(path)}: {_type_name(writer)} in {self.writer_label} is not readable "
                                     f"as any of {_type_name(reader)} in {self.reader_label}")
            return
        if writer.type != reader.type and not (writer.type in ("record", "error") and reader.type in ("record", "error")):
            if reader.type not in _PROMOTIONS.get(writer.type, ()):
                self.problems.append(f"{self._field(path)}: {_type_name(writer)} in {self.writer_label} cannot be read "
                                     f"as {_type_name(reader)} in {self.reader_label}")
            return
        if writer.type in _NAMED and not _same_name(writer, reader):
            self.problems.append(f"{self._field(path)}: {_type_name(writer)} in {self.writer_label} cannot be read as "
                                 f"{_type_name(reader)} in {self.reader_label} (another name)")
            return
        if writer.type in ("record", "error"):
            self._record(writer, reader, path)
        elif writer.type == "enum":
            missing = [s for s in writer.symbols if s not in reader.symbols]
            if missing and getattr(reader, "default", None) is None:
                self.problems.append(f"{self._field(path)}: enum symbol(s) {', '.join(missing)} of {self.writer_label} "
                                     f"are not in {self.reader_label}, which has no default symbol")
        elif writer.type == "fixed":
            if writer.size != reader.size:
                self.problems.append(f"{self._field(path)}: fixed size {writer.size} in {self.writer_label}, "
                                     f"{reader.size} in {self.reader_label}")
        elif writer.type == "array":
            self.match(writer.items, reader.items, f"{path}[]")
        elif writer.type == "map":
            self.match(writer.values, reader.values, f"{path}{{}}")

    def _record(self, writer: Any, reader: Any, path: str) -> None:
        written = {f.name: f for f in writer.fields}
        for field in reader.fields:
            names = (field.name, *(field.props.get("aliases") or ()))
            source = next((written[n] for n in names if n in written), None)
            child = f"{path}.{field.name}" if path else field.name
            if source is None:
                if not field.has_default:
                    self.problems.append(f"field '{child}' is in {self.reader_label} without a default and not in "
                                         f"{self.writer_label}: data written with {self.writer_label} has no value for it")
                continue
            self.match(source.type, field.type, child)


def _same_name(writer: Any, reader: Any) -> bool:
    aliases = reader.props.get("aliases") or ()
    return writer.name == reader.name or writer.fullname in aliases or writer.name in aliases


# ---- JSON Schema ---------------------------------------------------------------------------------


def json_incompatibilities(writer: str, reader: str, *, writer_label: str = "the writer",
                           reader_label: str = "the reader") -> list[str]:
    """Why an instance valid under JSON Schema ``writer`` may be invalid under ``reader`` (the subset above)."""
    problems: list[str] = []
    _json_match(json.loads(writer), json.loads(reader), "", problems, writer_label, reader_label)
    return problems


def _types(schema: Any) -> set[str] | None:
    kind = schema.get("type") if isinstance(schema, dict) else None
    if kind is None:
        return None  # any type
    return {kind} if isinstance(kind, str) else {str(k) for k in kind}


def _covers(reader: set[str], writer: set[str]) -> bool:
    return all(t in reader or (t == "integer" and "number" in reader) for t in writer)


def _json_match(writer: Any, reader: Any, path: str, problems: list[str], wl: str, rl: str) -> None:
    if not isinstance(writer, dict) or not isinstance(reader, dict):
        return
    where = f"property '{path}'" if path else "the schema"
    w_types, r_types = _types(writer), _types(reader)
    if r_types is not None and (w_types is None or not _covers(r_types, w_types)):
        shown = "any type" if w_types is None else "/".join(sorted(w_types))
        problems.append(f"{where}: {shown} in {wl} is not accepted by {rl}, which takes {'/'.join(sorted(r_types))}")
        return
    if isinstance(reader.get("enum"), list):
        if not isinstance(writer.get("enum"), list):
            problems.append(f"{where}: {rl} allows only the values {reader['enum']!r}; {wl} allows any")
        else:
            lost = [v for v in writer["enum"] if v not in reader["enum"]]
            if lost:
                problems.append(f"{where}: value(s) {lost!r} of {wl} are not allowed by {rl}")
    w_props, r_props = writer.get("properties") or {}, reader.get("properties") or {}
    w_required = set(writer.get("required") or ())
    for name in sorted(set(reader.get("required") or ()) - w_required):
        child = f"{path}.{name}" if path else name
        problems.append(f"property '{child}' is required by {rl} but not by {wl}")
    if reader.get("additionalProperties") is False:
        for name in sorted(set(w_props) - set(r_props)):
            child = f"{path}.{name}" if path else name
            problems.append(f"property '{child}' is in {wl} but not in {rl}, which allows no additional properties")
    for name in sorted(set(w_props) & set(r_props)):
        _json_match(w_props[name], r_props[name], f"{path}.{name}" if path else name, problems, wl, rl)
    if isinstance(writer.get("items"), dict) and isinstance(reader.get("items"), dict):
        _json_match(writer["items"], reader["items"], f"{path}[]", problems, wl, rl)
