"""ir's public names: the literal __all__ static tools read is the table the lazy loader serves."""
from __future__ import annotations

import onnx_dml_lowering.ir as ir


def test_all_is_the_lazy_table():
    assert sorted(ir.__all__) == sorted(["DmlLowerError", *ir._WHERE])
    assert len(set(ir.__all__)) == len(ir.__all__)


def test_every_exported_name_loads():
    for name in ir.__all__:
        assert getattr(ir, name) is not None, name
