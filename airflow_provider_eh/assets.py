"""The ``eventhubs`` asset URI scheme, registered with Airflow through the provider metadata (``asset-uris``).

``eventhubs://<fully qualified namespace>/<hub>`` names one hub. Airflow passes every such URI through
:func:`sanitize_uri`, which normalises the namespace as :mod:`airflow_provider_eh.lineage` does (lower
case; ``host:port`` kept for the local endpoint), so ``Asset("eventhubs://NS.servicebus.windows.net/orders")``
written by hand and the asset the provider names for that hub are one asset, and both map to the
OpenLineage dataset the operators report.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_eh.lineage import EVENT_HUBS_SCHEME, eventhub_dataset, eventhub_uri

if TYPE_CHECKING:
    from urllib.parse import SplitResult

    from airflow.sdk import Asset

_FORM = f"{EVENT_HUBS_SCHEME}://<namespace>/<hub>, e.g. {EVENT_HUBS_SCHEME}://mynamespace.servicebus.windows.net/orders"


def _hub(uri: SplitResult) -> tuple[str, str]:
    """``(namespace, hub)`` as the lineage names them; a URI without both is refused with the expected form."""
    hub = uri.path.strip("/")
    if not uri.netloc or not hub or "/" in hub:
        raise ValueError(f"Asset URI {uri.geturl()!r}: an Event Hubs asset URI names one hub: {_FORM}")
    return eventhub_dataset(uri.netloc, hub)


def sanitize_uri(uri: SplitResult) -> SplitResult:
    """Airflow's normaliser for the ``eventhubs`` scheme: the namespace lower-cased, one hub in the path."""
    namespace, hub = _hub(uri)
    return uri._replace(netloc=namespace.split("://", 1)[1], path=f"/{hub}")


def create_asset(*, fully_qualified_namespace: str, eventhub_name: str, extra: dict[str, Any] | None = None) -> Asset:
    """The asset of one hub, as the provider names it."""
    from airflow.sdk import Asset

    return Asset(uri=eventhub_uri(fully_qualified_namespace, eventhub_name), extra=extra)


def convert_asset_to_openlineage(asset: Asset, lineage_context: Any) -> Any:
    """The OpenLineage dataset of an ``eventhubs`` asset: the one the operators report for that hub."""
    from urllib.parse import urlsplit

    from airflow.providers.common.compat.openlineage.facet import Dataset

    namespace, hub = _hub(urlsplit(asset.uri))
    return Dataset(namespace=namespace, name=hub)
