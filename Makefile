# Two commands on a fresh machine: `make demo` and `make test` (see README.md).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# The CPU build of torch; see README.md for GPU installs (override TORCH=...).
TORCH  ?= torch==2.13.0
DEMO_DATA := data/cartpole-expert
DEMO_RUN  := runs/demo

.PHONY: demo test bench clean

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
	$(BIN)/python -m pytest

bench: $(DEMO_DATA)/dataset.json
	$(BIN)/python benchmarks/bc_cartpole.py

clean:
	rm -rf $(VENV) data runs .pytest_cache
