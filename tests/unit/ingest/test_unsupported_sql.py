"""Ingestion refuses a database it does not support before anything is read, naming what is supported."""

from __future__ import annotations

import json

import pytest

from airflow_provider_eh.errors import SinkConfigError
from airflow_provider_eh.ingest import SqlIngestStore, Stream
from airflow_provider_eh.ingest.sinks.sql.dialects import MysqlDialect, PostgresDialect, SqliteDialect

SUPPORTED = "supported: SQLite (sqlite3); Postgres (psycopg2, psycopg); MySQL/MariaDB (pymysql, MySQLdb)"


class Connection:
    """A DB-API connection of a driver ingestion does not know (SQL Server's pyodbc, here)."""

    def __init__(self):
        self.statements: list[str] = []

    def cursor(self):
        raise AssertionError("an unsupported connection must not be used at all")


Connection.__module__ = "pyodbc"


def test_a_connection_of_an_unsupported_driver_is_refused_before_any_statement():
    with pytest.raises(SinkConfigError) as refused:
        SqlIngestStore(Connection(), Stream("ns", "hub", "$Default"))
    assert str(refused.value) == (
        "SQL connection of type pyodbc.Connection (driver 'pyodbc') is not supported for ingestion; "
        f"{SUPPORTED}. Use a connection to one of those."
    )


def test_an_airflow_connection_of_an_unsupported_type_is_refused_before_it_is_opened(monkeypatch):
    from airflow_provider_eh.operators.ingest_base import _sql_connection

    monkeypatch.setenv("AIRFLOW_CONN_WAREHOUSE", json.dumps({"conn_type": "mssql", "host": "db.invalid"}))
    with pytest.raises(SinkConfigError) as refused:
        _sql_connection("warehouse")
    assert str(refused.value) == (
        "SQL connection 'warehouse' is of type 'mssql', which ingestion does not support; supported connection "
        "types: mysql, postgres, sqlite (SQLite (sqlite3); Postgres (psycopg2, psycopg); MySQL/MariaDB (pymysql, MySQLdb))."
    )


def test_each_dialect_spells_its_upsert():
    cols, keys = ("k", "n", "v"), ("k",)
    updates = {"n": "{old} + 1", "v": "{new}"}
    assert SqliteDialect("sqlite3", "qmark").upsert("t", cols, keys, updates) == (
        "INSERT INTO t (k, n, v) VALUES (?, ?, ?) ON CONFLICT (k) DO UPDATE SET n = t.n + 1, v = excluded.v"
    )
    assert PostgresDialect("psycopg2", "pyformat").insert_ignore("t", cols, keys) == (
        "INSERT INTO t (k, n, v) VALUES (?, ?, ?) ON CONFLICT (k) DO NOTHING"
    )
    mysql = MysqlDialect("pymysql", "pyformat")
    assert mysql.upsert("t", cols, keys, updates) == (
        "INSERT INTO t (k, n, v) VALUES (?, ?, ?) ON DUPLICATE KEY UPDATE n = n + 1, v = VALUES(v)"
    )
    assert mysql.insert_ignore("t", cols, keys) == "INSERT IGNORE INTO t (k, n, v) VALUES (?, ?, ?)"
