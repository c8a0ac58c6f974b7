"""The DirectML execution provider's placement, predicted off Windows (`inspect --ep dml`,
`optimize --for dml`, the conformance suite's dml_ep_placement): placement (the algorithm),
registry (onnxruntime 1.27's DML registration table, shipped here as JSON, and the CPU EP's
kernels), level1 (onnxruntime's level-1 optimisations, run for real), queries (the DML EP's
support queries), picture (the placement as an HTML page)."""
