"""Griffe extensions for the API reference: what the docstrings mean, shown as Markdown.

:class:`InheritedKeywordArguments`: the operators take their shared arguments through ``**kwargs``
and hand them to their base class's ``__init__`` (``EventHubIngestOperator(table=..., sql_conn_id=...)``,
``sql_conn_id`` being ``SqlSinkOperator``'s), and their docstrings document those arguments where a
user looks for them. Griffe reads only the class's own signature, so it would call each such
``:param:`` unknown. This extension adds to a signature that ends in ``**kwargs`` the keyword
arguments of its bases' ``__init__`` within this package (not Airflow's ``BaseOperator``, which
Griffe does not load). A ``:param:`` that neither the class nor one of its bases takes is still
reported, and ``mkdocs build --strict`` fails.

:class:`SphinxRoles`: the docstrings' Sphinx roles (``:class:`~a.b.C```) and literal-block markers
(``::``) shown as Markdown code.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_KEYWORD_KINDS = (griffe.ParameterKind.positional_or_keyword, griffe.ParameterKind.keyword_only)


class InheritedKeywordArguments(griffe.Extension):
    """Extend ``__init__(..., **kwargs)`` signatures with the keyword arguments of the package's base classes."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        done: set[str] = set()
        for cls in _classes(pkg):
            _extend(cls, done)


def _classes(obj: griffe.Object) -> list[griffe.Class]:
    found = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        if member.is_class:
            found.append(member)
        if member.is_module or member.is_class:
            found.extend(_classes(member))
    return found


def _extend(cls: griffe.Class, done: set[str]) -> None:
    if cls.path in done:
        return
    done.add(cls.path)
    init = cls.members.get("__init__")
    if init is None or init.is_alias or not init.is_function:
        return
    params = init.parameters
    var_keyword = next((p for p in params if p.kind is griffe.ParameterKind.var_keyword), None)
    if var_keyword is None:
        return
    try:
        bases = [base for base in cls.resolved_bases if not base.is_alias or base.resolved]
    except griffe.AliasResolutionError:
        return
    inherited: list[griffe.Parameter] = []
    for base in bases:
        base = base.final_target if base.is_alias else base
        if not base.is_class:
            continue
        _extend(base, done)
        base_init = base.all_members.get("__init__")
        if base_init is None or not base_init.is_function:
            continue
        for param in base_init.parameters:
            if param.kind in _KEYWORD_KINDS and param.name != "self" and param.name not in params \
                    and param.name not in {p.name for p in inherited}:
                inherited.append(griffe.Parameter(param.name, annotation=param.annotation,
                                                  kind=griffe.ParameterKind.keyword_only, default=param.default))
    if not inherited:
        return
    ordered = [p for p in params if p is not var_keyword] + inherited + [var_keyword]
    init.parameters = griffe.Parameters(*ordered)


_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|data|exc|obj|const):`~?\.?(?P<target>[^`]+)`")


class SphinxRoles(griffe.Extension):
    """Show the docstrings' Sphinx roles as code: ``:class:`~a.b.C``` reads ``C``, ``:mod:`a.b``` reads ``a.b``.

    The docstrings are written for Sphinx-style tools; Markdown would show the role's name and backticks
    as they are. A reST literal block's ``::`` becomes ``:`` (the indented block after it is code in
    Markdown too). Only the text shown changes; the ``:param:`` fields are parsed as they are.
    """

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        for obj in [pkg, *_objects(pkg)]:
            if obj.docstring is not None:
                obj.docstring.value = _markdown(obj.docstring.value)


def _markdown(text: str) -> str:
    def code(match: re.Match[str]) -> str:
        target = match["target"]
        shown = target.rsplit(".", 1)[-1] if match[0].split("`", 1)[1].startswith("~") else target
        return f"`{shown}`"

    text = _ROLE.sub(code, text)
    text = re.sub(r"(?m):?\s*::$", ":", text)
    return re.sub(r"``([^`]+)``", r"`\1`", text)


def _objects(obj: griffe.Object) -> list[griffe.Object]:
    found = []
    for member in obj.members.values():
        if member.is_alias:
            continue
        found.append(member)
        if member.is_module or member.is_class:
            found.extend(_objects(member))
    return found
