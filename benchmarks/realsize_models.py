"""Exports the real-size benchmark models: published architectures at their real configs with
random weights (no download), into a cache folder outside the repository (too large to commit).

    .venv-export/bin/python benchmarks/realsize_models.py [--out DIR] [--only NAME ...]

Run by `make bench-realsize`, which creates `.venv-export` (torch 2.13 CPU, torchvision,
transformers, onnxscript) and puts the shared tools folder (torchvision_cpu_shim) on PYTHONPATH.
A model whose file is already in the cache is not exported again. The first run exports every
model: about 15 minutes and 8 GB of peak memory on a 2-core machine, 6 GB of disk.

Models (TorchScript exporter, opset 17, batch and sequence dynamic; Whisper: dynamo, opset 18, static):
  gpt2            GPT-2 124M (GPT2Config defaults), input_ids + attention_mask -> last_hidden_state
  bert            BERT-base (BertConfig defaults), same inputs
  llama           Llama at TinyLlama-1.1B's widths (hidden 2048, 32 heads, 4 KV heads, MLP 5632,
                  vocab 32000) with 7 of its 22 layers and no LM head: 1.5 GB of float32 weights, inline
  llama_external  the same file with its weights as external data (llama_external.onnx.data)
  gpt2_external   GPT-2's file likewise (gpt2_external.onnx.data)
  whisper_small   Whisper-small encoder-decoder (d_model 768, 12 + 12 layers), input_features +
                  decoder_input_ids -> logits
  mask_rcnn       torchvision Mask R-CNN R50-FPN, 91 classes (its paste-masks are a Loop)
  ssdlite         torchvision SSDlite320 MobileNetV3, 91 classes (180 NonZero in post-processing)

Each model is written with a `<name>.json` beside it: the inputs the benchmark feeds it
(shapes, value ranges) and the model's symbolic dimensions.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import onnx
import torch

try:
    import torchvision_cpu_shim  # noqa: F401  (before torchvision and transformers)
except ImportError:
    raise SystemExit("torchvision_cpu_shim is not importable: put the shared tools folder on PYTHONPATH") from None

import torchvision  # noqa: E402
import transformers  # noqa: E402

SEED = 0
DEFAULT_OUT = Path(os.environ.get("DML_LOWER_REALSIZE", Path.home() / ".cache" / "onnx-dml-lowering" / "realsize"))


class TextEncoder(torch.nn.Module):
    """Hugging Face text model called with keyword arguments, returning last_hidden_state."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask, use_cache=False).last_hidden_state


class BertEncoder(TextEncoder):
    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class WhisperLogits(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_features: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_features=input_features, decoder_input_ids=decoder_input_ids,
                          use_cache=False).logits


def text_model(name: str) -> "tuple[torch.nn.Module, dict]":
    torch.manual_seed(SEED)
    if name == "gpt2":
        model, vocab, wrapper = transformers.GPT2Model(transformers.GPT2Config()), 50257, TextEncoder
    elif name == "bert":
        model, vocab, wrapper = transformers.BertModel(transformers.BertConfig()), 30522, BertEncoder
    else:
        config = transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=7,
                                          num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                          max_position_embeddings=2048)
        model, vocab, wrapper = transformers.LlamaModel(config), 32000, TextEncoder
    sequence = 256 if name == "llama" else 128
    spec = {"inputs": {"input_ids": {"shape": [1, sequence], "dtype": "int64", "range": [0, vocab - 1]},
                       "attention_mask": {"shape": [1, sequence], "dtype": "int64", "range": [1, 1]}},
            "dims": {"batch": 1, "sequence": sequence}}
    return wrapper(model).eval(), spec


def export_text(name: str, path: Path) -> dict:
    module, spec = text_model(name)
    sequence = spec["dims"]["sequence"]
    ids = torch.randint(0, 100, (1, sequence))
    dynamic = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    with torch.no_grad():
        torch.onnx.export(module, (ids, torch.ones_like(ids)), str(path), dynamo=False, opset_version=17,
                          input_names=["input_ids", "attention_mask"], output_names=["last_hidden_state"],
                          dynamic_axes=dynamic)
    return spec


def export_whisper(path: Path) -> dict:
    torch.manual_seed(SEED)
    config = transformers.WhisperConfig(d_model=768, encoder_layers=12, decoder_layers=12,
                                        encoder_attention_heads=12, decoder_attention_heads=12,
                                        encoder_ffn_dim=3072, decoder_ffn_dim=3072, vocab_size=51865,
                                        num_mel_bins=80, max_source_positions=1500, max_target_positions=448)
    module = WhisperLogits(transformers.WhisperForConditionalGeneration(config)).eval()
    features, tokens = torch.rand(1, 80, 3000), torch.randint(0, 100, (1, 8))
    # The TorchScript exporter has no aten::diff (transformers' Whisper uses it): dynamo, static shapes.
    with torch.no_grad():
        torch.onnx.export(module, (features, tokens), str(path), dynamo=True, opset_version=18,
                          input_names=["input_features", "decoder_input_ids"], output_names=["logits"],
                          external_data=False)
    return {"inputs": {"input_features": {"shape": [1, 80, 3000], "dtype": "float32", "range": [-1, 1]},
                       "decoder_input_ids": {"shape": [1, 8], "dtype": "int64", "range": [0, 51864]}},
            "dims": {"batch": 1, "tokens": 8}}


def export_detector(name: str, path: Path) -> dict:
    torch.manual_seed(SEED)
    detection = torchvision.models.detection
    if name == "mask_rcnn":
        # roi_align binds _has_ops at import, before the shim's patch (else it takes its
        # torch.compile'd Python path, which TorchScript tracing refuses).
        sys.modules["torchvision.ops.roi_align"]._has_ops = lambda: True  # type: ignore[attr-defined]  # a module's private function patched
        model, size = detection.maskrcnn_resnet50_fpn(weights=None, weights_backbone=None).eval(), (3, 512, 512)
    else:
        model, size = detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval(), (3, 320, 320)
    image = torch.rand(*size)
    with torch.no_grad():
        torch.onnx.export(model, ([image],), str(path), dynamo=False, opset_version=17,
                          input_names=["image"], dynamic_axes={"image": {1: "height", 2: "width"}})
    return {"inputs": {"image": {"shape": list(size), "dtype": "float32", "range": [0, 1]}},
            "dims": {"height": size[1], "width": size[2]}}


def write_external(inline: Path, path: Path) -> None:
    """The inline model's weights as one external data file beside `path` (onnx's own writer)."""
    model = onnx.load(str(inline))
    onnx.save_model(model, str(path), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=path.name + ".data", size_threshold=1024)


EXPORTS = {
    "gpt2": lambda p: export_text("gpt2", p),
    "bert": lambda p: export_text("bert", p),
    "llama": lambda p: export_text("llama", p),
    "whisper_small": export_whisper,
    "mask_rcnn": lambda p: export_detector("mask_rcnn", p),
    "ssdlite": lambda p: export_detector("ssdlite", p),
}
EXTERNAL = {"llama_external": "llama", "gpt2_external": "gpt2"}     # name -> the inline model it is made from
NAMES = list(EXPORTS) + list(EXTERNAL)


def export(name: str, out: Path) -> None:
    path = out / f"{name}.onnx"
    if path.exists() and (out / f"{name}.json").exists():
        print(f"{name}: cached ({path})")
        return
    print(f"{name}: exporting ...", flush=True)
    if name in EXTERNAL:
        inline = EXTERNAL[name]
        export(inline, out)
        write_external(out / f"{inline}.onnx", path)
        spec = json.loads((out / f"{inline}.json").read_text())
    else:
        spec = EXPORTS[name](path)
    (out / f"{name}.json").write_text(json.dumps(spec, indent=1))
    print(f"{name}: {path} ({path.stat().st_size / 2**20:.0f} MiB)", flush=True)


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--only", nargs="+", choices=NAMES, default=NAMES)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.set_num_threads(os.cpu_count() or 1)
    if len(args.only) == 1:
        export(args.only[0], args.out)
        return
    # One process per model: after a dynamo export, torch refuses a TorchScript one in the same process.
    for name in args.only:
        subprocess.run([sys.executable, __file__, "--out", str(args.out), "--only", name], check=True)


if __name__ == "__main__":
    main()
