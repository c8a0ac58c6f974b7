"""Export tests/models/longformer/{longformer_ts,led_ts,longformer_qa_ts}.onnx: Hugging Face
Longformer (base and question answering) and LED at tiny random configs, traced by torch's
TorchScript exporter, for tests/compiler/test_longformer_exports.py.

Their sliding-window attention is what makes them worth having: the trace writes
`torch.split(..., 1)` of the global-attention indices as SplitToSequence(keepdims=0) with a scalar
`split`, which onnxruntime reads otherwise than ONNX (runtime/ort_deviations.py), and a NonZero of
the global-attention mask the project lowers, so the model is cut into regions around it.

Not run by the suite (it needs torch). In the export venv (`make .venv-export/.installed`):
    PYTHONPATH=/work/shared/tools .venv-export/bin/python tests/models/export_longformer.py
Seeded: a rerun with the same package versions writes the same files. The trace bakes the export's
sequence length into the window padding: feed sequences of the export's length (SEQUENCE), any
batch, with at least one global-attention token per row (a row without one makes onnxruntime 1.32
die of SIGFPE in a Reshape of an empty tensor: the crash the tool reports, not a fixture here).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

try:
    import torchvision_cpu_shim  # noqa: F401  (before transformers, which imports torchvision)
except ImportError:
    raise SystemExit("torchvision_cpu_shim is not importable: put the shared tools folder on PYTHONPATH") from None

import transformers  # noqa: E402

OUT = Path(__file__).parent / "longformer"
SEED = 0
BATCH, SEQUENCE, WINDOW = 2, 8, 4
TINY = dict(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
            attention_window=WINDOW)


class Encoder(torch.nn.Module):
    """forward(input_ids, attention_mask, global_attention_mask) -> the model's first output."""

    def __init__(self, model: torch.nn.Module, field: "str | tuple[str, ...]") -> None:
        super().__init__()
        self.model = model
        self.fields = (field,) if isinstance(field, str) else field

    def forward(self, input_ids, attention_mask, global_attention_mask):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         global_attention_mask=global_attention_mask)
        return tuple(getattr(out, f) for f in self.fields)


class Seq2Seq(torch.nn.Module):
    """LED: forward(input_ids, attention_mask, global_attention_mask, decoder_input_ids) -> last_hidden_state."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask, global_attention_mask, decoder_input_ids):
        return self.model(input_ids=input_ids, attention_mask=attention_mask,
                          global_attention_mask=global_attention_mask, decoder_input_ids=decoder_input_ids,
                          use_cache=False).last_hidden_state


def feeds() -> "dict[str, torch.Tensor]":
    generator = torch.Generator().manual_seed(SEED)
    global_mask = torch.zeros(BATCH, SEQUENCE, dtype=torch.int64)
    global_mask[:, 0] = 1       # a global token per row (the first, as for a [CLS] / question)
    return {"input_ids": torch.randint(2, 128, (BATCH, SEQUENCE), generator=generator),
            "attention_mask": torch.ones(BATCH, SEQUENCE, dtype=torch.int64),
            "global_attention_mask": global_mask,
            "decoder_input_ids": torch.randint(2, 128, (BATCH, 3), generator=generator)}


def export(name: str, module: torch.nn.Module, inputs: "list[str]", outputs: "list[str]") -> Path:
    path = OUT / f"{name}.onnx"
    args = tuple(feeds()[n] for n in inputs)
    axes = {n: {0: "batch"} for n in inputs + outputs}
    torch.onnx.export(module.eval(), args, str(path), dynamo=False, opset_version=17, input_names=inputs,
                      output_names=outputs, dynamic_axes=axes)
    return path


def main() -> None:
    OUT.mkdir(exist_ok=True)
    encoder_inputs = ["input_ids", "attention_mask", "global_attention_mask"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(SEED)
        longformer = transformers.LongformerModel(transformers.LongformerConfig(**TINY, max_position_embeddings=64))
        print("wrote", export("longformer_ts", Encoder(longformer, "last_hidden_state"), encoder_inputs,
                              ["last_hidden_state"]))
        torch.manual_seed(SEED)
        qa = transformers.LongformerForQuestionAnswering(
            transformers.LongformerConfig(**TINY, max_position_embeddings=64, num_labels=2))
        print("wrote", export("longformer_qa_ts", Encoder(qa, ("start_logits", "end_logits")), encoder_inputs,
                              ["start_logits", "end_logits"]))
        torch.manual_seed(SEED)
        led = transformers.LEDModel(transformers.LEDConfig(
            vocab_size=128, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
            decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, attention_window=WINDOW,
            max_encoder_position_embeddings=64, max_decoder_position_embeddings=64))
        print("wrote", export("led_ts", Seq2Seq(led), encoder_inputs + ["decoder_input_ids"], ["last_hidden_state"]))


if __name__ == "__main__":
    main()
