"""Shared test setup: strict (poison) emulation everywhere, seeded randomness.

Model builders live in tests/builders.py, the oracle and the comparison rule in tests/oracle.py."""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest
from hypothesis import settings

# Still importable from here for tests written against the old location.
from tests.builders import single_node_model  # noqa: F401

os.environ.setdefault("DML_LOWER_STRICT", "1")

# A test not marked directml sees no DirectML setup, whether or not this machine has one, so what it
# checks (ort-dml as one UNAVAILABLE line, the zoo's verdicts, the transcripts) is the same on every
# machine; a directml test gets the real one back (pytest_runtest_setup). Set at import: module
# fixtures and the subprocesses they start see it too.
_HOME_ENV = "DML_LOWER_DIRECTML_HOME"
_REAL_DIRECTML_HOME = os.environ.get(_HOME_ENV)
_NO_DIRECTML_HOME = os.path.join(tempfile.gettempdir(), f"dml-lower-tests-{os.getpid()}-no-directml-setup")
os.environ[_HOME_ENV] = _NO_DIRECTML_HOME

settings.register_profile("ci", max_examples=60, deadline=None, derandomize=True)
settings.register_profile("thorough", max_examples=5000, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture
def rng():
    return np.random.default_rng(20261121)


def pytest_runtest_setup(item):
    """Tests marked directml need `make directml`: skipped with one line naming it where the setup
    is absent, a failure instead under DML_LOWER_REQUIRE_DIRECTML=1 (make directml-check)."""
    if item.get_closest_marker("directml") is None:
        return
    if _REAL_DIRECTML_HOME is None:
        os.environ.pop(_HOME_ENV, None)
    else:
        os.environ[_HOME_ENV] = _REAL_DIRECTML_HOME
    from onnx_dml_lowering.runtime.directml.home import DirectMLUnavailable, find_home
    try:
        find_home()
    except DirectMLUnavailable as exc:
        if os.environ.get("DML_LOWER_REQUIRE_DIRECTML") == "1":
            pytest.fail(f"DML_LOWER_REQUIRE_DIRECTML=1: {exc}", pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(autouse=True)
def _no_shared_host_where_unmarked(request, monkeypatch):
    """A test not marked directml starts no ort_host of its own (one left by a directml test is
    set aside for it and back after)."""
    if request.node.get_closest_marker("directml") is None:
        from onnx_dml_lowering.runtime.directml import ort_dml
        monkeypatch.setattr(ort_dml, "_shared", [])
    yield


def pytest_runtest_teardown(item):
    os.environ[_HOME_ENV] = _NO_DIRECTML_HOME


@pytest.fixture(scope="session")
def dml_host():
    """One DirectML host for the whole session (its start-up costs seconds, each operator
    milliseconds), for tests marked directml."""
    from onnx_dml_lowering.runtime.directml.dml_host import DmlHost
    from onnx_dml_lowering.runtime.directml.home import find_home
    with DmlHost(find_home()) as host:
        yield host
