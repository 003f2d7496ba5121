# visionzoo: `make test` and `make demo` set everything up from a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# torch/torchvision are installed first and pinned so pip never pulls another (multi-GB) build.
TORCH_SPEC ?= torch==2.14.1 torchvision==0.29.1
STAMP  := $(VENV)/.visionzoo-installed
DEMO_DIR ?= runs/demo

.PHONY: test demo install lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q $(TORCH_SPEC)
	$(PY) -m pip install -q -e '.[dev]' $(TORCH_SPEC)
	touch $(STAMP)

install: $(STAMP)

test: $(STAMP)
	$(PY) -m pytest -q

demo: $(STAMP)
	$(PY) -m visionzoo.demo --output-dir $(DEMO_DIR)

lint: $(STAMP)
	$(VENV)/bin/ruff check .

bench: $(STAMP)
	for b in benchmarks/*.py; do $(PY) $$b --quick || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache
