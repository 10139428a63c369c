"""Reading connection fields the same way for every hook of the package.

Airflow stores custom fields in ``Connection.extra``; older UIs wrote them with an
``extra__<conn_type>__`` prefix. Both spellings are accepted, the plain one wins.
"""

from __future__ import annotations

from typing import Any

from airflow.providers.common.compat.sdk import mask_secret


def extra_field(extras: dict[str, Any], conn_type: str, name: str) -> Any:
    """Return an extra field by its plain or prefixed name, or ``None`` when unset or blank."""
    for key in (name, f"extra__{conn_type}__{name}"):
        value = extras.get(key)
        if value not in (None, ""):
            return value
    return None


def masked(value: str | None) -> str | None:
    """Register ``value`` with Airflow's secrets masker so it never reaches a log line."""
    if value:
        mask_secret(value)
    return value
