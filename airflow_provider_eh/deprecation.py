"""Arguments renamed in a release: the old spelling still works, with a warning that names the new one and the
release that removes it; both spellings given with different values is refused."""

from __future__ import annotations

import warnings
from typing import Any

from airflow.exceptions import AirflowProviderDeprecationWarning

#: the release that removes the deprecated spellings
REMOVED_IN = "2.0.0"


def renamed_argument(task_id: str | None, new: str, new_value: Any, old: str, old_value: Any, *,
                     old_as: str | None = None, why: str = "", owner: str | None = None,
                     error: type[ValueError] = ValueError) -> Any:
    """
    The value of the argument ``new``: ``old_value`` where the task was given the old spelling ``old`` (with an
    ``AirflowProviderDeprecationWarning``), else ``new_value``.

    :param old_as: how the warning writes the old spelling (default ``old``).
    :param why: what the warning adds after "pass ``new``".
    :param owner: what the messages start with instead of the task (a trigger, which has none).
    :param error: the error raised when both spellings are given with different values.
    """
    if old_value is None:
        return new_value
    who = owner or f"Task {task_id!r}"
    warnings.warn(f"{who}: {old_as or old} is deprecated and will be removed in {REMOVED_IN}; pass {new}{why}.",
                  AirflowProviderDeprecationWarning, stacklevel=3)
    if new_value is not None and _as_setting(new_value) != _as_setting(old_value):
        raise error(f"{who}: {new}={new_value!r} and its deprecated spelling {old}={old_value!r} disagree; "
                    f"pass {new} only")
    return old_value


def _as_setting(value: Any) -> Any:
    """``value`` as a float where it is a number (``1`` and ``1.0`` are one setting), else as it is."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else value
