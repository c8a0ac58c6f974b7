"""One DirectML host for the whole test session (its start-up costs seconds; each operator
milliseconds). Tests using it carry the directml marker: without `make directml` they are skipped
(tests/conftest.py), or fail under DML_LOWER_REQUIRE_DIRECTML=1."""
from __future__ import annotations

import pytest

from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
from onnx_dml_lowering.runtime.directml.home import find_home


@pytest.fixture(scope="session")
def dml_host():
    with DmlHost(find_home()) as host:
        yield host
