"""Fixtures of the publishing tests."""

from __future__ import annotations

from typing import Any

import pytest
from publish_kit import PublishSetup


@pytest.fixture
def setup(event_hubs: Any, azurite: Any, hub: str, container: str) -> PublishSetup:
    """The test's hub and blob container, with helpers to publish into them."""
    return PublishSetup(event_hubs, azurite, hub, container)
