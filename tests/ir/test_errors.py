"""ir.errors.brief / first_line: a third-party message quoted in one of our lines keeps what it
says and loses onnxruntime's C++ source locations; a long one keeps its start and its end."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from onnx_dml_lowering.ir.errors import BRIEF_LIMIT, brief, first_line

RESHAPE = ("[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. "
           "Name:'r' Status Message: /onnxruntime_src/onnxruntime/core/providers/cpu/tensor/reshape_helper.h:84 "
           "onnxruntime::ReshapeHelper::ReshapeHelper(const onnxruntime::TensorShape&, "
           "onnxruntime::TensorShapeVector&, bool) size != 0 && (input_shape_size % size) == 0 was false. "
           "The input tensor cannot be reshaped to the requested shape. Input shape:{6}, requested shape:{4,-1}")

CASES = [
    # (message, what the line says)
    (RESHAPE, "[ONNXRuntimeError] : 1 : FAIL : Non-zero status code returned while running Reshape node. "
              "Name:'r' Status Message: The input tensor cannot be reshaped to the requested shape. "
              "Input shape:{6}, requested shape:{4,-1}"),
    # ORT_THROW: a signature with a const qualifier, no failed expression
    ("D:\\a\\_work\\1\\s\\onnxruntime\\core\\session\\inference_session.cc:1234 "
     "onnxruntime::InferenceSession::Initialize() const Exception during initialization: bad",
     "Exception during initialization: bad"),
    # a failed expression with nothing after it stays: it is all there is
    ("/src/a.cc:7 void onnxruntime::f(int) x > 0 was false.", "x > 0 was false."),
    # gcc's template arguments after a constructor's signature go with it; the check stays
    ("Exception during initialization: /onnxruntime_src/onnxruntime/core/providers/cpu/nn/lrn.h:23 "
     "onnxruntime::LRN<T>::LRN(const onnxruntime::OpKernelInfo&) [with T = float] size_ % 2 == 1 was false.",
     "Exception during initialization: size_ % 2 == 1 was false."),
    ("/src/space_depth_ops.h:34 bool onnxruntime::space_depth_internal::ReadIsDCR(const KernelInfoType&) "
     "[with KernelInfoType = onnxruntime::OpKernelInfo] SpaceDepth op: only 'DCR' and 'CRD' modes are supported",
     "SpaceDepth op: only 'DCR' and 'CRD' modes are supported"),
    ("/src/a.h:3 onnxruntime::A<T>::A(int) [with T = float] n > 1 was false. n is 0", "n is 0"),
    # nothing to strip
    ("Fatal error: foo:Bar(-1) is not a registered function/op", "Fatal error: foo:Bar(-1) is not a registered function/op"),
    ("ratio 3.5: see a.h for why", "ratio 3.5: see a.h for why"),
]


@pytest.mark.parametrize("message, said", CASES)
def test_brief_drops_source_locations(message: str, said: str) -> None:
    assert brief(message) == said


def test_long_message_keeps_its_start_and_its_end_cut_between_words() -> None:
    message = "start " + " ".join(f"word{i}" for i in range(200)) + " the reason at the end"
    text = brief(message, 120)
    assert len(text) <= 120
    assert text.startswith("start word0 ") and text.endswith(" the reason at the end")
    head, _, tail = text.partition(" ... ")
    assert all(word in message.split() for word in (head + " " + tail).split())      # no word cut in two


def test_first_line_is_brief_of_the_first_line() -> None:
    assert first_line(RuntimeError("\n  " + RESHAPE + "\nsecond line")) == CASES[0][1]
    assert first_line(ValueError("")) == "ValueError"


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=2000),
       st.integers(min_value=20, max_value=600))
def test_brief_is_one_bounded_line(message: str, limit: int) -> None:
    text = brief(message, limit)
    assert "\n" not in text and len(text) <= limit
    assert len(brief(message)) <= BRIEF_LIMIT
