"""The driver side of publishing a Spark job's output: read, prepare, fingerprint, claim, send, commit.

No Airflow import: :class:`SparkPublishJob` takes a ``SparkSession`` and an
:class:`~airflow_provider_eh.publishing.IdempotentPublisher`. Nothing of the dataset reaches the
driver; it only collects one small row per Event Hubs partition in each pass.

1. **Prepare** (executors): each row's partition (its partition column, or its key hashed by
   :func:`~airflow_provider_eh.publishing.partition_for_key`, as the non-Spark path does), body,
   properties and content hash; every row check runs here, before any claim. The rows are then
   repartitioned so that each Event Hubs partition lands in exactly one Spark partition, sorted within
   it by (order columns, content hash), and persisted for the two passes (a lost cached block is
   recomputed to the same order).
2. **Pass 1** (executors): count and fingerprint per partition.
3. **Begin** (driver, partitions concurrently): claim, settle the ledger, write the intent.
4. **Pass 2** (executors, in parallel): send each planned partition; reports come back as data.
5. **Commit** (driver): each partition whose report matches its plan; a failed partition is aborted
   (its intent stays for recovery) and, on a transient error, begun again (read-back) and resent.

Steps 3 to 5 are the engine's one driver loop (:func:`~airflow_provider_eh.publishing.driver.drive`),
the same the local path runs; only the sending is Spark's.
"""

from __future__ import annotations

import logging
import pickle
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any

from airflow_provider_eh.client.connection import held
from airflow_provider_eh.client.failures import site_of
from airflow_provider_eh.errors import EmptyOutputError, OutputNotFoundError, SparkPublishError
from airflow_provider_eh.publishing.driver import Progress, SendOutcome, drive
from airflow_provider_eh.publishing.hold_relay import HoldRelay, address_towards, parse_address
from airflow_provider_eh.spark import executor
from airflow_provider_eh.spark.errors import error_condition, executor_failure, raise_from_spark
from airflow_provider_eh.spark.mapping import HASH_COL, PARTITION_COL, SLOT_COL, RowMapping
from airflow_provider_eh.stamps import batch_stamp

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from airflow_provider_eh.publishing import IdempotentPublisher, PartitionResult, PartitionSession

log = logging.getLogger(__name__)

ON_EMPTY = ("succeed", "fail")


@dataclass(frozen=True)
class SparkSource:
    """
    Where the output is: a path and format, or a table.

    :param path: the materialised output (a directory or file; globs allowed).
    :param format: ``parquet``, ``json``, ``csv``, ``orc`` or ``delta`` (needs ``delta-spark``).
    :param table: a table name instead of a path (``spark.table(name)``).
    :param read_options: options of the reader (``{"header": "true"}`` for csv, ...).
    """

    path: str | None = None
    format: str = "parquet"
    table: str | None = None
    read_options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if bool(self.path) == bool(self.table):
            raise ValueError("give the output's path (with its format) or a table name, exactly one of them")

    def describe(self) -> str:
        return f"table {self.table}" if self.table else f"{self.format} output {self.path}"

    def read(self, spark: SparkSession) -> DataFrame:
        """The output as a DataFrame; a missing path or table raises :class:`OutputNotFoundError`."""
        try:
            if self.table:
                return spark.table(self.table)
            if self.format == "delta":
                require_delta()
            return spark.read.format(self.format).options(**{k: str(v) for k, v in self.read_options.items()}).load(self.path)
        except Exception as exc:
            condition = error_condition(exc)
            if condition in ("PATH_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND") or "Path does not exist" in str(exc):
                raise OutputNotFoundError(
                    f"{self.describe()}: does not exist. Did the upstream Spark job write this interval's output? "
                    "Check the templated path (or table name) against what the job wrote."
                ) from None
            if condition == "DELTA_MISSING_DELTA_TABLE" or "is not a Delta table" in str(exc):
                raise OutputNotFoundError(f"{self.describe()}: is not a Delta table (no _delta_log)") from None
            raise


def require_delta() -> None:
    """Raise a clear error when ``delta-spark`` is not installed."""
    import importlib.util

    if importlib.util.find_spec("delta") is None:
        raise SparkPublishError(
            "format 'delta' needs the delta-spark package: install the provider's `delta` extra "
            "(pip install 'airflow-provider-eh[delta]') where the driver runs, and the Delta jars on the cluster "
            "(spark.jars.packages io.delta:delta-spark_2.13:<version>); or read the table with format='parquet' "
            "from a plain export"
        )


class SparkPublishJob:
    """
    Publish a Spark job's output exactly once, per Event Hubs partition.

    :param spark: the session (the caller owns it).
    :param publisher: the driver side of the protocol (endpoint, state store, producer group).
    :param mapping: row → event.
    :param on_empty: ``"succeed"``: an output without rows publishes nothing and succeeds;
        ``"fail"``: it raises :class:`EmptyOutputError`.
    :param send_attempts: attempts per partition on transient send errors within one run; default: the
        publisher's ``send_attempts`` (the operator's setting), so both paths retry alike.
    :param send_timeout: seconds one SDK batch may take; default: the publisher's.
    :param storage_level: how the prepared rows are persisted between the two passes.
    :param hold_relay: executors check the driver's claim before each SDK batch by asking a relay on
        the driver (:mod:`~airflow_provider_eh.publishing.hold_relay`), so that a stalled driver's executors stop
        by its deadline. ``True`` (default): on the address executors reach the driver at
        (``spark.driver.host``; with Spark Connect, this machine's address towards the server), on a free
        port; a string ``"host"`` or ``"host:port"``: that address (a fixed port for networks that let
        executors reach only known ports); ``False``: no check on the executors (the hub's fencing alone,
        where it offers it).
    """

    def __init__(
        self,
        spark: SparkSession,
        publisher: IdempotentPublisher,
        mapping: RowMapping,
        *,
        on_empty: str = "succeed",
        send_attempts: int | None = None,
        send_timeout: float | None = None,
        storage_level: str = "MEMORY_AND_DISK",
        hold_relay: bool | str = True,
    ):
        if on_empty not in ON_EMPTY:
            raise ValueError(f"on_empty={on_empty!r}: choose 'succeed' (publish nothing) or 'fail'")
        self.spark = spark
        self.publisher = publisher
        self.mapping = mapping
        self.on_empty = on_empty
        self.send_attempts = max(1, publisher.send_attempts if send_attempts is None else send_attempts)
        self.send_timeout = publisher.send_timeout if send_timeout is None else send_timeout
        self.storage_level = storage_level
        if isinstance(hold_relay, str):
            parse_address(hold_relay)  # a bad address fails here, before anything is claimed
        self.hold_relay = hold_relay
        self._relay: HoldRelay | None = None

    # ---- preparing -----------------------------------------------------------------------------

    def partition_ids(self) -> list[str]:
        """The hub's partition ids, checked against the publisher's partition options."""
        return self.publisher.checked_partition_ids()

    def slots(self, partition_ids: list[str]) -> dict[str, int]:
        """
        Per partition a value that Spark's hash partitioning sends to its own Spark partition.

        ``repartition(n, col)`` puts a row in ``pmod(hash(col), n)``; hashing partition ids directly can
        put two of them in one Spark partition (and run them one after the other). Asking Spark which
        small integers land where gives a one-to-one routing.
        """
        from pyspark.sql import functions as F

        n = len(partition_ids)
        probe = self.spark.range(0, 64 * n).select("id", F.expr(f"pmod(hash(id), {n})").alias("p"))
        first = {int(r["p"]): int(r["id"]) for r in probe.groupBy("p").agg(F.min("id").alias("id")).collect()}
        if len(first) < n:
            raise RuntimeError(f"no routing value found for {n - len(first)} of {n} partitions")
        ordered = sorted(partition_ids, key=lambda p: (len(p), p))
        return {pid: first[i] for i, pid in enumerate(ordered)}

    def prepare(self, df: DataFrame, partition_ids: list[str], *, source: str) -> DataFrame:
        """Mapped, routed, sorted and persisted rows: ``(partition, slot, hash, body, order..., properties...)``."""
        from pyspark import StorageLevel
        from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType

        mapping = self.mapping
        mapping.check_schema(df.columns, source=source)
        if not mapping.whole_row:
            df = df.select(*mapping.required_columns())
        kept = mapping.kept_columns()
        schema = StructType(
            [
                StructField(PARTITION_COL, StringType(), False),
                StructField(SLOT_COL, LongType(), False),
                StructField(HASH_COL, BinaryType(), False),
                StructField("__eh_body", BinaryType(), False),
                *(df.schema[c] for c in kept),
            ]
        )
        slots = self.slots(partition_ids)
        mapped = df.mapInArrow(
            partial(executor.map_rows, mapping=mapping, partition_ids=partition_ids, slots=slots, kept=kept), schema
        )
        prepared = mapped.repartition(len(partition_ids), SLOT_COL).sortWithinPartitions(
            PARTITION_COL, *mapping.order_by, HASH_COL
        )
        return prepared.persist(getattr(StorageLevel, self.storage_level))

    def fingerprints(self, prepared: DataFrame) -> dict[str, tuple[int, str]]:
        """Pass 1: ``{partition: (count, fingerprint)}`` over the prepared rows."""
        rows = prepared.mapInArrow(
            partial(executor.fingerprint_rows, mapping=self.mapping),
            "partition string, count long, fingerprint string",
        ).collect()
        out: dict[str, tuple[int, str]] = {}
        for row in rows:
            if row["partition"] in out:
                raise RuntimeError(f"partition {row['partition']}: split over two Spark partitions")
            out[row["partition"]] = (int(row["count"]), row["fingerprint"])
        return out

    def send(self, prepared: DataFrame, sessions: Mapping[str, PartitionSession]) -> dict[str, SendOutcome]:
        """Pass 2: ``{partition: outcome}`` for the sessions' plans, sent by executors in parallel."""
        plans = {pid: s.plan for pid, s in sessions.items()}
        starts = {pid: s.intent_start for pid, s in sessions.items()}
        holds = None if self._relay is None else self._relay.tickets({pid: s.claim for pid, s in sessions.items()})
        rows = prepared.mapInArrow(
            partial(executor.send_rows, mapping=self.mapping, endpoint=self.publisher.endpoint, plans=plans,
                    starts=starts, send_timeout=self.send_timeout, holds=holds),
            "partition string, outcome binary",
        ).collect()
        outcomes = {row["partition"]: pickle.loads(row["outcome"]) for row in rows}
        for pid, outcome in outcomes.items():
            if not isinstance(outcome, SendOutcome):
                raise RuntimeError(f"partition {pid}: the executor sent back a {type(outcome).__name__}, not a SendOutcome")
        return outcomes

    def relay_address(self) -> tuple[str, int] | None:
        """``(host, port)`` the driver's hold relay listens on (port 0: any free one); ``None`` when ``hold_relay=False``."""
        if self.hold_relay is False:
            return None
        if isinstance(self.hold_relay, str):
            return parse_address(self.hold_relay)
        remote = _connect_server(self.spark)
        if remote is not None:  # the client's address on the route to the Connect server
            return address_towards(*remote), 0
        return self.spark.sparkContext.getConf().get("spark.driver.host") or "127.0.0.1", 0

    def _start_relay(self) -> HoldRelay | None:
        address = self.relay_address()
        if address is None:
            log.info("group %s: executors do not check the driver's claim (hold_relay=False)", self.publisher.producer_group)
            return None
        return HoldRelay(*address)

    # ---- the whole -----------------------------------------------------------------------------

    def publish(self, source: SparkSource, batch_id: str) -> dict[str, PartitionResult]:
        """Publish the output of ``source`` exactly once as batch ``batch_id``; per partition its result.

        The driver's requests to the hub (partition ids and ends, fences, read-back) share one
        connection for the whole publish; each executor's Python worker keeps one of its own.
        """
        with held(self.publisher.endpoint):
            return self._publish(source, batch_id)

    def _publish(self, source: SparkSource, batch_id: str) -> dict[str, PartitionResult]:
        started = time.monotonic()
        group, stamp = self.publisher.producer_group, batch_stamp(batch_id)
        partition_ids = self.partition_ids()
        df = source.read(self.spark)
        with raise_from_spark():
            prepared = self.prepare(df, partition_ids, source=source.describe())
        try:
            with raise_from_spark():
                counts = self.fingerprints(prepared)
            total = sum(c for c, _ in counts.values())
            log.info(
                "group %s batch %s: %s has %d rows for %d partitions (%s); fingerprinted in %.1fs",
                group, stamp, source.describe(), total, len(counts),
                ", ".join(f"{p}: {c}" for p, (c, _) in sorted(counts.items(), key=lambda i: (len(i[0]), i[0]))),
                time.monotonic() - started,
            )
            if total == 0:
                if self.on_empty == "fail":
                    raise EmptyOutputError(
                        f"{source.describe()}: the output has no rows; nothing to publish. on_empty='fail' makes that "
                        "an error; check the upstream job, or set on_empty='succeed' to publish nothing and succeed."
                    )
                log.info("group %s batch %s: %s has no rows; nothing published (on_empty='succeed')",
                         group, stamp, source.describe())
                return {}
            self._relay = self._start_relay()
            results = self._run(prepared, batch_id, counts)
        finally:
            if self._relay is not None:
                self._relay.close()
                self._relay = None
            prepared.unpersist()
        log.info("group %s batch %s: %d partitions, %d events done in %.1fs",
                 group, stamp, len(results), sum(r.events for r in results.values()), time.monotonic() - started)
        return results

    def _run(self, prepared: DataFrame, batch_id: str, counts: dict[str, tuple[int, str]]) -> dict[str, PartitionResult]:
        """The engine's driver loop over all partitions, the sends done by one Spark job per attempt."""
        group, stamp = self.publisher.producer_group, batch_stamp(batch_id)

        def send(sessions: Mapping[str, PartitionSession], producer: Any) -> Mapping[str, SendOutcome]:
            with raise_from_spark():
                return self.send(prepared, sessions)

        site = site_of(self.publisher.endpoint)  # the connection the endpoint was read from

        def failure(pid: str, outcome: SendOutcome, progress: Progress) -> BaseException:
            mapped = executor_failure(outcome.error_type, outcome.message, site)
            if mapped is not None:  # an SDK or network error: the map's words and class (as the cause)
                error = SparkPublishError(f"group {group} batch {stamp}: partition {pid} failed to send: {mapped} "
                                          f"{progress.sentence(mapped.retryable)}", retryable=mapped.retryable)
                error.conn_id, error.__cause__ = mapped.conn_id, mapped
                return error
            return SparkPublishError(
                f"group {group} batch {stamp}: partition {pid} failed to send ({outcome.error_type}: {outcome.message}). "
                f"{progress.sentence(outcome.retryable)}", retryable=outcome.retryable,
            )

        return drive(self.publisher, batch_id, counts, send, attempts=self.send_attempts, failure=failure)


def _connect_server(spark: Any) -> tuple[str, int] | None:
    """``(host, port)`` of a Spark Connect session's server; ``None`` for a classic session."""
    if not type(spark).__module__.startswith("pyspark.sql.connect"):
        return None
    client = spark.client
    host = getattr(client, "host", None)
    if not isinstance(host, str):
        return None
    endpoint = str(getattr(getattr(client, "_builder", None), "endpoint", ""))
    port = endpoint.rsplit(":", 1)[1] if ":" in endpoint else ""
    return host.strip("[]"), int(port) if port.isdigit() else 15002
