"""Writes the real-model fixtures in tests/models/real/ and their inventory MODELS.md.

Real architectures with random weights and tiny configs (no download): a torchvision SSDlite
detector, whose post-processing is where NonZero comes from, a torchvision Mask R-CNN (its
paste-masks become a Loop), Hugging Face GPT-2, Llama, BERT, T5 (encoder) and a sliding-window
Mistral, whose attention masks are built from Range and comparisons, and a Mixtral mixture of
experts (4 experts, top-2), whose routing is a NonZero per expert. Run by hand in a separate venv (the test suite never imports torch):

    python3 -m venv /work/export-venv
    /work/export-venv/bin/pip install torch==2.13.0 torchvision==0.28.0 transformers onnx onnxscript
    PYTHONPATH=/work/shared/tools /work/export-venv/bin/python tests/models/export_real_models.py

torchvision's compiled ops do not load over the CPU-only torch wheel; `torchvision_cpu_shim`
(from the project's shared tools, on PYTHONPATH) declares them before torchvision is imported.
Everything is seeded: a full rerun with the same package versions writes byte-identical files
(checked). `--only NAME ...` re-exports a subset; the dynamo exporter's internal names can then
differ from a full run's, so regenerate everything before committing.
"""
from __future__ import annotations

import argparse
import collections
import sys
import warnings
from pathlib import Path

import onnx
import torch

try:
    import torchvision_cpu_shim  # noqa: F401  (before torchvision and transformers)
except ImportError:
    raise SystemExit("torchvision_cpu_shim is not importable: put the shared tools folder on PYTHONPATH") from None

import torchvision  # noqa: E402
import transformers  # noqa: E402

OUT = Path(__file__).parent / "real"
BENCH_MODELS = Path(__file__).parent.parent.parent / "benchmarks" / "models"
SEED = 0
# Op types worth tracking: what NonZero / EyeLike and the mask idioms around them are made of.
TRACKED = ["NonZero", "EyeLike", "Trilu", "Range", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
           "Equal", "And", "Or", "Not", "Where", "If", "Loop", "Scan"]

# Export shapes; the checks run at other sizes (batch 2, sequence 5 or 7; other image sizes).
BATCH, SEQUENCE = 3, 6
IMAGE = (3, 320, 320)
MASK_RCNN_IMAGE = (3, 256, 256)
# The TorchScript MoE export unrolls the experts hit at trace time: 33 tokens over the whole
# vocabulary route to every expert.
MOE_BATCH, MOE_SEQUENCE = 3, 11

TINY = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
            intermediate_size=64, max_position_embeddings=64)


def ssdlite() -> torch.nn.Module:
    """SSDlite320 MobileNetV3 at a quarter of its width with 2 classes + background (~2.5 MB).

    Post-processing keeps the per-class `scores > threshold` selections (NonZero) and the
    batched NMS; fewer classes only means fewer unrolled copies of them.
    """
    torch.manual_seed(SEED)
    return torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=3, width_mult=0.25).eval()


def mask_rcnn() -> torch.nn.Module:
    """Mask R-CNN over a quarter-width MobileNetV3 FPN backbone (16 FPN channels), 2 classes +
    background, small heads and proposal counts, images resized to 128 (~0.5 MB).

    Post-processing keeps the RPN's and the box head's score selections (NonZero), the batched NMS
    and paste-masks, which the TorchScript exporter writes as a Loop over the detections."""
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.anchor_utils import AnchorGenerator
    from torchvision.models.detection.backbone_utils import _mobilenet_extractor
    from torchvision.models.detection.faster_rcnn import FastRCNNPredictor, TwoMLPHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads, MaskRCNNPredictor
    from torchvision.ops import misc

    # roi_align binds _has_ops at import, before the shim's patch (torchvision.ops.roi_align is the function).
    sys.modules["torchvision.ops.roi_align"]._has_ops = lambda: True
    torch.manual_seed(SEED)
    mobilenet = torchvision.models.mobilenet_v3_large(weights=None, width_mult=0.25, norm_layer=misc.FrozenBatchNorm2d)
    backbone = _mobilenet_extractor(mobilenet, fpn=True, trainable_layers=6)
    # _mobilenet_extractor's FPN has 256 channels: rebuild it at 16 so the heads stay small.
    fpn = torchvision.ops.FeaturePyramidNetwork(
        [m.in_channels for m in backbone.fpn.inner_blocks.modules() if isinstance(m, torch.nn.Conv2d)],
        16, extra_blocks=torchvision.ops.feature_pyramid_network.LastLevelMaxPool())
    backbone.fpn, backbone.out_channels = fpn, 16
    anchors = AnchorGenerator(((32, 64, 128),) * 3, ((0.5, 1.0, 2.0),) * 3)
    return MaskRCNN(
        backbone, num_classes=None, min_size=128, max_size=128,
        rpn_anchor_generator=anchors, rpn_pre_nms_top_n_test=50, rpn_post_nms_top_n_test=20,
        box_head=TwoMLPHead(16 * 7 * 7, 32), box_predictor=FastRCNNPredictor(32, 3), box_detections_per_img=8,
        mask_head=MaskRCNNHeads(16, [16, 16], 1), mask_predictor=MaskRCNNPredictor(16, 16, 3)).eval()


class LastHiddenState(torch.nn.Module):
    """forward(input_ids, attention_mask) -> last_hidden_state, keyword arguments, no cache."""

    def __init__(self, model: torch.nn.Module, use_cache: bool = True):
        super().__init__()
        self.model = model
        self.use_cache = use_cache

    def forward(self, input_ids, attention_mask):
        kwargs = {"use_cache": False} if self.use_cache else {}
        return self.model(input_ids=input_ids, attention_mask=attention_mask, **kwargs).last_hidden_state


def language_models() -> "dict[str, LastHiddenState]":
    """Tiny configs (hidden 32, 2 layers, vocab 128), random seeded weights, eval mode."""
    t = transformers
    configs = {
        "gpt2": (t.GPT2Model, t.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=4, n_inner=64,
                                             n_positions=64), True),
        "llama": (t.LlamaModel, t.LlamaConfig(**TINY, num_key_value_heads=2), True),
        "bert": (t.BertModel, t.BertConfig(**TINY), True),
        "t5_encoder": (t.T5EncoderModel, t.T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=2,
                                                    num_heads=4, relative_attention_num_buckets=8,
                                                    relative_attention_max_distance=16,
                                                    # sdpa's transposed output trips the dynamo
                                                    # exporter's decomposition (view of a non-contiguous
                                                    # tensor); eager attention exports.
                                                    attn_implementation="eager"), False),
        # A window of 4 < the sequence lengths used: the mask holds the window comparison.
        "mistral_sliding": (t.MistralModel, t.MistralConfig(**TINY, num_key_value_heads=2, sliding_window=4), True),
    }
    models = {}
    for name, (cls, config, use_cache) in configs.items():
        torch.manual_seed(SEED)
        models[name] = LastHiddenState(cls(config), use_cache).eval()  # eval() on the wrapper: no Dropout
    return models


def experts_over_every_expert(self, hidden_states, top_k_index, top_k_weights):
    """transformers' eager experts loop over `expert_hit` (a NonZero of the routed experts), which
    the dynamo exporter cannot trace (data-dependent guard) and the TorchScript one unrolls for the
    experts hit at trace time. Looping over range(num_experts) exports and holds for any routing."""
    final = torch.zeros_like(hidden_states)
    expert_mask = torch.nn.functional.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
    for expert in range(self.num_experts):
        top_k_pos, token_idx = torch.where(expert_mask[expert])
        gate, up = torch.nn.functional.linear(hidden_states[token_idx], self.gate_up_proj[expert]).chunk(2, dim=-1)
        out = torch.nn.functional.linear(self.act_fn(gate) * up, self.down_proj[expert])
        final.index_add_(0, token_idx, (out * top_k_weights[token_idx, top_k_pos, None]).to(final.dtype))
    return final


def mixtral(dynamo: bool) -> "LastHiddenState":
    """Mixtral at the tiny config with 4 experts, top-2. Dynamo: the experts function above;
    TorchScript: transformers' eager loop, valid only for feeds routing to every expert."""
    from transformers.integrations.moe import ALL_EXPERTS_FUNCTIONS
    ALL_EXPERTS_FUNCTIONS.register("every_expert", experts_over_every_expert)
    config = transformers.MixtralConfig(**TINY, num_key_value_heads=2, num_local_experts=4, num_experts_per_tok=2,
                                        experts_implementation="every_expert" if dynamo else "eager")
    torch.manual_seed(SEED)
    return LastHiddenState(transformers.MixtralModel(config)).eval()


def text_inputs(batch: int = BATCH, sequence: int = SEQUENCE) -> "tuple[torch.Tensor, torch.Tensor]":
    generator = torch.Generator().manual_seed(SEED)
    input_ids = torch.randint(0, 128, (batch, sequence), generator=generator)
    if (batch, sequence) == (MOE_BATCH, MOE_SEQUENCE):
        input_ids = torch.arange(batch * sequence).reshape(batch, sequence) * 128 // (batch * sequence)
    attention_mask = torch.ones(batch, sequence, dtype=torch.int64)
    attention_mask[0, -2:] = 0  # one padded row, so the mask is not all ones at export
    return input_ids, attention_mask


def export_language_model(name: str, module: torch.nn.Module, dynamo: bool,
                          shape: "tuple[int, int]" = (BATCH, SEQUENCE)) -> Path:
    path = OUT / f"{name}.{'dynamo' if dynamo else 'torchscript'}.onnx"
    args = text_inputs(*shape)
    names = ["input_ids", "attention_mask"]
    if dynamo:
        batch = torch.export.Dim("batch", min=1, max=32)
        sequence = torch.export.Dim("sequence", min=2, max=32)
        shapes = {n: {0: batch, 1: sequence} for n in names}
        program = torch.onnx.export(module, args, dynamo=True, dynamic_shapes=shapes, input_names=names,
                                    output_names=["last_hidden_state"], opset_version=18, optimize=True)
        program.save(str(path))
        drop_stack_traces(path)
    else:
        axes = {n: {0: "batch", 1: "sequence"} for n in names}
        axes["last_hidden_state"] = {0: "batch", 1: "sequence"}
        torch.onnx.export(module, args, str(path), dynamo=False, opset_version=17, input_names=names,
                          output_names=["last_hidden_state"], dynamic_axes=axes)
    return path


def drop_stack_traces(path: Path) -> None:
    """The dynamo exporter records each node's Python stack (absolute paths, line numbers of this
    script) as metadata: drop it so the files do not depend on where or from which revision they
    were generated. The other metadata (module scopes, FX node) stays."""
    model = onnx.load(str(path))
    for node in all_nodes(model.graph):
        kept = [p for p in node.metadata_props if p.key != "pkg.torch.onnx.stack_trace"]
        del node.metadata_props[:]
        node.metadata_props.extend(kept)
    onnx.save(model, str(path))


def ssdlite_full() -> torch.nn.Module:
    """SSDlite320 MobileNetV3 at full width with torchvision's 91 COCO classes (~14 MB, 180 NonZero):
    the size users bring, for benchmarks/check_bench.py (not the test suite)."""
    torch.manual_seed(SEED)
    return torchvision.models.detection.ssdlite320_mobilenet_v3_large(
        weights=None, weights_backbone=None, num_classes=91).eval()


def export_detection(module: torch.nn.Module, path: "Path | None" = None, image_shape=IMAGE,
                     outputs=("boxes", "scores", "labels")) -> Path:
    """TorchScript exporter only: the dynamo exporter does not take torchvision detectors in torch 2.13."""
    path = path or OUT / "ssdlite320_mobilenet_v3.torchscript.onnx"
    torch.manual_seed(SEED)
    image = torch.rand(*image_shape)
    torch.onnx.export(module, ([image],), str(path), dynamo=False, opset_version=17, input_names=["image"],
                      output_names=list(outputs), dynamic_axes={"image": {1: "height", 2: "width"}})
    return path


def all_nodes(graph: onnx.GraphProto):
    """Nodes of the graph and of every If / Loop / Scan body in it."""
    for node in graph.node:
        yield node
        for attr in node.attribute:
            for sub in ([attr.g] if attr.HasField("g") else []) + list(attr.graphs):
                yield from all_nodes(sub)


def shape_text(vi: onnx.ValueInfoProto) -> str:
    dims = [d.dim_param or str(d.dim_value) for d in vi.type.tensor_type.shape.dim]
    return f"{vi.name}[{','.join(dims)}]"


def inventory_row(path: Path, export_shapes: str) -> str:
    model = onnx.load(str(path))
    nodes = list(all_nodes(model.graph))
    counts = collections.Counter(n.op_type for n in nodes)
    tracked = ", ".join(f"{op} {counts[op]}" for op in TRACKED if counts[op])
    inputs = " ".join(shape_text(vi) for vi in model.graph.input)
    outputs = " ".join(shape_text(vi) for vi in model.graph.output)
    size = path.stat().st_size
    return (f"| `{path.name}` | {size / 1e6:.2f} MB | {len(nodes)} | {tracked or '-'} | "
            f"{export_shapes} | {inputs} -> {outputs} |")


MODELS_MD_HEAD = """# Real exported models

Written by `tests/models/export_real_models.py` (torch {torch}, torchvision {tv}, transformers {tf},
onnx {onnx}); random seeded weights, tiny configs. Node counts include If / Loop bodies. Only the
tracked op types present are listed: {tracked}.

| file | size | nodes | tracked op types | export shapes | declared inputs -> outputs |
|---|---|---|---|---|---|
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", help="model names to export (default: all)")
    only = parser.parse_args().only
    OUT.mkdir(exist_ok=True)
    rows = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not only or "ssdlite" in only:
            path = export_detection(ssdlite())
            print("wrote", path)
        if not only or "ssdlite_full" in only:
            BENCH_MODELS.mkdir(exist_ok=True)
            print("wrote", export_detection(ssdlite_full(), BENCH_MODELS / "ssdlite320_mobilenet_v3_91classes.onnx"))
        for name, module in language_models().items():
            if only and name not in only:
                continue
            for dynamo in (True, False):
                print("wrote", export_language_model(name, module, dynamo))
        if not only or "mask_rcnn" in only:
            print("wrote", export_detection(mask_rcnn(), OUT / "mask_rcnn_mobilenet_v3.torchscript.onnx",
                                            MASK_RCNN_IMAGE, ("boxes", "labels", "scores", "masks")))
        if not only or "mixtral" in only:
            for dynamo in (True, False):
                print("wrote", export_language_model("mixtral", mixtral(dynamo), dynamo, (MOE_BATCH, MOE_SEQUENCE)))
    for path in sorted(OUT.glob("*.onnx")):
        shapes = (f"image {list(IMAGE)}" if path.name.startswith("ssdlite")
                  else f"image {list(MASK_RCNN_IMAGE)}" if path.name.startswith("mask_rcnn")
                  else f"input_ids, attention_mask [{MOE_BATCH}, {MOE_SEQUENCE}]" if path.name.startswith("mixtral")
                  else f"input_ids, attention_mask [{BATCH}, {SEQUENCE}]")
        rows.append(inventory_row(path, shapes))
    head = MODELS_MD_HEAD.format(torch=torch.__version__, tv=torchvision.__version__, tf=transformers.__version__,
                                 onnx=onnx.__version__, tracked=", ".join(TRACKED))
    (OUT / "MODELS.md").write_text(head + "\n".join(rows) + "\n")
    print("wrote", OUT / "MODELS.md")


if __name__ == "__main__":
    main()
