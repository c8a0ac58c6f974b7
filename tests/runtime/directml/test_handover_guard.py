"""The zoo's hand-over of a DirectML host to a check process (dml_host.HANDED_ENV), read without
DirectML: a value set by hand is one line naming the variable, never an internal error."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("value, why", [("garbage", "not '<fd>,<fd>,<hello>'"), ("a,b,c", "not '<fd>,<fd>,<hello>'"),
                                        ("99999,99998,hello", "descriptor 99999 is not a pipe"),
                                        ("1,0,hello", "descriptor 1 is not a pipe"),
                                        ("FILE,PIPE,hello", "descriptor FILE is not a pipe")])
def test_a_bad_handed_over_host_is_one_line_naming_the_variable(value, why, monkeypatch, tmp_path):
    """The zoo's hand-over variable set by hand: one line naming it, and it stays set, so the
    backend's own ask says so again (start_early's ask is not the one reported)."""
    import os

    from onnx_dml_lowering.ir import DmlLowerError
    from onnx_dml_lowering.runtime.directml import dml_host
    with open(tmp_path / "f", "w") as file:
        read_fd, write_fd = os.pipe()
        value = value.replace("FILE", str(file.fileno())).replace("PIPE", str(read_fd))
        why = why.replace("FILE", str(file.fileno()))
        monkeypatch.setenv(dml_host.HANDED_ENV, value)
        try:
            for _ in range(2):
                with pytest.raises(DmlLowerError) as raised:
                    dml_host._handed_over()
                assert str(raised.value).startswith(f"{dml_host.HANDED_ENV}={value}: {why}")
                assert "unset it" in str(raised.value) and "\n" not in str(raised.value)
        finally:
            os.close(read_fd)
            os.close(write_fd)
