"""Fixtures of the Event Hubs view tests (built in ``ui_kit``)."""

from ui_kit import view_stack  # noqa: F401  (the module-scoped standalone with the view's data)
