"""The flat arguments that the settings records (:mod:`~airflow_provider_eh.operators.settings`) replaced.

They still work until :data:`~airflow_provider_eh.deprecation.REMOVED_IN`: each class here declares
them, so Airflow accepts them in an operator's call, in ``.partial()`` and in ``default_args``, and keeps the
ones given in ``given_deprecated_arguments``; the operator builds its records from them (:func:`record_of`) with a
warning naming the record to pass instead. A record and its deprecated arguments given together are refused.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, TypeVar

from airflow.exceptions import AirflowProviderDeprecationWarning
from airflow.sdk import BaseOperator

from airflow_provider_eh.deprecation import REMOVED_IN

T = TypeVar("T")


def deprecated_values(operator: BaseOperator, argument: str, record: str, given: object | None,
                      fields: Mapping[str, str], *, requires: tuple[str, ...] = ()) -> dict[str, Any]:
    """
    Those of the deprecated arguments named in ``fields`` (old name -> its field of the record ``record``) that
    ``operator`` was given, by name, with an ``AirflowProviderDeprecationWarning`` naming the record to pass as
    ``argument`` instead; ``{}`` when none was given.

    :param requires: deprecated arguments of which one must be given for the others to count; the others alone
        (a connection id in ``default_args``, say) are ignored, beside a record given or not.
    :raises ValueError: ``given`` (the record) and any of its deprecated arguments given together.
    """
    old: dict[str, Any] = getattr(operator, "given_deprecated_arguments", {})
    used = {name: old[name] for name in fields if name in old}
    if not used or (requires and not any(name in used for name in requires)):
        return {}
    if given is not None:
        raise ValueError(f"Task {operator.task_id!r}: pass {argument}={type(given).__name__}(...) or the deprecated "
                         f"{', '.join(f'{n}=' for n in used)}, not both")
    warnings.warn(f"Task {operator.task_id!r}: {', '.join(f'{n}=' for n in used)} "
                  f"{'is' if len(used) == 1 else 'are'} deprecated and will be removed in {REMOVED_IN}; "
                  f"pass {argument}={record}({', '.join(dict.fromkeys(f'{fields[n]}=...' for n in used if fields[n]))})",
                  AirflowProviderDeprecationWarning, stacklevel=5)
    return used


def record_of(operator: BaseOperator, argument: str, record: type[T], given: T | None,
              fields: Mapping[str, str], *, requires: tuple[str, ...] = ()) -> T | None:
    """
    The record ``argument`` of ``operator``: ``given``, or one built from the deprecated arguments named in
    ``fields`` (old name -> the record's field) that the task was given (:func:`deprecated_values`); ``None``
    when neither.
    """
    used = deprecated_values(operator, argument, record.__name__, given, fields, requires=requires)
    if not used:
        return given
    return record(**{fields[n]: v for n, v in used.items()})


def _keep(operator: BaseOperator, given: Mapping[str, Any]) -> None:
    kept = getattr(operator, "given_deprecated_arguments", None)
    if kept is None:
        kept = {}
        object.__setattr__(operator, "given_deprecated_arguments", kept)
    kept.update({name: value for name, value in given.items() if value is not None})


class DeprecatedSinkArguments(BaseOperator):
    """The flat sink arguments of the ingest and replay operators: now :class:`SqlSink` / :class:`DeltaSink`."""

    given_deprecated_arguments: dict[str, Any]

    def __init__(self, *, table: str | None = None, sql_conn_id: str | None = None,
                 state_table_prefix: str | None = None, wasb_conn_id: str | None = None,
                 dead_letter_table: str | None = None, delta_mode: str | None = None, merge_keys: Any = None,
                 **kwargs: Any) -> None:
        _keep(self, {"table": table, "sql_conn_id": sql_conn_id, "state_table_prefix": state_table_prefix,
                     "wasb_conn_id": wasb_conn_id, "dead_letter_table": dead_letter_table, "delta_mode": delta_mode,
                     "merge_keys": merge_keys})
        super().__init__(**kwargs)


class DeprecatedIngestArguments(BaseOperator):
    """The flat arguments of the ingest operator: now :class:`BlobCheckpoints`, :class:`Ownership`,
    :class:`Batching`, :class:`IngestLimits`, :class:`Sessions` and :class:`DeltaSink`'s ``partition_by``."""

    given_deprecated_arguments: dict[str, Any]

    def __init__(self, *, checkpoint_container: str | None = None, checkpoint_interval: float | None = None,
                 instances: int | None = None, strategy: str | None = None, ownership_expiry: float | None = None,
                 batch_size: int | None = None, batch_bytes: int | None = None, batch_seconds: float | None = None,
                 delta_batch_seconds: float | None = None, max_wait_time: float | None = None,
                 max_events: int | None = None, max_duration: float | None = None, partition_ids: Any = None,
                 stall_timeout: float | None = None, lag_interval: float | None = None, session_key: str | None = None,
                 session_sequence: str | None = None, session_first_sequence: int | None = None,
                 session_end: str | None = None, session_defer_limit: float | None = None,
                 partition_by: Any = None, **kwargs: Any) -> None:
        _keep(self, {name: value for name, value in locals().items() if name not in ("self", "kwargs", "__class__")})
        super().__init__(**kwargs)


class DeprecatedPublishArguments(BaseOperator):
    """The flat arguments of the publishing operators: now :class:`ProducerState`,
    :class:`Delivery` and :class:`EventSchema`."""

    given_deprecated_arguments: dict[str, Any]

    def __init__(self, *, state_backend: str | None = None, wasb_conn_id: str | None = None,
                 state_container: str | None = None, keep_committed: int | None = None,
                 keep_committed_days: float | None = None, lease_seconds: int | None = None,
                 claim_timeout: float | None = None, send_attempts: int | None = None, hub_fencing: Any = None,
                 lease_only_batch_bytes: int | None = None, schema_group: str | None = None,
                 schema_file: str | None = None, schema_name: str | None = None, schema_format: str | None = None,
                 auto_register_schema: bool | None = None, schema_compatibility: str | None = None,
                 **kwargs: Any) -> None:
        _keep(self, {name: value for name, value in locals().items() if name not in ("self", "kwargs", "__class__")})
        super().__init__(**kwargs)


class DeprecatedSparkArguments(BaseOperator):
    """The flat arguments of the Spark publishing operator: now :class:`SparkOutput` and :class:`EventMapping`."""

    given_deprecated_arguments: dict[str, Any]

    def __init__(self, *, path: str | None = None, format: str | None = None, table: str | None = None,
                 read_options: Any = None, body_column: str | None = None, serializer: Any = None,
                 property_columns: Any = None, partition_column: str | None = None, key_column: str | None = None,
                 order_by: Any = None, **kwargs: Any) -> None:
        _keep(self, {name: value for name, value in locals().items() if name not in ("self", "kwargs", "__class__")})
        super().__init__(**kwargs)
