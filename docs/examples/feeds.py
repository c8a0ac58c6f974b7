"""Feed sets for `dml-lower check compiler/examples/masked_select.onnx --data-loader-script
docs/examples/feeds.py` (the docs' example of a data loader script)."""
import numpy as np


def load_data():
    # three feed sets: all zeros, all ones, one 7
    x = np.zeros((2, 3, 4), np.float32)
    yield {"x": x}
    yield {"x": x + 1}
    x[1, 2, 3] = 7
    yield {"x": x}
