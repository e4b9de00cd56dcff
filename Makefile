# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The CPU build of torch; see README.md for GPU installs (override TORCH=...).
TORCH  ?= torch==2.13.0
# pytest-xdist workers for `make test` and `make test-fast` (0: one process): each has its own Ray
# instance, and each test file runs whole on one of them (its module fixtures built once).
TEST_WORKERS ?= 2
TEST_PARALLEL = -n $(TEST_WORKERS) --dist loadfile
DEMO_DATA := data/cartpole-expert
DEMO_RUN  := runs/demo

# A CUDA build of torch for `make gpu-check`; pick the CUDA version the machine's driver supports.
GPU_TORCH ?= torch==2.13.0 --index-url https://download.pytorch.org/whl/cu126
# A Python that already has CUDA torch and offline-rl's dependencies skips the install.
GPU_PYTHON ?=

.PHONY: demo test test-fast docs bench gpu-check clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet $(TORCH)
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

$(DEMO_DATA)/dataset.json: $(VENV)/.installed
	$(BIN)/offline-rl datasets make CartPole-v1 expert --out $(DEMO_DATA) --episodes 100 --seed 0

demo: $(DEMO_DATA)/dataset.json
	$(BIN)/offline-rl train configs/bc_cartpole.yaml --stop-return 495 --max-iterations 2000 --output-dir $(DEMO_RUN)
	$(BIN)/offline-rl evaluate $(DEMO_RUN)/checkpoint --episodes 20
	$(BIN)/offline-rl plot $(DEMO_RUN)

test: $(VENV)/.installed
	$(BIN)/python -m pytest $(TEST_PARALLEL)

# The inner loop: everything but the tests marked slow (CI runs the whole suite).
test-fast: $(VENV)/.installed
	$(BIN)/python -m pytest $(TEST_PARALLEL) -m "not slow and not gpu"

# The documentation site, into site/ (tests/test_docs.py builds it too and runs its code blocks).
docs: $(VENV)/.installed
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

bench: $(DEMO_DATA)/dataset.json
	$(BIN)/python benchmarks/bc_cartpole.py

# The GPU learner path on this machine's GPUs: benchmarks/gpu.py's figures, then the gpu tests.
gpu-check:
ifeq ($(GPU_PYTHON),)
	$(MAKE) $(VENV)/.installed
	$(BIN)/pip install --quiet --upgrade $(GPU_TORCH)
	$(MAKE) gpu-check GPU_PYTHON=$(BIN)/python
else
	$(GPU_PYTHON) benchmarks/gpu.py
	$(GPU_PYTHON) -m pytest -p no:cacheprovider -m gpu tests/test_gpu.py
endif

clean:
	rm -rf $(VENV) data runs site .pytest_cache
