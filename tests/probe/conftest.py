from __future__ import annotations

import json

import pytest

from probe_support import SCHEMA_PATH


@pytest.fixture(scope="session")
def inventory_schema() -> dict:
    return json.loads(SCHEMA_PATH.read_text())
