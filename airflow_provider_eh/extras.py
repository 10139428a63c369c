"""The provider's optional extras: a feature that needs one checks it is installed before it starts.

Without the check, the first use of a missing package fails deep inside with a bare ``ModuleNotFoundError``;
with it, the task fails at once with :class:`~airflow_provider_eh.errors.MissingExtraError`, naming the extra
to install.
"""

from __future__ import annotations

import importlib

from airflow_provider_eh.errors import MissingExtraError

#: the modules each extra brings that the package imports
MODULES = {
    "schemaregistry": ("azure.schemaregistry", "azure.schemaregistry.encoder.avroencoder"),
    "deltalake": ("deltalake",),
}


def require_extra(extra: str, feature: str) -> None:
    """Return when every module of ``extra`` imports; else raise :class:`MissingExtraError` naming ``feature``."""
    for module in MODULES[extra]:
        try:
            importlib.import_module(module)
        except ImportError:
            raise MissingExtraError(feature, extra, module) from None
