"""Writes the exported test models in this folder with torch's two ONNX exporters.

Run by hand (it needs torch==2.13.0, whose CPU wheel is on the development machine, and
onnxscript for the dynamo exporter); the .onnx files it writes are committed so that the test
suite never needs torch:

    python tests/models/export_models.py
"""
from __future__ import annotations

import warnings
from pathlib import Path

import torch

HERE = Path(__file__).parent
OPSET = 18


class NonZero(torch.nn.Module):
    def forward(self, x):
        return torch.nonzero(x)


class ArgWhere(torch.nn.Module):
    def forward(self, x):
        return torch.argwhere(x > 0.25)


class MaskedSelect(torch.nn.Module):
    def forward(self, x):
        return x[x > 0]


class WhereCond(torch.nn.Module):
    def forward(self, x):
        rows, cols = torch.where(x < 0)
        return rows, cols


class NonZeroTuple(torch.nn.Module):
    def forward(self, x):
        a, b, c = x.nonzero(as_tuple=True)
        return a + b * 10, c


class Eye(torch.nn.Module):
    def forward(self, x):
        return torch.eye(x.shape[0], x.shape[1], dtype=x.dtype) * 2.0 + x


class EyeSquare(torch.nn.Module):
    def forward(self, x):
        return torch.eye(x.shape[0], dtype=torch.int64)


class MlpSparse(torch.nn.Module):
    """Ordinary layers around a NonZero and an identity: a small model of the real thing."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = torch.nn.Linear(8, 8)
        self.fc2 = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        square = h.transpose(0, 1) @ h + torch.eye(8)
        active = torch.nonzero(h > 0.1)
        return self.fc2(square), active


class SlidingWindow(torch.nn.Module):
    """A sliding-window attention mask written with one difference compared twice, as users write it."""

    def forward(self, x):
        i = torch.arange(x.shape[0])
        d = i[:, None] - i[None, :]
        mask = (d >= 0) & (d < 3)
        return (x @ x.transpose(0, 1)).masked_fill(~mask, -1e9).softmax(-1)


# name: (module, example inputs, dynamic dims per input)
MODELS = {
    "nonzero": (NonZero(), (torch.randn(3, 4),), [{0: "rows", 1: "cols"}]),
    "argwhere": (ArgWhere(), (torch.randn(2, 3, 4),), [{0: "a", 1: "b", 2: "c"}]),
    "masked_select": (MaskedSelect(), (torch.randn(4, 5),), [{0: "rows", 1: "cols"}]),
    "where_cond": (WhereCond(), (torch.randn(4, 5),), [{0: "rows", 1: "cols"}]),
    "nonzero_tuple": (NonZeroTuple(), (torch.randn(2, 3, 4),), [{0: "a", 1: "b", 2: "c"}]),
    "eye": (Eye(), (torch.randn(3, 5),), [{0: "n", 1: "m"}]),
    "eye_square": (EyeSquare(), (torch.randn(4, 2),), [{0: "n"}]),
    "mlp_sparse": (MlpSparse(), (torch.randn(5, 8),), [{0: "batch"}]),
    "sliding_window": (SlidingWindow(), (torch.randn(6, 8),), [{0: "seq"}]),
}


# The TorchScript exporter has no aten::argwhere at opset 18; only dynamo exports it.
DYNAMO_ONLY = {"argwhere"}


def export(name: str, dynamo: bool) -> Path:
    module, args, dims = MODELS[name]
    path = HERE / f"{name}.{'dynamo' if dynamo else 'torchscript'}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if dynamo:
            shapes = tuple({axis: torch.export.Dim(label, min=1, max=64) for axis, label in d.items()} for d in dims)
            program = torch.onnx.export(module, args, dynamo=True, dynamic_shapes=shapes,
                                        opset_version=OPSET, optimize=True)
            program.save(str(path))
        else:
            names = [f"x{i}" for i in range(len(args))]
            torch.onnx.export(module, args, str(path), dynamo=False, opset_version=OPSET,
                              input_names=names, dynamic_axes={n: d for n, d in zip(names, dims)})
    return path


if __name__ == "__main__":
    for model_name in MODELS:
        for use_dynamo in (True,) if model_name in DYNAMO_ONLY else (True, False):
            print("wrote", export(model_name, use_dynamo))
