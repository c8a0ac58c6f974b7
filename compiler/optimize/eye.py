"""optimize's run-time torch.eye: Range(0, n, 1) / Range(0, m, 1) / Unsqueeze / Equal [/ Cast]
with n, m read from an input's Shape (as the dynamo exporter writes torch.eye(x.shape[0], ...))
becomes EyeLike over ConstantOfShape of the run-time [n, m], where that is fewer nodes. EyeLike
and Equal of two int64 aranges are 1 exactly where the indices agree, so the result is the same
bits at every n, m; types onnxruntime's EyeLike lacks are generated in int32 and Cast (0 and 1
convert exactly)."""
from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onnx_dml_lowering.lowering.common import EXACT_INTEGER_LIMIT
from onnx_dml_lowering.lowering.diagonal_idioms import range_length
from onnx_dml_lowering.lowering.onnx_graphs import is_standard, subgraph_reads

from ..generators import EYELIKE_OPSET, EYELIKE_TYPES
from ..graph_view import OnnxGraphView
from .masks import Kept, _nonnegative

# Cast from int32 0 / 1 gives these types' 0 / 1 exactly (float8 and 4-bit types are left alone).
CAST_FROM_INT32 = {TensorProto.BOOL, TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.UINT16,
                   TensorProto.UINT32, TensorProto.UINT64, TensorProto.FLOAT16, TensorProto.BFLOAT16}


class RunTimeEye:
    """One matched eye whose Range limits are run-time sizes: the generator replacing it."""

    def __init__(self, opt: Any, view: OnnxGraphView, prefix: str) -> None:
        self.opt, self.view, self.prefix = opt, view, prefix
        self.nodes: "list[onnx.NodeProto]" = []
        self.inits: "list[TensorProto]" = []

    def side(self, limit: Any, tag: str) -> str:
        """A 1-D one-element int64 tensor holding the length of Range(0, limit, 1)."""
        value = self.view.constant(limit.name)
        if value is not None:
            length = range_length(value)
            exact = EXACT_INTEGER_LIMIT.get(limit.onnx_type)
            if exact is not None and length > exact:
                raise Kept(f"a float Range of {length} elements is not exact past {exact}")
            name = f"{self.prefix}_{tag}"
            self.inits.append(numpy_helper.from_array(np.array([length], np.int64), name))
            return name
        squeeze = self.view.producer(limit.name)
        if squeeze is not None and squeeze.op_type in ("Squeeze", "Reshape"):
            source = squeeze.input(0)
            shape = self.view.tensor(source.name).shape or source.shape
            if shape == (1,) and _nonnegative(self.view, source.name):
                return source.name          # the size before it was squeezed: no node needed
        if not _nonnegative(self.view, limit.name):
            raise Kept(f"its Range limit {limit.name} is not a size read from a Shape (a negative limit gives "
                       "Range an empty tensor but ConstantOfShape an error)")
        name = f"{self.prefix}_{tag}"
        if self.opt.opset >= 13:
            axes = f"{self.prefix}_axes"
            if not any(t.name == axes for t in self.inits):
                self.inits.append(numpy_helper.from_array(np.array([0], np.int64), axes))
            self.nodes.append(helper.make_node("Unsqueeze", [limit.name, axes], [name], name=name))
        else:
            self.nodes.append(helper.make_node("Unsqueeze", [limit.name], [name], name=name, axes=[0]))
        return name

    def build(self, rows: Any, cols: Any, out_type: int, y: str) -> None:
        if self.opt.opset < EYELIKE_OPSET:
            raise Kept(f"EyeLike needs opset {EYELIKE_OPSET} (model: {self.opt.opset})")
        if out_type not in EYELIKE_TYPES and out_type not in CAST_FROM_INT32:
            raise Kept(f"onnxruntime CPU has no exact EyeLike for {TensorProto.DataType.Name(out_type).lower()}")
        row = self.side(rows, "rows")
        col = row if cols.name == rows.name else self.side(cols, "cols")
        shape, zeros = f"{self.prefix}_shape", f"{self.prefix}_zeros"
        self.nodes.append(helper.make_node("Concat", [row, col], [shape], name=shape, axis=0))
        self.nodes.append(helper.make_node("ConstantOfShape", [shape], [zeros], name=f"{self.prefix}_fill"))
        work = out_type if out_type in EYELIKE_TYPES else TensorProto.INT32
        eye = y if work == out_type else f"{self.prefix}_eye"
        self.nodes.append(helper.make_node("EyeLike", [zeros], [eye], name=f"{self.prefix}_eye", dtype=work))
        if work != out_type:
            self.nodes.append(helper.make_node("Cast", [eye], [y], name=f"{self.prefix}_cast", to=out_type))


def _reads(graph: onnx.GraphProto) -> "set[str]":
    """Every value a node of `graph` reads, bodies' reads of outer values included."""
    return {name for node in graph.node
            for name in list(node.input) + subgraph_reads(node) if name}


def replace_unread(graph: onnx.GraphProto, removed: "set[str]", added: "list[onnx.NodeProto]",
                   at: str) -> "tuple[list[onnx.NodeProto], list[TensorProto], set[str]]":
    """The nodes of `graph` without `removed` (node names), with `added` where node `at` was,
    then without the nodes and initializers that fed only what went (transitively): the node
    list, the initializers kept and the names of every node that went."""
    nodes = []
    for node in graph.node:
        if node.name == at:
            nodes += added
        if node.name not in removed:
            nodes.append(node)
    inits = list(graph.initializer)
    kept_names = {i.name for i in graph.input} | {o.name for o in graph.output}
    gone = set(removed)
    while True:
        probe = onnx.GraphProto()
        probe.node.extend(nodes)
        read = _reads(probe) | kept_names
        fed = {i for n in graph.node if n.name in gone for i in n.input}    # read by what went
        new = {a.name for a in added}
        dead = [n for n in nodes if n.name not in new and is_standard(n) and n.output
                and not any(o in read for o in n.output) and any(o in fed for o in n.output)]
        unread = [t for t in inits if t.name not in read and t.name in fed]
        if not dead and not unread:
            return nodes, inits, gone
        gone |= {n.name for n in dead}
        nodes = [n for n in nodes if n.name not in gone]
        dropped = {t.name for t in unread}
        inits = [t for t in inits if t.name not in dropped]
