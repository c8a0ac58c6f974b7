# make demo / make test / make bench create and reuse .venv, installing the project (and test extras) into it.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test typecheck lint docs fuzz bench bench-check bench-realsize bench-polygraphy bench-directml openvino ray picture-check install-check directml directml-check clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test,lint]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/dml-lower demo

test: $(STAMP)
	$(BIN)/lint-imports --no-cache
	DML_LOWER_STRICT=1 $(BIN)/python -m pytest

# mypy over the installed names (configuration: [tool.mypy] in pyproject.toml), then over the
# benchmark scripts with the same settings: benchmarks/*.py given as files, each a top-level module
# with benchmarks/ on mypy's path (their `import realsize_bench` of one another resolves), and what
# they import checked with them (tests/big_models.py). The editable install maps onnx_dml_lowering.*
# to the folders through an import hook mypy cannot follow, so both runs read them through links
# under build/typecheck, remade on every run: links to the folders themselves, so a module added or
# moved is checked without reinstalling anything. Every function is annotated
# (disallow_untyped_defs) but in the modules [tool.mypy] lists with why.
TYPECHECK_TREE := build/typecheck/onnx_dml_lowering
typecheck: $(STAMP)
	mkdir -p $(TYPECHECK_TREE)
	for p in ir lowering runtime compiler; do ln -sfn ../../../$$p $(TYPECHECK_TREE)/$$p; done
	$(BIN)/mypy
	$(BIN)/mypy benchmarks/*.py

# ruff with the rules chosen in pyproject.toml ([tool.ruff.lint]): checks only, no formatting.
lint: $(STAMP)
	$(BIN)/ruff check compiler ir lowering runtime tests benchmarks

# The documentation site (mkdocs.yml, docs/) built into site/; --strict makes a broken link, a page
# missing from the nav or a bad anchor a failure. MkDocs goes into the project venv from the docs
# extra, stamped apart so that `make test` does not need it.
DOCS_STAMP := $(VENV)/.installed-docs

$(DOCS_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,lint,docs]'
	touch $(DOCS_STAMP)

# The docs' pictures (docs/images/) are taken anew first in headless Chromium (tests/docs_images.py):
# installed from Debian when absent and root, else the committed pictures are kept (one line says so).
docs: $(DOCS_STAMP)
	command -v chromium >/dev/null || [ "$$(id -u)" != 0 ] || \
		(apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
	$(BIN)/python -m tests.docs_images
	$(BIN)/mkdocs build --strict --site-dir site

# Thousands of differential fuzz examples (CI runs the seeded 'ci' profile inside make test).
fuzz: $(STAMP)
	DML_LOWER_STRICT=1 HYPOTHESIS_PROFILE=thorough $(BIN)/python -m pytest tests/fuzz

bench: $(STAMP)
	$(BIN)/python benchmarks/bench.py $(BENCH_ARGS)

# `dml-lower check` as a fresh process, and the warm lowered run, against onnxruntime on the small
# real exports (tests/models/real, benchmarks/models): benchmarks/check_bench.py (zoo3's median
# and worst; BENCH_ARGS="--repeat 3 --only check" for the table of docs/performance.md).
bench-check: $(STAMP)
	$(BIN)/python benchmarks/check_bench.py $(BENCH_ARGS)

# Real-size models (GPT-2 124M, BERT-base, a 1.5 GB Llama inline and with external data,
# Whisper-small, Mask R-CNN R50-FPN, SSDlite320), exported once with random weights into
# $(REALSIZE) by a venv of their own (torch 2.13 CPU, torchvision, transformers), then measured
# against onnxruntime: benchmarks/realsize_bench.py. The first run exports for about 15 minutes.
# BENCH_ARGS=--write-docs writes the table into docs/performance.md.
REALSIZE ?= $(HOME)/.cache/onnx-dml-lowering/realsize
SHARED_TOOLS ?= ../shared/tools
EXPORT_VENV ?= .venv-export
EXPORT_STAMP := $(EXPORT_VENV)/.installed

$(EXPORT_STAMP):
	$(PYTHON) -m venv $(EXPORT_VENV)
	$(EXPORT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(EXPORT_VENV)/bin/python -m pip install --quiet torch==2.13.0 torchvision==0.28.0 transformers onnx onnxscript
	touch $(EXPORT_STAMP)

bench-realsize: $(STAMP) $(EXPORT_STAMP)
	PYTHONPATH=$(SHARED_TOOLS) $(EXPORT_VENV)/bin/python benchmarks/realsize_models.py --out $(REALSIZE)
	$(BIN)/python benchmarks/realsize_bench.py --models $(REALSIZE) $(BENCH_ARGS)

# Polygraphy 0.53.6 in a venv of its own, with the onnxruntime and onnx versions of the project's
# venv (the two sides then time the same onnxruntime), side by side with dml-lower's inspect, run
# and check: benchmarks/polygraphy_bench.py, on the tiny exports of tests/models/real, and on the
# real-size set too when $(REALSIZE) holds it (make bench-realsize exports it).
# BENCH_ARGS=--write-docs writes the table into docs/performance.md.
POLYGRAPHY_VENV ?= .venv-polygraphy
POLYGRAPHY_STAMP := $(POLYGRAPHY_VENV)/.installed
SAME_ORT = import onnx, onnxruntime; print(f"onnxruntime=={onnxruntime.__version__} onnx=={onnx.__version__}")

$(POLYGRAPHY_STAMP): $(STAMP)
	$(PYTHON) -m venv $(POLYGRAPHY_VENV)
	$(POLYGRAPHY_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(POLYGRAPHY_VENV)/bin/python -m pip install --quiet polygraphy==0.53.6 $$($(BIN)/python -c '$(SAME_ORT)')
	touch $(POLYGRAPHY_STAMP)

bench-polygraphy: $(STAMP) $(POLYGRAPHY_STAMP)
	$(BIN)/python benchmarks/polygraphy_bench.py --polygraphy $(POLYGRAPHY_VENV)/bin/polygraphy \
		--realsize $(REALSIZE) $(BENCH_ARGS)

# The DirectML host's start-up and per-operator cost, the dml backend's requests, and `check
# --backends cpu,dml` against `cpu,ort` on the bundled examples and the real-size set (exported as
# bench-realsize does): benchmarks/directml_bench.py. BENCH_ARGS=--write-docs writes it into
# docs/performance.md.
bench-directml: $(STAMP) $(EXPORT_STAMP) directml
	PYTHONPATH=$(SHARED_TOOLS) $(EXPORT_VENV)/bin/python benchmarks/realsize_models.py --out $(REALSIZE)
	$(BIN)/python benchmarks/directml_bench.py --compare --models $(REALSIZE) $(BENCH_ARGS)

# A second venv where onnxruntime-openvino replaces onnxruntime (both are the module
# 'onnxruntime', so they cannot share one): the project goes in without its dependencies, then
# every other dependency and the test extras, then the provider-validation tests marked openvino.
OV_VENV ?= .venv-openvino
OV_BIN := $(OV_VENV)/bin
OV_STAMP := $(OV_VENV)/.installed
OTHER_DEPS = import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	print(" ".join(r for r in p["dependencies"] + p["optional-dependencies"]["test"] if not r.startswith("onnxruntime")))

$(OV_STAMP): pyproject.toml
	$(PYTHON) -m venv $(OV_VENV)
	$(OV_BIN)/python -m pip install --quiet --upgrade pip
	$(OV_BIN)/python -m pip install --quiet onnxruntime-openvino
	$(OV_BIN)/python -m pip install --quiet --no-deps -e .
	$(OV_BIN)/python -m pip install --quiet $$($(OV_BIN)/python -c '$(OTHER_DEPS)')
	touch $(OV_STAMP)

openvino: $(OV_STAMP)
	DML_LOWER_STRICT=1 $(OV_BIN)/python -m pytest -m openvino -rs tests/providers

# A third venv with the ray extra: the zoo checks of `check --executor ray` on a real local Ray
# instance (tests marked ray; `make test` skips them where ray is absent). The import line fails
# the target if ray did not install, so the ray tests can never be skipped green here.
RAY_VENV ?= .venv-ray
RAY_BIN := $(RAY_VENV)/bin
RAY_STAMP := $(RAY_VENV)/.installed

$(RAY_STAMP): pyproject.toml
	$(PYTHON) -m venv $(RAY_VENV)
	$(RAY_BIN)/python -m pip install --quiet --upgrade pip
	$(RAY_BIN)/python -m pip install --quiet -e '.[test,ray]'
	touch $(RAY_STAMP)

ray: $(RAY_STAMP)
	$(RAY_BIN)/python -c 'import ray; print("ray", ray.__version__)'
	DML_LOWER_STRICT=1 $(RAY_BIN)/python -m pytest -m ray -rs

# The placement picture (inspect --ep dml --html) and Model Explorer (--model-explorer, dml-lower
# view: the [view] extra, installed here) opened for real in Debian's headless Chromium, installed
# here when missing (apt-get, as root on a fresh machine); the tests marked chromium or view read
# back what the browser drew and keep its screenshots under build/picture/ (CI's artefacts).
# DML_LOWER_REQUIRE_CHROMIUM / DML_LOWER_REQUIRE_VIEW make a missing browser or extra a failure,
# never a green skip.
VIEW_STAMP := $(VENV)/.installed-view

$(VIEW_STAMP): $(STAMP) pyproject.toml
	$(BIN)/python -m pip install --quiet -e '.[test,lint,view]'
	touch $(VIEW_STAMP)

picture-check: $(VIEW_STAMP)
	command -v chromium >/dev/null || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium)
	DML_LOWER_STRICT=1 DML_LOWER_REQUIRE_CHROMIUM=1 DML_LOWER_REQUIRE_VIEW=1 DML_LOWER_CHROMIUM="$$(command -v chromium)" \
		$(BIN)/python -m pytest -m "chromium or view" -rs tests/compiler/ep/test_picture.py tests/compiler/test_explorer.py \
		tests/compiler/cli/test_output_kinds.py

# Microsoft's DirectML.dll and onnxruntime.dll for real, on Linux under Wine (docs/directml-on-linux.md):
# the system packages (as root: wine, xvfb, xauth, vulkan-tools, mingw-w64, Mesa >= 25's lavapipe),
# then the one folder the backends read (DML_LOWER_DIRECTML_HOME, default ~/.cache/onnx-dml-lowering/
# directml): the dlls, the host programs compiled from runtime/directml/hosts/*.c, a Wine prefix, each
# host's self-test. Idempotent. directml-check runs the tests marked directml, where a missing setup
# is a failure, never a green skip.
directml: $(STAMP)
	bash runtime/directml/install-system.sh
	$(BIN)/python -m onnx_dml_lowering.runtime.directml.setup

directml-check: $(STAMP)
	DML_LOWER_STRICT=1 DML_LOWER_REQUIRE_DIRECTML=1 $(BIN)/python -m pytest -m directml -rs

# A wheel from a clean clone, in a fresh venv beside PyPI's unrelated 'ir' and 'compiler'
# packages, runs the demo from an unrelated directory (nothing of ours at the top level).
install-check:
	PYTHON=$(PYTHON) bash tests/install/check_wheel.sh

clean:
	rm -rf $(VENV) $(OV_VENV) $(RAY_VENV) $(EXPORT_VENV) $(POLYGRAPHY_VENV) *.egg-info .pytest_cache .hypothesis site
