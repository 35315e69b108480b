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
# Debian packages: libiio for pyadi-iio and its tools; the photograph corpus's packages
# (hil/assets/corpus/manifest.json lists them)
CORPUS_DEBS := $(shell $(PYTHON) -c 'import json; print(" ".join(json.load(open("hil/assets/corpus/manifest.json"))["apt_packages"]))')
DEBS := libiio0 libiio-utils $(CORPUS_DEBS)
# what only the tests use: headless Chromium for the dashboard's browser test, GNU Radio
# (system python3, gr-iio, gr-zeromq) for the interoperability tests. Installed by make test
# when root; elsewhere those tests skip naming the package (CI: HIL_REQUIRE_ALL makes them fail)
TEST_DEBS := chromium chromium-driver gnuradio

.PHONY: demo test lint setup clean debs test-debs

# installs the Debian packages when root; otherwise stops at once naming what to install
debs:
	@$(MAKE) -s _apt PKGS="$(DEBS)" OPTIONAL=

test-debs:
	@$(MAKE) -s _apt PKGS="$(TEST_DEBS)" OPTIONAL=1

_apt:
	@missing=$$(for p in $(PKGS); do dpkg-query -W -f='$${Status}' $$p 2>/dev/null | grep -q "ok installed" || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing Debian packages: $$missing"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null || \
	      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing >/dev/null; }; \
	  elif [ -n "$(OPTIONAL)" ]; then \
	    echo "note: tests needing $$missing will skip; install with: sudo apt-get install $$missing"; \
	  else \
	    echo "missing Debian packages: $$missing"; echo "install them with: sudo apt-get install $$missing"; exit 1; \
	  fi; \
	fi

$(STAMP): pyproject.toml | debs
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q "$(TORCH_SPEC)"
	$(PY) -m pip install -q -e ".[test,pluto,baseline]"
	touch $(STAMP)

setup: $(STAMP)

# four held-out photographs of the corpus, sent whole (768 px on the long side)
DEMO_PHOTOS ?= runs/demo-photos
demo: $(STAMP)
	$(VENV)/bin/hil corpus --quiet --export-whole $(DEMO_PHOTOS) --count 4
	$(VENV)/bin/hil link --images $(DEMO_PHOTOS)

lint: $(STAMP)
	$(VENV)/bin/ruff check hil tests scripts

test: $(STAMP) test-debs
	$(VENV)/bin/ruff check hil tests scripts
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info
