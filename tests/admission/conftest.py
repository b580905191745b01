import pytest

from tests.rules.helpers import Run


@pytest.fixture
def run(tmp_path):
    return Run(tmp_path)
