"""dml-lower run: the model on one or more backends, its outputs printed (and saved)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable

from onnx_dml_lowering.ir import DmlLowerError
from onnx_dml_lowering.ir.display import display

from ..output_files import check_outputs, save_npz_file, write_json
from .command import Command, Parsed
from .feeds import describe_feeds, feed_sets
from .groups import BackendArgs, FeedArgs, ModelArgs, SessionArgs
from .output_groups import JsonArgs, QuietArgs, SaveArgs
from .reads import files_read

if TYPE_CHECKING:
    import argparse

    import numpy as np

    from ..compiled import CompiledModel
    from ..run_backends import RunBackends, RunResult
    from .groups import Backends, Feeds
    from .output_groups import Saved


class Run(Command):
    name, help = "run", "run the model on one or more backends and print its outputs"

    def __init__(self) -> None:
        self.backends, self.save = BackendArgs("run"), SaveArgs("run")
        super().__init__(ModelArgs(), FeedArgs(), self.backends, SessionArgs(), QuietArgs("run"), self.save,
                         JsonArgs("run"))

    def layout(self) -> "list[Callable[[argparse.ArgumentParser], None]]":
        model, feeds, backends, session, quiet, save, json = self.groups
        return [model.add, feeds.add, backends.add, self.backends.add_provider_options,
                self.backends.add_fail_on_partial, session.add, quiet.add, self.save.add_inputs, self.save.add_outputs,
                json.add]

    def run(self, parsed: Parsed) -> int:
        return cmd_run(parsed)


@dataclass
class _Progress:
    """What run has done over its feed sets: for the lines after them and the JSON."""
    failed: bool = False
    described: dict = field(default_factory=dict)
    sets: int = 0
    records: list = field(default_factory=list)
    outputs_saved: int = 0          # the sets --save-outputs wrote (set #0 .. this - 1)


def cmd_run(parsed: Parsed) -> int:
    saved, json_out = parsed[SaveArgs], parsed[JsonArgs]
    given = parsed[FeedArgs]
    check_outputs(*saved.options(None if given.script else 1 if given.inputs else given.iterations),
                  ("--json", json_out), reads=files_read(parsed))
    from ..compiled import compile_model
    from ..run_backends import RunBackends
    feed_options = parsed[FeedArgs]
    settings = parsed[SessionArgs]
    model = parsed[ModelArgs]
    compiled = compile_model(model.path, feature_level=model.feature_level)
    backends = parsed[BackendArgs]
    if saved.outputs and len(backends.names) > 1:
        raise DmlLowerError(f"--save-outputs saves one backend's outputs: give one backend, not {backends.text!r}")
    runner = RunBackends(compiled, backends.names, backends.options(settings))
    for unavailable, why in runner.unavailable.items():
        print(f"{unavailable}: UNAVAILABLE: {why}")
    done = _Progress()
    try:
        for index, feeds in enumerate(feed_sets(compiled, feed_options)):
            _run_set(parsed, compiled, runner, (feed_options, backends), index, feeds, done)
    finally:        # the files written are said, before the error line of a run a later set ended
        _say_saved(saved, done)
    if json_out:
        described = done.described
        data = {"model": str(model.path), "feature_level": str(compiled.feature_level),
                "feeds": {**described, "iterations": done.sets} if "iterations" in described else described,
                "backends": done.records, "unavailable": dict(runner.unavailable)}
        write_json(json_out, "the run JSON", data)
    return 1 if done.failed else 0


def _say_saved(saved: Saved, done: _Progress) -> None:
    if not (saved.inputs and done.sets) and not (saved.outputs and done.outputs_saved):
        return                  # nothing saved: saved_outputs stays unimported (a provider-only run's cost)
    from onnx_dml_lowering.runtime.saved_outputs import wrote_line
    if saved.inputs and done.sets:
        print(wrote_line(saved.inputs, done.sets))
    if saved.outputs and done.outputs_saved:
        print(wrote_line(saved.outputs, done.outputs_saved))


def _run_set(parsed: Parsed, compiled: CompiledModel, runner: RunBackends, options: "tuple[Feeds, Backends]",
             index: int, feeds: "dict[str, np.ndarray]", done: _Progress) -> None:
    """Feed set #index on every backend: its lines printed, its files saved, its records kept."""
    from onnx_dml_lowering.runtime.feeds import with_defaults
    from onnx_dml_lowering.runtime.report import feeds_line

    from ..run_backends import run_record
    feed_options, backends = options
    saved, quiet = parsed[SaveArgs], parsed[QuietArgs]
    which = f" (iteration #{index} of {feed_options.script})" if feed_options.script else ""
    _, unfed = with_defaults(feeds, compiled.optional_inputs, compiled.initializers)
    defaults = {name: compiled.initializers[name] for name in unfed}
    declared = compiled.inputs + compiled.optional_inputs
    if index == 0:
        done.described = describe_feeds(feed_options, feeds, declared=declared)
    if saved.inputs:        # every set, one file each (saved_outputs.set_path)
        from onnx_dml_lowering.runtime.saved_outputs import set_path
        save_npz_file(set_path(saved.inputs, index), feeds, "the inputs")
    done.sets = index + 1
    if not quiet:
        print(feeds_line(done.described if index == 0 else describe_feeds(feed_options, feeds, declared=declared))
              + (f" (iteration #{index})" if which else ""))
    for backend in runner.backends:
        result = runner.run(backend, feeds)
        done.failed |= result.status == "error" or (result.status == "partial" and backends.fail_on_partial)
        if saved.outputs and not result.error:
            _save_outputs(compiled, saved, index, feeds, result)
            done.outputs_saved = index + 1
        done.records.append(dict(run_record(result, feeds, defaults), **({"iteration": index} if which else {})))
        if quiet:
            print(_quiet_line(result, which))
        else:
            _print_result(parsed[ModelArgs].path, compiled, result, which, (feeds, defaults))


def _save_outputs(compiled: CompiledModel, saved: Saved, index: int, feeds: "dict[str, np.ndarray]",
                  result: RunResult) -> None:
    from onnx_dml_lowering.runtime.feeds import check_feeds
    from onnx_dml_lowering.runtime.saved_outputs import metadata, saved_file, set_path
    assert saved.outputs is not None
    # the record of what the backend did not compute itself and why (check --load-outputs says it)
    meta = metadata(check_feeds(compiled.inputs, feeds, compiled.optional_inputs), f"run:{result.backend}",
                    compiled.output_names, {"": {**result.not_run, **result.unvalidated}})
    save_npz_file(set_path(saved.outputs, index),
                  saved_file((lambda key: f"the model's output {key!r}", result.outputs),
                             (lambda key: f"the file's own {key!r} entry", meta)), "the outputs")


def _print_result(path: str, compiled: CompiledModel, done: RunResult, which: str, fed: "tuple[dict, dict]") -> None:
    """One backend's run of one feed set, as run prints it without -q."""
    from onnx_dml_lowering.runtime.backend_names import as_backend_name
    from onnx_dml_lowering.runtime.feeds import dimension_notes
    from onnx_dml_lowering.runtime.report import defaults_line
    feeds, defaults = fed
    backend = done.backend
    if done.error:
        print(f"{backend}{which}: ERROR {display(done.error)}")
        return
    # a provider backend runs the model file: no DirectML feature level is involved
    level = "" if as_backend_name(backend).is_provider else f" (feature level {compiled.feature_level})"
    print(f"ran {display(path)} on backend {backend}{level}{which}")
    if done.ran:
        print(f"ran {display(done.ran)}")
    if defaults:
        print(defaults_line(defaults))
    for note in [*dimension_notes(compiled.inputs + compiled.optional_inputs, feeds), *done.notes]:
        print(display(note))
    if done.status == "partial":
        print(f"PARTIAL: {done.partial_text()}")
    for name in compiled.output_names:
        if name in done.outputs:
            print(_summary(name, done.outputs[name]) + (f"  [not computed by the backend: "
                                                         f"{done.unvalidated[name]}]"
                                                         if name in done.unvalidated else ""))
        elif name in done.not_run:
            print(f"  {display(name)}: not run ({display(done.not_run[name])})")


def _summary(name: str, value: np.ndarray) -> str:
    import numpy as np
    flat = value.reshape(-1)
    preview = np.array2string(flat[:8], separator=", ", threshold=8, max_line_width=1 << 30)   # one line
    more = " ..." if flat.size > 8 else ""
    return f"  {display(name)}: {value.dtype} {list(value.shape)} {preview}{more}"


def _quiet_line(done: RunResult, which: str) -> str:
    """run -q: one line per backend (and feed set), PARTIAL and ERROR said as check -q says them."""
    if done.error:
        return f"{done.backend}{which}: ERROR {display(done.error)}"
    shapes = ", ".join(f"{display(name)} {value.dtype} {list(value.shape)}" for name, value in done.outputs.items())
    partial = f"; PARTIAL: {display(done.partial_text())}" if done.status == "partial" else ""
    return f"{done.backend}{which}: {len(done.outputs)} output(s): {shapes or 'none'}{partial}"
