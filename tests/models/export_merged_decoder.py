"""Export tests/models/decoders/gpt2.decoder_model_merged.onnx: Optimum's merged decoder form (an If on
use_cache_branch holding the decoder without and with its past, whose branches reuse value names) of
a tiny random GPT-2, for tests/compiler/test_merged_decoders.py.

Not run by the suite (it needs torch). In a scratch venv, never the project's:
    python -m venv /tmp/exportenv
    /tmp/exportenv/bin/pip install /opt/wheels/torch-2.13.0+cpu-*.whl optimum-onnx onnx onnxruntime
    /tmp/exportenv/bin/python tests/models/export_merged_decoder.py
optimum-onnx 0.1 no longer merges when it exports, so the two decoders are TorchScript exports fused
by its optimum.onnx.merge_decoders, as Optimum 1.x wrote decoder_model_merged.onnx (inputs declared
as it declares them: attention_mask with input_ids's `sequence_length`). The TorchScript trace keeps
the export's 3 new tokens in a Reshape of the mask: batch and past length are free, the sequence not."""
from __future__ import annotations

from pathlib import Path

import onnx
import torch
import transformers.masking_utils as masking
from optimum.onnx import merge_decoders
from transformers import GPT2Config, GPT2LMHeadModel
from transformers.cache_utils import DynamicCache

OUT = Path(__file__).parent / "decoders" / "gpt2.decoder_model_merged.onnx"
LAYERS, HEADS, HEAD_DIM = 1, 4, 8

# The TorchScript tracer cannot follow the vmap of the recent mask builder (optimum's own patcher
# swaps it out too): the older-torch builder makes the same mask by broadcasting.
masking.sdpa_mask = masking.sdpa_mask_older_torch
masking.ALL_MASK_ATTENTION_FUNCTIONS._global_mapping["sdpa"] = masking.sdpa_mask_older_torch


def flat(cache) -> tuple:
    return tuple(t for layer in cache.layers[:LAYERS] for t in (layer.keys, layer.values))


class WithoutPast(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=True)
        return (out.logits,) + flat(out.past_key_values)


class WithPast(WithoutPast):
    def forward(self, input_ids, attention_mask, *past):
        cache = DynamicCache()
        for i in range(LAYERS):
            cache.update(past[2 * i], past[2 * i + 1], i)
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, past_key_values=cache, use_cache=True)
        return (out.logits,) + flat(out.past_key_values)


def main() -> None:
    torch.manual_seed(0)
    config = GPT2Config(n_embd=HEADS * HEAD_DIM, n_layer=LAYERS, n_head=HEADS, vocab_size=128, n_positions=32,
                        attn_implementation="eager")
    model = GPT2LMHeadModel(config).eval()
    presents = [f"present.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    pasts = [f"past_key_values.{i}.{kv}" for i in range(LAYERS) for kv in ("key", "value")]
    ids = torch.randint(0, 128, (2, 3))
    axes = {"input_ids": {0: "batch_size", 1: "sequence_length"},
            "attention_mask": {0: "batch_size", 1: "sequence_length"},
            "logits": {0: "batch_size", 1: "sequence_length"}}
    axes.update({p: {0: "batch_size", 2: "past_sequence_length + sequence_length"} for p in presents})
    work = OUT.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    torch.onnx.export(WithoutPast(model).eval(), (ids, torch.ones(2, 3, dtype=torch.int64)),
                      str(work / "decoder_model.onnx"), dynamo=False, opset_version=14,
                      input_names=["input_ids", "attention_mask"], output_names=["logits"] + presents,
                      dynamic_axes=axes)
    past = [torch.randn(2, HEADS, 5, HEAD_DIM) for _ in pasts]
    axes.update({p: {0: "batch_size", 2: "past_sequence_length"} for p in pasts})
    axes["attention_mask"] = {0: "batch_size", 1: "past_sequence_length + 1"}
    torch.onnx.export(WithPast(model).eval(), (ids, torch.ones(2, 8, dtype=torch.int64), *past),
                      str(work / "decoder_with_past_model.onnx"), dynamo=False, opset_version=14,
                      input_names=["input_ids", "attention_mask"] + pasts, output_names=["logits"] + presents,
                      dynamic_axes=axes)
    merge_decoders(str(work / "decoder_model.onnx"), str(work / "decoder_with_past_model.onnx"),
                   save_path=str(work / "merged.onnx"))
    merged = onnx.load(str(work / "merged.onnx"))
    for node in [n for g in [merged.graph] + [a.g for a in merged.graph.node[-1].attribute] for n in g.node]:
        node.doc_string = ""                                      # TorchScript's stack traces
        del node.metadata_props[:]
    onnx.checker.check_model(merged, full_check=True)
    onnx.save(merged, str(OUT))
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    print("wrote", OUT, OUT.stat().st_size, "bytes")


if __name__ == "__main__":
    main()
