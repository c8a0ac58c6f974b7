"""Runs a CompiledModel on the CPU emulator: DirectML steps emulated, ONNX regions on
onnxruntime / onnx.reference, nodes with run-time sizes specialised (and cached) as they come,
If / Loop / Scan nodes with lowered bodies run by the host, each body's lowered graph per branch
or iteration."""
from __future__ import annotations

from typing import TYPE_CHECKING, AbstractSet, Any, Mapping

import numpy as np

from onnx_dml_lowering.ir import ControlFlow, LowerAtRunTime, OnnxRegion, Upload
from onnx_dml_lowering.lowering import Declined

from .control_flow import run_control_flow
from .binding import analyse
from .feeds import check_feeds
from .interpreter import Interpreter
from .memory import check_memory, default_limit, parse_size
from .onnx_regions import RegionRunner
from .env_flags import env_flag
from .ort_operators import OrtOperators
from .run_time_builds import RunTimeBuilds
from .run_time_fallbacks import RunTimeCalls
from .weights import tensor_array
from onnx_dml_lowering.runtime.compiled_view import LoweredView

if TYPE_CHECKING:
    import onnx

    from onnx_dml_lowering.runtime.kernel_set import DmlKernels
    from onnx_dml_lowering.runtime.ort.settings import SessionSettings
    from onnx_dml_lowering.runtime.region_engine import SessionCache


def strict_default() -> bool:
    return env_flag("DML_LOWER_STRICT")


def host_reads(partition: Any, embedded: "AbstractSet[str]") -> "set[str]":
    """Every host tensor a run of the partition's graph reads by name (an upload, an ONNX region's
    inputs but the initializers its sub-model embeds, `embedded`, a run-time lowering's inputs and
    those of the region it falls back to, a control-flow node's inputs and captures) and its
    outputs: all the interpreter takes from the tensors it is given."""
    names = set(partition.graph.outputs)
    for step in partition.graph.steps:
        if isinstance(step, Upload):
            names.add(step.tensor)
        elif isinstance(step, OnnxRegion):
            names.update(n for n in step.inputs if n not in embedded)
        elif isinstance(step, LowerAtRunTime):
            names.update(step.inputs)
            names.update(partition.deferred[step.onnx_node].value_inputs)
            fallback = partition.fallbacks.get(step.onnx_node)
            names.update(n for n in (fallback.region.inputs if fallback is not None else ()) if n not in embedded)
        elif isinstance(step, ControlFlow):
            names.update(step.inputs)
            names.update(step.captures)
    return names


class GraphRunner:
    """One lowered graph (the main graph or a control-flow body) with its ONNX regions, its
    run-time specialisations (kept for the runner's life, so across loop iterations) and a runner
    per body of the control-flow nodes in it."""

    # partition: compiler.partition.Partition (or a body's), which runtime cannot import (layers);
    # it reads its graph, regions, deferred, fallbacks, nodes, bodies and generated values.
    def __init__(self, session: "EmulatorSession", partition: Any, model: "onnx.ModelProto", types: dict,
                 initializers: "Mapping[str, np.ndarray]", shared: "SessionCache | None" = None,
                 path: str = "") -> None:
        self.session = session
        self.path = path            # a body's "<node>/<attribute>/" (nested: the path goes on), as placement names it
        self._paths: "dict[str, tuple[str, ...]]" = {}     # a run-time match's nodes by path, made once
        self.partition = partition
        self.initializers = initializers       # a body's run feeds them all; the main run what it reads
        self.regions = RegionRunner(model, dict(partition.regions), types, session.providers,
                                    generated=partition.generated, settings=session.settings, shared=shared)
        self.specialised = RunTimeBuilds(partition.graph.feature_level)
        # The main graph's plan, made once: its buffers' lifetimes and the (step, descriptors)
        # pairs already validated, so a warm run only does what depends on the data.
        self.main_lifetimes = analyse(partition.graph)
        self.main_validated: set = set()
        self._bodies: "dict[tuple[str, str], GraphRunner]" = {}
        self.unvalidated: "dict[str, str]" = {}   # of the last run: values not run on the provider

    def run(self, tensors: "dict[str, np.ndarray]", strict: bool) -> "dict[str, np.ndarray]":
        def runner(step: "OnnxRegion | LowerAtRunTime | ControlFlow",
                   env: Mapping[str, np.ndarray]) -> "dict[str, np.ndarray]":
            if isinstance(step, OnnxRegion):
                return self.regions(step, env)
            if isinstance(step, ControlFlow):
                return self._control_flow(step, env, strict)
            return self._lower_at_run_time(step, env, strict)

        interpreter = Interpreter(self.partition.graph, strict, self.session.operators, self.session.fallbacks,
                                  self.main_lifetimes, self.main_validated)
        outputs = interpreter.run(tensors, runner)
        self.unvalidated = interpreter.unvalidated
        return outputs

    def _lower_at_run_time(self, step: LowerAtRunTime, tensors: Mapping[str, np.ndarray],
                           strict: bool) -> "dict[str, np.ndarray]":
        match = self.partition.deferred[step.onnx_node]
        found = self.specialised.specialised(step.onnx_node, match, tensors)
        build, shapes = found.build, found.shapes
        result = build.graph
        nodes = self._paths.get(step.onnx_node)
        if nodes is None:
            nodes = self._paths[step.onnx_node] = tuple(self.path + n for n in match.nodes)
        self.session.run_time.called(nodes, match.rule, result.reason if isinstance(result, Declined) else None)
        if isinstance(result, Declined):
            self.session.log.append(f"{', '.join(match.nodes)} at input shapes {list(shapes.values())}: "
                                    f"left to ONNX: {result.reason}")
            # The compiler precomputed the ONNX region for exactly this case.
            fallback = self.partition.fallbacks[step.onnx_node]
            self.regions.add_region(fallback.region.name, list(fallback.nodes))
            return self.regions(fallback.region, tensors)
        if sum(build.buffer_sizes.values()) > self.session.memory_limit:     # the message only when needed
            # the values a size came from too (EyeLike(ConstantOfShape(s)) is sized by s's values)
            read = "".join(f", {name} = {v.reshape(-1).tolist() if v.size <= 8 else f'{v.size} values'}"
                           for name, v in found.values.items())
            check_memory(result, self.session.memory_limit,
                         f"node {step.onnx_node} at input shapes {list(shapes.values())}{read}", build.buffer_sizes)
        return found.outputs(Interpreter(result, strict, self.session.operators, self.session.fallbacks,
                                         build.lifetimes, build.validated).run(found.feeds(tensors)))

    def body(self, node: str, attribute: str) -> "GraphRunner":
        key = (node, attribute)
        if key not in self._bodies:
            body = self.partition.bodies[node][attribute]
            model = body.source.model
            inits = {i.name: tensor_array(i) for i in model.graph.initializer
                     if i.name not in body.partition.generated}
            self._bodies[key] = GraphRunner(self.session, body.partition, model, body.source.types, inits,
                                            path=f"{self.path}{node}/{attribute}/")
        return self._bodies[key]

    def _control_flow(self, step: ControlFlow, env: Mapping[str, np.ndarray],
                      strict: bool) -> "dict[str, np.ndarray]":
        node = self.partition.nodes[step.onnx_node]
        bodies = self.partition.bodies[step.onnx_node]

        def run_body(attribute: str, values: "list[np.ndarray]") -> "list[np.ndarray]":
            body, runner = bodies[attribute], self.body(step.onnx_node, attribute)
            feeds = dict(runner.initializers)
            feeds.update({name: env[name] for name in body.source.captures})
            feeds.update(zip(body.source.formal, values))
            check_memory(body.partition.graph, self.session.memory_limit,
                         f"the lowered body {step.onnx_node}/{attribute}")
            if body.lowered:
                self.session.lowered_iterations += 1
            results = runner.run(feeds, strict)
            return [results[name] for name in body.partition.graph.outputs]

        body_outputs = []
        if step.construct != "if":               # what an empty stack of scan outputs looks like
            body = bodies["body"]
            infos = [body.source.types.get(name) for name in body.partition.graph.outputs]
            body_outputs = [(i.onnx_type, i.shape) if i is not None else (0, None) for i in infos]
        inputs = [env[name] if name else None for name in step.inputs]
        results = run_control_flow(step.construct, node, inputs, run_body, body_outputs, self.session.memory_limit)
        return dict(zip(step.outputs, results))


class EmulatorSession:
    """Per-CompiledModel execution state: the main graph's runner (its region sessions and
    run-time specialisations) and what runs report: a log of run-time declines and
    `lowered_iterations`, how many control-flow branches / iterations ran a lowered body."""

    def __init__(self, compiled: LoweredView, operators: "DmlKernels | None" = None,
                 providers: "list[str] | None" = None, settings: "SessionSettings | None" = None) -> None:
        self.compiled = compiled
        self.settings = settings          # ort.settings.SessionSettings for every region session
        self.operators = operators            # None: the numpy kernels; else runtime.ort_operators
        self.providers = providers
        self.log: "list[str]" = []
        self.run_time = RunTimeCalls()          # every run-time match's calls and declines (check reports them)
        self.lowered_iterations = 0
        self.unvalidated_outputs: "dict[str, str]" = {}
        # The onnxruntime stand-ins list the operators they ran on numpy for want of a kernel.
        self.fallbacks = operators.fallbacks if isinstance(operators, OrtOperators) else None
        self.memory_limit = default_limit()
        # The main graph's region sessions are shared with the hybrid oracle (runtime/region_engine).
        self.main = GraphRunner(self, compiled.partition, compiled.model, compiled.types, compiled.initializers,
                                compiled.shared_sessions)
        self.regions = self.main.regions
        self.specialised = self.main.specialised
        # The initializers a run hands the main graph: those it reads by name, each read once into
        # an array (model_facts.InitializerArrays). Its regions' sub-models embed every
        # initializer that no feed may override (region_engine.RegionEngine), from the model.
        embedded = set(compiled.initializers) - {vi.name for vi in compiled.optional_inputs}
        self._read = [n for n in host_reads(compiled.partition, embedded) if n in compiled.initializers]

    def run(self, feeds: Mapping[str, object], strict: "bool | None" = None,
            memory_limit: "int | str | None" = None) -> "dict[str, np.ndarray]":
        strict = strict_default() if strict is None else strict
        self.memory_limit = default_limit() if memory_limit is None else parse_size(memory_limit)
        tensors = {name: self.compiled.initializers[name] for name in self._read}
        tensors.update(check_feeds(self.compiled.inputs, feeds, self.compiled.optional_inputs))
        check_memory(self.compiled.graph, self.memory_limit)
        outputs = self.main.run(tensors, strict)
        # Outputs a numpy kernel computed where the provider had none: not validated on it.
        self.unvalidated_outputs = {n: self.main.unvalidated[n] for n in outputs if n in self.main.unvalidated}
        return outputs
