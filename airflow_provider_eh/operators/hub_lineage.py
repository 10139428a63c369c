"""The operators' one OpenLineage method, and where a task's hub is noted for its errors.

:class:`HubLineage`: the hub (known once the task resolved its connection) is an output of the publishing
operators and an input of the ingest operators; remembering it also names it as the site of the SDK's errors
in the task, once the operator hands itself to its error mapping
(``airflow_errors(self.task_id, self)``: :func:`~airflow_provider_eh.operators.task_errors.airflow_errors`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from airflow_provider_eh.client.failures import FailureSite
from airflow_provider_eh.lineage import eventhub_dataset
from airflow_provider_eh.operators.task_errors import TaskSites

if TYPE_CHECKING:
    from airflow_provider_eh.client.endpoint import EventHubsEndpoint


def operator_lineage(inputs: Iterable[tuple[str, str]], outputs: Iterable[tuple[str, str]]) -> Any:
    """An OpenLineage ``OperatorLineage`` of ``(namespace, name)`` datasets (needs the OpenLineage provider)."""
    from airflow.providers.common.compat.openlineage.facet import Dataset
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage(
        inputs=[Dataset(namespace=ns, name=name) for ns, name in inputs],
        outputs=[Dataset(namespace=ns, name=name) for ns, name in outputs],
    )


class HubLineage(TaskSites):
    """
    Mixin of the operators that publish to or read from one hub: their OpenLineage facets, and the hub as the site
    of their SDK errors (:class:`~airflow_provider_eh.operators.task_errors.TaskSites`).

    The operator sets ``_lineage_hub = None`` in its ``__init__`` and calls :meth:`remember_hub` once
    it has the endpoint; :meth:`lineage_inputs` and :meth:`lineage_outputs` add what else it reads
    or writes.
    """

    hub_role: ClassVar[Literal["input", "output"]]
    _lineage_hub: tuple[str, str] | None
    event_hubs_conn_id: str

    #: what already happened when a task of the role fails on the hub, for the error's message
    FAILED_SO_FAR: ClassVar[dict[str, str]] = {
        "output": "What this try committed stays recorded in the producer state: a later try (a retry, or the task "
                  "cleared once the setting is fixed) resumes and sends each event once.",
        "input": "Batches this try committed stay committed with their SQL checkpoints: a later try resumes after "
                 "them.",
    }

    def remember_hub(self, endpoint: EventHubsEndpoint) -> None:
        """Report ``endpoint``'s hub in this task's lineage, and as where its SDK errors happen
        (:func:`~airflow_provider_eh.operators.task_errors.airflow_errors`)."""
        self._lineage_hub = (endpoint.fully_qualified_namespace, endpoint.eventhub_name)
        self.remember_site(FailureSite.of_endpoint(self.event_hubs_conn_id, endpoint,
                                                   done=self.FAILED_SO_FAR[self.hub_role]))

    def lineage_inputs(self) -> list[tuple[str, str]]:
        """``(namespace, name)`` of what the task reads besides the hub; none by default."""
        return []

    def lineage_outputs(self) -> list[tuple[str, str]]:
        """``(namespace, name)`` of what the task writes besides the hub; none by default."""
        return []

    def get_openlineage_facets_on_complete(self, task_instance: Any) -> Any:
        """OpenLineage datasets (called only with the OpenLineage provider installed)."""
        hub = [eventhub_dataset(*self._lineage_hub)] if self._lineage_hub else []
        return operator_lineage(
            inputs=(hub if self.hub_role == "input" else []) + self.lineage_inputs(),
            outputs=(hub if self.hub_role == "output" else []) + self.lineage_outputs(),
        )
