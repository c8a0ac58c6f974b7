"""onnx's shape inference, given the attribute defaults its own function bodies forget.

A standard operator defined by a function body reads its attributes through `ref_attr_name`. In
onnx 1.23 several bodies declare such an attribute without its default (MeanVarianceNormalization's
`axes`, Elu's `alpha`, the Reduce functions' `keepdims`, ...), so where a node leaves the attribute
to its default, the body's node gets nothing. Where onnx infers the operator through its body
(MeanVarianceNormalization: it has no inference function of its own), strict inference refuses a
valid model: "One and only one of the attributes 'value', 'value_*' ... for a Constant node",
inside a node that has no Constant. onnxruntime runs such models. (The others have inference
functions of their own, which read the schema's defaults: they infer as they are.)

`infer_shapes` is the one call of onnx's inference in this package: it writes each such default
onto the node (the schema's own value, so the meaning is unchanged), infers, and takes the
attributes it wrote off again, on the model and on the result, which holds the same nodes in the
same order (inference adds value_info, never nodes)."""
from __future__ import annotations

import functools
from typing import Any, Iterator, TypeAlias

import onnx
from onnx import defs, helper, shape_inference

from onnx_dml_lowering.ir.display import display
from onnx_dml_lowering.lowering.onnx_graphs import STANDARD, is_standard, iter_nodes

# Where a default was written: the node list (None: the main graph and its bodies; else a local
# function's index), the node's place in iter_nodes' walk of it, and the attribute names written.
Written: TypeAlias = "list[tuple[int | None, int, tuple[str, ...]]]"


def infer_shapes(model: onnx.ModelProto, **options: Any) -> onnx.ModelProto:
    """onnx.shape_inference.infer_shapes(model, **options), with the defaults above written for
    the pass; `model` is left as it was given, the result holds no written attribute either."""
    written = _write_defaults(model)
    try:
        inferred = shape_inference.infer_shapes(model, **options)
    except Exception as exc:   # onnx's inference raises several types: each gets the note, as it is
        added = _notes(model, written, str(exc))
        if added:               # PEP 678's notes list (add_note is 3.11; this package runs on 3.10)
            exc.__notes__ = [*getattr(exc, "__notes__", ()), *added]  # type: ignore[attr-defined]
        raise
    finally:
        _take_off(model, written)
    _take_off(inferred, written)
    return inferred


def inference_notes(exc: BaseException) -> str:
    """What infer_shapes noted on onnx's exception (a default it wrote, on the node the error
    names), each as '; note', to follow onnx's own words in the one line said."""
    return "".join(f"; {note}" for note in getattr(exc, "__notes__", ()))


def _notes(model: onnx.ModelProto, written: Written, message: str) -> "list[str]":
    """For an inference error naming a node given a default here: that it was, and its value (the
    error is about an attribute the model does not spell: a MeanVarianceNormalization of rank 3
    fails on the default axes [0, 2, 3])."""
    notes = []
    for node, attributes in _written_nodes(model, written):
        if node.name and f"node name: {node.name})" in message:
            values = ", ".join(f"{a.name} = {helper.get_attribute_value(a)}" for a in attributes)
            notes.append(f"node '{display(node.name)}' ({node.op_type}) leaves {values} to its default, "
                         "written for onnx's inference of its function body")
    return notes


@functools.lru_cache(maxsize=None)
def forgotten_defaults(op_type: str, version: int) -> "dict[str, onnx.AttributeProto]":
    """The attributes the standard `op_type`'s schema at opset `version` gives a default that one
    of its function bodies reads by reference yet declares without it, where onnx infers the
    operator through that body: name -> the default."""
    try:
        schema: Any = defs.get_schema(op_type, version, "")    # onnx's stubs omit its function methods
    except defs.SchemaError:
        return {}
    if not schema.has_function or schema.has_type_and_shape_inference_function:
        return {}               # no body, or one inference never reads
    forgotten: "dict[str, onnx.AttributeProto]" = {}
    for body_version in schema.function_opset_versions:
        body = onnx.FunctionProto.FromString(schema.get_function_with_opset_version(body_version))
        declared_bare = set(body.attribute)
        for node in body.node:
            for attribute in node.attribute:
                name = attribute.ref_attr_name
                spec = schema.attributes.get(name) if name in declared_bare else None
                if spec is not None and spec.default_value.type:
                    forgotten[name] = spec.default_value
    return forgotten


def _write_defaults(model: onnx.ModelProto) -> Written:
    written: Written = []
    opset = _standard_version(model.opset_import)
    _write_in(model.graph, None, opset, written)
    for index, function in enumerate(model.functions):
        _write_in(function, index, _standard_version(function.opset_import) or opset, written)
    return written


def _write_in(nodes: "onnx.GraphProto | onnx.FunctionProto", where: "int | None", opset: int,
              written: Written) -> None:
    """_write_defaults over one node list and its bodies at any depth (it runs on every inference:
    one dictionary look-up a standard node)."""
    if not opset:
        return
    for place, node in enumerate(iter_nodes(nodes)):
        forgotten = forgotten_defaults(node.op_type, opset) if node.domain in STANDARD else None
        if forgotten:
            given = {attribute.name for attribute in node.attribute}
            missing = tuple(name for name in forgotten if name not in given)
            node.attribute.extend(forgotten[name] for name in missing)
            if missing:
                written.append((where, place, missing))


def _standard_version(imports: Any) -> int:
    return max((entry.version for entry in imports if is_standard(entry)), default=0)


def _written_nodes(model: onnx.ModelProto, written: Written
                   ) -> "Iterator[tuple[onnx.NodeProto, list[onnx.AttributeProto]]]":
    """Each node given defaults (found by its place in the walk) and the attributes written on it."""
    walks: "dict[int | None, list[onnx.NodeProto]]" = {}
    for where, place, names in written:
        if where not in walks:
            walks[where] = list(iter_nodes(model.graph if where is None else model.functions[where]))
        node = walks[where][place]
        yield node, [a for a in node.attribute if a.name in names]


def _take_off(model: onnx.ModelProto, written: Written) -> None:
    for node, attributes in list(_written_nodes(model, written)):
        for attribute in attributes:
            node.attribute.remove(attribute)
