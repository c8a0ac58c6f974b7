"""Real architectures exported by torch 2.13 (tests/models/real/, written by
tests/models/export_real_models.py): compiled, placed, and checked against ONNX semantics at
shapes other than the export's (batch 3, sequence 6; Mixtral batch 3, sequence 11; images 320x320
and 256x256)."""
from pathlib import Path

import numpy as np
import onnx
import pytest

from onnx_dml_lowering.compiler import DmlLowerError, compile_model
from onnx_dml_lowering.runtime.check import Tolerances, check
from onnx_dml_lowering.runtime.feeds import random_feeds

REAL = Path(__file__).parent.parent / "models" / "real"
MODELS = sorted(REAL.glob("*.onnx"))
DETECTORS = [p for p in MODELS if p.name.startswith(("ssdlite", "mask_rcnn"))]
# The TorchScript MoE graph unrolls the experts hit at trace time: it runs only on feeds that route
# a token to every expert (the export notes), so it has its own tests below.
MOE_TORCHSCRIPT = REAL / "mixtral.torchscript.onnx"
LANGUAGE = [p for p in MODELS if p not in DETECTORS and p != MOE_TORCHSCRIPT]
TOLERANCES = Tolerances(atol=1e-5, rtol=1e-4)

# numpy warnings from onnx.reference on what the models compute by design: T5's relative-position
# buckets take log(0) and cast the -inf before a Where discards it; a left-padded row's first
# query sees no key, so its Softmax row is all -inf.
pytestmark = [
    pytest.mark.filterwarnings("ignore:divide by zero encountered in log:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in cast:RuntimeWarning"),
    pytest.mark.filterwarnings("ignore:invalid value encountered in subtract:RuntimeWarning"),
]



def nodes(graph: onnx.GraphProto):
    """Nodes of the graph and of every If / Loop / Scan body."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from nodes(sub)


def test_real_models_are_present_and_small():
    names = {p.name for p in MODELS}
    for arch in ("gpt2", "llama", "bert", "t5_encoder", "mistral_sliding", "mixtral"):
        assert {f"{arch}.dynamo.onnx", f"{arch}.torchscript.onnx"} <= names
    assert [p.name for p in DETECTORS] == ["mask_rcnn_mobilenet_v3.torchscript.onnx",
                                           "ssdlite320_mobilenet_v3.torchscript.onnx"]
    assert sum(p.stat().st_size for p in MODELS) < 20 * 2**20
    listed = (REAL / "MODELS.md").read_text()
    assert all(f"`{p.name}`" in listed for p in MODELS)


@pytest.mark.parametrize("path", MODELS, ids=lambda p: p.stem)
def test_placement_lists_every_nonzero_and_eyelike(path):
    model = onnx.load(str(path))
    wanted = {n.name: n.op_type for n in nodes(model.graph) if n.op_type in ("NonZero", "EyeLike")}
    if path in DETECTORS or path.name.startswith("mixtral"):
        # detectors' post-processing selects by score; the MoE routes tokens with one NonZero per expert
        assert any(op == "NonZero" for op in wanted.values()), "the model's NonZero are not found"
    placement = compile_model(model).placement
    listed = [name for p in placement for name in p.onnx_nodes if name in wanted]
    assert sorted(listed) == sorted(wanted), placement
    assert all(p.status == "lowered" for p in placement if set(p.onnx_nodes) & set(wanted)), placement


def run_check(path: Path, feeds: "dict[str, np.ndarray]") -> None:
    compiled = compile_model(path)
    _, report = check(compiled, feeds, ["cpu", "ort-cpu"], TOLERANCES)
    assert report.oracle["kind"] == "hybrid"
    details = [(o.backend, o.output, o.status, o.detail) for b in report.backends for o in b.outputs
               if o.status != "match"]
    assert report.ok, ([b.error for b in report.backends], details)


LANGUAGE_PARAMS = [pytest.param(p, id=p.stem) for p in LANGUAGE]


@pytest.mark.parametrize("path", [p for p in LANGUAGE if p.name.startswith("bert")], ids=lambda p: p.stem)
def test_bert_needs_the_hybrid_oracle(path):
    """onnx.reference's GatherElements fails on BERT's token_type_ids (an Expand of a [1, positions]
    buffer): the whole-model reference oracle says so in one line; the default hybrid oracle runs
    GatherElements on onnxruntime and checks the model (test_language_model_* above)."""
    compiled = compile_model(path)
    feeds = random_feeds(compiled.inputs, seed=0, dims={"batch": 2, "sequence": 5})
    with pytest.raises(DmlLowerError, match=r"onnx.reference cannot evaluate node '[^']+' \(GatherElements\)"):
        check(compiled, feeds, ["cpu"], TOLERANCES, oracle="reference")


@pytest.mark.parametrize("path", LANGUAGE_PARAMS)
def test_language_model_matches_onnx_with_random_feeds(path):
    """What `dml-lower check M --dim batch=2 --dim sequence=5` runs."""
    compiled = compile_model(path)
    run_check(path, random_feeds(compiled.inputs, seed=0, dims={"batch": 2, "sequence": 5}))


@pytest.mark.parametrize("path", LANGUAGE_PARAMS)
def test_language_model_matches_onnx_with_padded_batch(path):
    """Token ids within the vocabulary and a 0/1 mask with one left- and one right-padded row."""
    rng = np.random.default_rng(1)
    mask = np.ones((2, 7), np.int64)
    mask[0, -3:] = 0
    mask[1, :2] = 0
    run_check(path, {"input_ids": rng.integers(0, 128, (2, 7)), "attention_mask": mask})


@pytest.mark.parametrize("path", DETECTORS, ids=lambda p: p.stem)
def test_detector_matches_onnx_at_another_image_size(path):
    compiled = compile_model(path)
    run_check(path, random_feeds(compiled.inputs, seed=0, dims={"height": 240, "width": 200}))


def test_mask_rcnn_pastes_masks_through_its_loop():
    """Paste-masks is a Loop over the detections: at 240x200 the masks come out at the image's size,
    not the export's, with one per detection."""
    compiled = compile_model(REAL / "mask_rcnn_mobilenet_v3.torchscript.onnx")
    feeds = random_feeds(compiled.inputs, seed=0, dims={"height": 240, "width": 200})
    _, report = check(compiled, feeds, ["cpu"], TOLERANCES)
    assert report.ok, report
    boxes, masks = report.expected["boxes"], report.expected["masks"]
    assert masks.shape == (boxes.shape[0], 1, 240, 200) and boxes.shape[0] > 0


def spread_tokens(batch: int, sequence: int) -> "dict[str, np.ndarray]":
    """Token ids spread over the whole vocabulary (every expert is routed a token), one padded row."""
    ids = (np.arange(batch * sequence) * 128 // (batch * sequence)).reshape(batch, sequence).astype(np.int64)
    mask = np.ones((batch, sequence), np.int64)
    mask[-1, -2:] = 0
    return {"input_ids": ids, "attention_mask": mask}


@pytest.mark.parametrize("shape", [(2, 9), (1, 16)])
def test_torchscript_moe_matches_onnx_on_feeds_routing_to_every_expert(shape):
    run_check(MOE_TORCHSCRIPT, spread_tokens(*shape))


def test_torchscript_moe_on_feeds_missing_an_expert_is_one_line_error():
    """One token repeated routes to 2 of the 4 experts: the graph traced for every expert cannot run
    (onnxruntime fails the same way); check says which node in one line instead of a traceback."""
    compiled = compile_model(MOE_TORCHSCRIPT)
    feeds = {"input_ids": np.full((2, 5), 7, np.int64), "attention_mask": np.ones((2, 5), np.int64)}
    with pytest.raises(DmlLowerError, match=r"cannot evaluate node '/model/layers\.\d/mlp/experts/[^']+'"):
        check(compiled, feeds, ["cpu"], TOLERANCES)
