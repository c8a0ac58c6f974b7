"""The copies onnxruntime 1.24.4 inserts around If / Loop bodies, as measured on its real DML EP
(Mask R-CNN: 48 predicted before, 46 real): a value a body reads from outside is not copied for
the control-flow node, whichever provider has it (a CPU Loop, the DML EP's If); inside the body
that value is copied to DML only when nodes of both providers read it there, as a graph input is.
The models are tests/models/dml_ep/{loop,if}_reads_outer.onnx (make_models.py)."""
import re
from collections import Counter

import onnx
import pytest

from onnx_dml_lowering.compiler.ep.placement import CPU, DML, predict_placement
from onnx_dml_lowering.lowering.onnx_graphs import graph_attributes
from tests.paths import REPO

MODELS = REPO / "tests" / "models" / "dml_ep"
NAMES = ["loop_reads_outer", "if_reads_outer"]


def predicted(name):
    return predict_placement(onnx.load(str(MODELS / f"{name}.onnx")), None)


def control_flow_nodes(model):
    return {n.name for n in model.graph.node if list(graph_attributes(n))}


@pytest.mark.parametrize("name", NAMES)
def test_no_copy_is_made_for_a_control_flow_node_reading_a_value_in_its_body(name):
    model = onnx.load(str(MODELS / f"{name}.onnx"))
    report = predicted(name)
    explicit = {i for n in model.graph.node for i in n.input}
    flow = control_flow_nodes(model)
    for copy in report["copies"]:
        assert not (set(copy["to"]) & flow and copy["value"] not in explicit), copy


@pytest.mark.parametrize("name", NAMES)
def test_an_outer_value_read_by_both_sides_in_a_body_is_copied_there(name):
    report = predicted(name)
    providers = {n["node"]: n["provider"] for n in report["nodes"]}
    inside = [c for c in report["copies"] if c["from"].startswith("outer value")]
    assert inside, report["copies"]
    for copy in inside:
        body = copy["to"][0].rsplit("/", 1)[0] + "/"
        readers = [n for n in providers if n.startswith(body)]
        assert {providers[n] for n in readers} >= {CPU, DML}
        assert copy["copy"] == "MemcpyFromHost" and all(providers[t] == DML for t in copy["to"])


_COPY = re.compile(r"^  (MemcpyToHost|MemcpyFromHost) \(")


def real_copies(path):
    """The Memcpy nodes the real DML EP's session inserted, by kind (from its placement log)."""
    from onnx_dml_lowering.runtime.directml import placement_log
    from onnx_dml_lowering.runtime.directml.ort_dml import HostOptions, create, shared_host
    session = create(shared_host(), str(path), HostOptions(optimization_level="disable"), onnx.load(str(path)))
    found = [_COPY.match(placement_log.message(line)) for line in session.session.log.splitlines()]
    return Counter(m.group(1) for m in found if m)


@pytest.mark.directml
@pytest.mark.parametrize("name", NAMES)
def test_the_predicted_copies_are_the_real_eps(name, capsys):
    from tests.cli_runner import cli
    path = MODELS / f"{name}.onnx"
    report = predicted(name)
    assert Counter(c["copy"] for c in report["copies"]) == real_copies(path)
    code, out, err = cli(["inspect", path, "--ep", "dml", "--verify"], capsys)
    assert code == 0, err
    total = sum(1 for n in report["nodes"] if n["provider"] != "removed")
    assert f"{total} of {total} nodes agree" in out
