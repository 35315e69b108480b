# Two entry points, each sets itself up on first use:
#   make demo   - the project's main job: the JSCC link on the simulated Pluto
#   make test   - lint and the test suite
VENV ?= .venv
PYTHON ?= python3
# The CPU build of PyTorch to install when the environment has no torch.
# GPU users: install your own torch into $(VENV) first, it is kept.
TORCH_SPEC ?= torch==2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint setup clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,pluto,baseline]"
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/hil link

lint: $(STAMP)
	$(VENV)/bin/ruff check hil tests scripts

test: $(STAMP)
	$(VENV)/bin/ruff check hil tests scripts
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
