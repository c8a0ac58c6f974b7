"""The on / off environment variables are read one way: DML_LOWER_DEBUG=0 turned tracebacks on."""
import pytest

from onnx_dml_lowering.runtime.env_flags import env_flag


@pytest.mark.parametrize("value, on", [("1", True), ("yes", True), ("true", True), ("anything", True),
                                       ("", False), ("0", False), ("false", False), ("FALSE", False),
                                       ("no", False), ("off", False), (" 0 ", False), ("Off", False)])
def test_env_flag(value, on, monkeypatch):
    monkeypatch.setenv("DML_LOWER_TEST_FLAG", value)
    assert env_flag("DML_LOWER_TEST_FLAG") is on
    monkeypatch.delenv("DML_LOWER_TEST_FLAG")
    assert env_flag("DML_LOWER_TEST_FLAG") is False


def test_debug_off_keeps_the_one_line(monkeypatch, capsys):
    """A bug of ours is one line unless DML_LOWER_DEBUG is on: 0 is off."""
    from onnx_dml_lowering.compiler.cli import program
    monkeypatch.setenv("DML_LOWER_DEBUG", "0")
    monkeypatch.setattr(program, "parsed_command", lambda args: (_ for _ in ()).throw(RuntimeError("boom")))
    assert program.main(["capabilities"]) == 3
    assert capsys.readouterr().err.startswith("dml-lower: internal error: RuntimeError: boom")
