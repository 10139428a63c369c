"""Publish the materialised output of a Spark job to Event Hubs exactly once, per partition, from executors.

The driver (this task) reads the output, claims and plans every Event Hubs partition and commits;
Spark executors map rows to events, fingerprint them and send them, in parallel. Nothing of the
dataset reaches the driver or XCom. See :mod:`airflow_provider_eh.spark.job` for the steps.

**Where Spark runs** comes from the ``spark_default`` connection, read as the Spark provider reads
it: host ``local[*]`` (also the default when the connection does not exist), ``spark://host:7077``,
``yarn``, ``k8s://https://host:443``, or a ``spark_connect`` connection / ``sc://host:15002`` host for
Spark Connect. Extras ``queue``, ``namespace``, ``principal`` and ``keytab`` become the matching
``spark.*`` properties; ``spark_conf`` is merged on top. The session runs in client mode inside the
task; a session built here is stopped at the end, an already active one is left running. A master
URL needs a Spark distribution and Java in the task (the ``spark`` extra); Spark Connect needs only
``pyspark-client``, and settings its server fixes at start are not sent but named in one warning.

**Shipping the package to executors.** Executors import ``airflow_provider_eh`` (with ``azure-eventhub``
and ``pyarrow``) to build and send events. Either install the provider in the cluster's image
(``pip install airflow-provider-eh`` in every executor's Python), or ship the wheel with the job under a
``.zip`` name (Spark puts only ``.zip``, ``.egg`` and ``.jar`` files on the workers' ``sys.path``):
``spark_conf={"spark.submit.pyFiles": "/opt/wheels/airflow_provider_eh-<version>.zip"}``
(the same as ``spark-submit --py-files``); its dependencies (``azure-eventhub``) must then be in the
executors' environment already, e.g. from a packed virtualenv given as ``spark.archives``. With
Spark Connect the server's executors need the package installed. Executors reach the hub with the
credential of the ``azure_event_hubs`` connection (it is pickled into the tasks, never logged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.lineage import path_dataset
from airflow_provider_eh.operators.base_publish import BasePublishOperator
from airflow_provider_eh.operators.deprecated_arguments import DeprecatedSparkArguments, record_of
from airflow_provider_eh.operators.settings import Delivery, EventMapping, EventSchema, ProducerState, SparkOutput

__all__ = ["Delivery", "EventMapping", "EventSchema", "ProducerState", "SparkOutput", "SparkToEventHubOperator",
           "spark_settings"]

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_provider_eh.publishing import IdempotentPublisher
    from airflow_provider_eh.spark.job import SparkPublishJob
    from airflow_provider_eh.spark.mapping import RowMapping
    from airflow_provider_eh.spark.session import SparkSettings


def spark_settings(spark_conn_id: str, spark_conf: Mapping[str, Any] | None = None) -> SparkSettings:
    """Where Spark runs, from a ``spark`` or ``spark_connect`` connection; ``local[*]`` when it does not exist."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook
    from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook
    from airflow.providers.common.compat.sdk import AirflowNotFoundException

    from airflow_provider_eh.spark.session import SparkSettings

    conf: dict[str, Any] = {}
    try:
        conn = SparkSubmitHook.get_connection(spark_conn_id)
    except AirflowNotFoundException:
        return SparkSettings(master="local[*]", conf=dict(spark_conf or {}))
    host = conn.host or ""
    if conn.conn_type == "spark_connect" or host.startswith("sc://"):
        return SparkSettings(remote=SparkConnectHook(spark_conn_id).get_connection_url(), conf=dict(spark_conf or {}))
    # as SparkSubmitHook._resolve_connection: a full master URL in the host, else <conn type>://host
    if conn.conn_type == "spark" and host and ("://" in host or not conn.port):
        master = host
    else:
        master = f"{conn.conn_type}://{host}"
    if conn.port:
        master = f"{master}:{conn.port}"
    extra = conn.extra_dejson
    if extra.get("deploy-mode") == "cluster":
        raise ValueError(
            f"Spark connection {spark_conn_id!r}: deploy-mode 'cluster' is not possible here; the publishing "
            "driver runs inside the Airflow task (client mode). Remove deploy-mode from the connection."
        )
    for name, key in (("queue", "spark.yarn.queue"), ("namespace", "spark.kubernetes.namespace"),
                      ("principal", "spark.kerberos.principal"), ("keytab", "spark.kerberos.keytab")):
        if extra.get(name):
            conf[key] = extra[name]
    return SparkSettings(master=master, conf={**conf, **dict(spark_conf or {})})


#: deprecated flat argument -> its field of the record that replaced it
OUTPUT_ARGUMENTS = {"path": "path", "format": "format", "table": "table", "read_options": "read_options"}
MAPPING_ARGUMENTS = {"body_column": "body", "serializer": "serializer", "property_columns": "properties",
                     "partition_column": "partition", "key_column": "key", "order_by": "order_by"}


class SparkToEventHubOperator(BasePublishOperator, DeprecatedSparkArguments):
    """
    Publish the output of an upstream Spark job to one hub, each row exactly once, sent by Spark executors.

    Each row becomes one event (:class:`EventMapping`): its body is the ``body`` column, or ``serializer(row_dict)``,
    or the row as JSON; the ``properties`` columns become application properties. Its partition is the
    ``partition`` column, or the ``key`` column hashed by the provider's documented stable hash (the same as
    ``partition_key`` in :class:`~airflow_provider_eh.operators.publish.EventHubPublishOperator`). Each partition's
    events are ordered by ``order_by``, ties broken by a hash of the event, so every retry sends the same batch.

    Returns (XCom) per partition ``{events, first_seq, last_seq, service_last_sequence_number, fencing,
    lease_only_batch_bytes, status, landed, resent, readback_seconds}``: ``fencing`` is ``"hub"`` or ``"lease"``,
    the fence that held the send, ``lease_only_batch_bytes`` the most bytes of one SDK batch under ``"lease"``
    (``None`` under ``"hub"``), ``status`` ``"published"``, ``"recovered"`` or ``"already_committed"``, and
    ``landed``, ``resent`` and ``readback_seconds`` what settling a batch in doubt found, sent and took.

    :param output: :class:`SparkOutput`: the files (a path and a format) or the table to publish.
    :param mapping: :class:`EventMapping`: how each row becomes one event.
    :param spark_conn_id: the ``spark`` or ``spark_connect`` connection (templated).
    :param spark_conf: Spark properties merged over the connection's.
    :param on_empty: an output without rows: ``"succeed"`` publishes nothing and succeeds (returns ``{}``),
        ``"fail"`` fails the task.
    :param hold_relay: the executors confirm the task's claim on each partition before every SDK batch
        by asking the task's process (a small TCP listener), so that a stalled task's executors stop
        when its claim may have run out. ``True`` (default): listen where the executors reach the driver
        (``spark.driver.host``; with Spark Connect, this machine's address towards the server), on a free
        port; ``"host"`` or ``"host:port"``: listen and be reached there (a fixed port where a network
        policy lets executors reach only known ports); ``False``: no check on the executors (the hub's
        fencing alone, where the namespace offers idempotent publishing).
    :param schema: :class:`EventSchema`: typed events, as on
        :class:`~airflow_provider_eh.operators.publish.EventHubPublishOperator`: each row's body (the body
        column's value, the serializer's, or the row) is encoded by Microsoft's encoder against the schema,
        which the driver resolves once; the executors encode without asking the registry. Every row is
        encoded while the output is prepared, before any partition is claimed: a row that does not fit
        fails the task naming its key and order columns, the field and the schema version, and nothing is
        sent. (templated)

    The hub, connection, ``state``, producer group, generation and ``delivery`` arguments are
    :class:`~airflow_provider_eh.operators.base_publish.BasePublishOperator`'s. The flat arguments the records
    replaced (``path``, ``format``, ``table``, ``body_column``, ``key_column``, ...) still work, with a deprecation
    warning naming the record to pass (removed in 2.0.0).
    """

    template_fields: Sequence[str] = (
        "path",
        "table",
        "spark_conn_id",
        *BasePublishOperator.template_fields,
    )

    def __init__(
        self,
        *,
        output: SparkOutput | None = None,
        mapping: EventMapping | None = None,
        spark_conn_id: str = "spark_default",
        spark_conf: Mapping[str, Any] | None = None,
        on_empty: str = "succeed",
        hold_relay: bool | str = True,
        **kwargs: Any,
    ):
        super().__init__(**kwargs)
        source = record_of(self, "output", SparkOutput, output, OUTPUT_ARGUMENTS, requires=("path", "table"))
        if source is None:
            raise ValueError(f"Task {self.task_id!r}: pass output=SparkOutput(path=..., format=...) or "
                             "output=SparkOutput(table=...): the output to publish")
        self.path, self.format, self.table, self.read_options = source.path, source.format, source.table, source.read_options
        rows = record_of(self, "mapping", EventMapping, mapping, MAPPING_ARGUMENTS) or EventMapping()
        self.body_column, self.serializer, self.property_columns = rows.body, rows.serializer, rows.properties
        self.partition_column, self.key_column, self.order_by = rows.partition, rows.key, rows.order_by
        self.spark_conn_id = spark_conn_id
        self.spark_conf = spark_conf
        self.on_empty = on_empty
        self.hold_relay = hold_relay
        self._spark: Any = None

    def execute(self, context: Context) -> dict[str, dict[str, int]]:
        from airflow_provider_eh.spark.job import SparkSource, require_delta
        from airflow_provider_eh.spark.mapping import RowMapping
        from airflow_provider_eh.spark.session import get_session

        group = self.resolved_producer_group
        with self.provider_errors(), self.measured():
            if not (self.path or self.table):
                raise ValueError(
                    "no output to publish: `path` (and `format`) or `table` is empty; pass the upstream Spark job's "
                    "output location, e.g. path='/data/orders/{{ ds }}'"
                )
            source = SparkSource(path=self.path or None, format=self.format, table=self.table or None,
                                 read_options=dict(self.read_options or {}))
            encoder = self.row_encoder()  # the schema resolved once, on the driver; executors ask no registry
            mapping = RowMapping(
                body_column=self.body_column, serializer=self.serializer, property_columns=self.property_columns,
                partition_column=self.partition_column, key_column=self.key_column, order_by=self.order_by,
                encoder=encoder,
            )
            settings = spark_settings(self.spark_conn_id, self.spark_conf)
            typed = {} if encoder is None else {"content_type": encoder.content_type, "schema": encoder.used.to_dict()}
            publisher = self.get_publisher(origin=self.origin(context), **typed)
            batch_id = self.batch_id(context, group)
            self.log.info(
                "group %s batch %s: publishing %s to hub %s with Spark (%s) and the %s state backend (attempt %s)",
                group, batch_id[:16], source.describe(), publisher.endpoint.eventhub_name, settings.describe(),
                self.backend, context["ti"].try_number,
            )
            if self.format == "delta" and not self.table:
                require_delta()
                settings = _with_delta(settings)
            spark, owned = get_session(settings)
            self._spark = spark
            try:
                job = self.publish_job(spark, publisher, mapping)
                results = job.publish(source, batch_id)
            finally:
                self._spark = None
                if owned:
                    spark.stop()
        return self.report(batch_id, results)

    def publish_job(self, spark: Any, publisher: IdempotentPublisher, mapping: RowMapping) -> SparkPublishJob:
        """The Spark job of this task: the operator's ``send_attempts`` and ``on_empty`` govern it."""
        from airflow_provider_eh.spark.job import SparkPublishJob

        return SparkPublishJob(spark, publisher, mapping, on_empty=self.on_empty, send_attempts=self.send_attempts,
                               hold_relay=self.hold_relay)

    def on_kill(self) -> None:
        """Cancel the running Spark jobs; claimed partitions keep their intents and the next run recovers them."""
        spark = self._spark
        if spark is None:
            return
        try:
            if hasattr(spark, "interruptAll") and not hasattr(spark, "sparkContext"):
                spark.interruptAll()  # Spark Connect
            else:
                spark.sparkContext.cancelAllJobs()
        except Exception as exc:  # the session may already be gone
            self.log.warning("Task %r: could not cancel the Spark jobs: %s", self.task_id, exc)

    def lineage_inputs(self) -> list[tuple[str, str]]:
        """The Spark output read, for OpenLineage: its path (a table is named as is, without namespace)."""
        if self.path:
            return [path_dataset(self.path)]
        return [("spark", self.table)] if self.table else []


def _with_delta(settings: SparkSettings) -> SparkSettings:
    """Delta's jars, SQL extension and catalog, unless the conf sets them."""
    from dataclasses import replace
    from importlib.metadata import version

    delta = {
        "spark.jars.packages": f"io.delta:delta-spark_2.13:{version('delta-spark')}",
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    }
    return replace(settings, conf={**delta, **dict(settings.conf)})
