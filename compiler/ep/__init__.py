"""The DirectML execution provider's placement, predicted off Windows (`inspect --ep dml`,
`optimize --for dml`, the conformance suite's dml_ep_placement): placement (the algorithm),
registry (the DML registration tables by onnxruntime version, shipped here as JSON: 1.27's from
its source, 1.24.4's measured by measure_registrations with probes; table_diff their differences;
and the CPU EP's kernels), level1 (onnxruntime's level-1 optimisations, run for real), queries (the DML EP's
support queries), picture (the placement as an HTML page)."""
