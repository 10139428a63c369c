"""The event trigger's filter: a function named by dotted path, since triggers are serialised.

The filter receives each event record (:func:`~airflow_provider_eh.triggers.payload.event_record`);
events it returns a falsy value for do not fire. It must be importable where the trigger runs (the
triggerer) and where the DAG is parsed, so a bad path fails at parse time, not later in the triggerer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from airflow_provider_eh.errors import EventTriggerConfigError


def load_filter(path: str | None) -> Callable[[dict[str, Any]], Any] | None:
    """The function at ``package.module.function`` (or ``package.module:function``); ``None`` for none."""
    if not path:
        return None
    if not isinstance(path, str):
        raise EventTriggerConfigError(
            f"filter must be a dotted path 'package.module.function' (triggers are serialised), not {type(path).__name__}"
        )
    module_name, sep, name = path.partition(":") if ":" in path else path.rpartition(".")
    if not sep or not module_name or not name:
        raise EventTriggerConfigError(f"filter {path!r} is not a dotted path 'package.module.function'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise EventTriggerConfigError(
            f"filter {path!r}: module {module_name!r} cannot be imported ({exc}); put it on the triggerer's "
            "and the workers' Python path (a plugin or a package; the DAGs folder is not on the triggerer's path)"
        ) from exc
    func = getattr(module, name, None)
    if not callable(func):
        raise EventTriggerConfigError(f"filter {path!r}: module {module_name!r} has no function {name!r}")
    return func
