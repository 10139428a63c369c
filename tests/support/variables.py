"""Variables over a dict: the Variables store (:class:`~airflow_provider_eh.publishing.variable_store.Variables`)
without Airflow, for tests of the engine and of the upgrade from earlier releases' documents."""

from __future__ import annotations


class DictVariables:
    """``get``, ``set`` and ``delete`` over ``values`` (a new dict when none is given)."""

    def __init__(self, values: dict[str, str] | None = None) -> None:
        self.values: dict[str, str] = {} if values is None else values

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)
