# gpusim: set-up and everyday commands. Every target creates .venv itself on a fresh machine.
#   make app    install what the planner needs and start it (http://localhost:8501)
#   make test   install everything the tests need and run the whole suite
#   make bench  print the speed figures of benchmarks/ (benchmarks/calibration_heldout.py runs apart: minutes)
#   make readme rerun every `$ gpusim ...` example of README.md and docs/*.md and rewrite its shown output
#   make track-record  recompute the model's track record on validation/ (gpusim/data/track_record.json) after a
#               model or table change (a test fails while the file is out of date)
#   make screenshots  regenerate docs/screenshot-*.png from the running app (needs Chromium, as make test)
#   make fuzz   hostile command lines over every subcommand; prints invocations / internal errors / hangs
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
# The CPU build of torch: a fresh machine must not pull a multi-GB CUDA build just to run the tests.
# On a GPU machine: make test TORCH_SPEC="torch" (or your CUDA wheel).
TORCH_SPEC ?= torch==2.13.0
PORT ?= 8501
# The browser tests drive Debian's Chromium (tests/app/test_browser.py). `make test` installs it with apt-get
# when run as root on a Debian/Ubuntu system; otherwise it says how, and the browser tests are skipped.
CHROMIUM ?= /usr/bin/chromium

.PHONY: app test bench readme track-record screenshots fuzz chromium clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

# editable_mode=compat: the checkout goes on sys.path as a plain .pth entry, so that a folder named gpusim in the
# working directory cannot shadow the package (setuptools' default editable finder loses to it; issue 19,
# tests/packaging/test_editable.py); gpusim/__init__.py maps hwdb/ and calibrate/ as pyproject's package-dir does.
$(VENV)/.app-stamp: pyproject.toml | $(PY)
	$(PIP) install -q --config-settings editable_mode=compat -e ".[app]"
	touch $@

$(VENV)/.test-stamp: pyproject.toml | $(PY)
	$(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q --config-settings editable_mode=compat -e ".[app,calibrate,test]" "$(TORCH_SPEC)"
	touch $@ $(VENV)/.app-stamp

app: $(VENV)/.app-stamp
	$(VENV)/bin/streamlit run app.py --server.port $(PORT) --browser.gatherUsageStats false

chromium:
	@if [ ! -x $(CHROMIUM) ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing chromium (apt-get) for the browser tests"; \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "warning: could not install chromium; the browser tests will be skipped" >&2; \
	  else \
	    echo "note: $(CHROMIUM) is missing, so the browser tests will be skipped: run" \
	         "'sudo apt-get install -y chromium' (Debian/Ubuntu) once" >&2; \
	  fi; \
	fi

test: $(VENV)/.test-stamp chromium
	$(PY) -m pytest -q

screenshots: $(VENV)/.test-stamp chromium
	GPUSIM_SCREENSHOT_DIR=docs $(PY) -m pytest -q -p no:cacheprovider tests/app/test_browser.py -k page_renders

fuzz: $(VENV)/.test-stamp
	$(PY) benchmarks/fuzz_cli.py --cases 400 --seed 0

# every benchmark runs and prints its figures; targets missed are listed at the end, not failures (exit 0;
# non-zero only when a benchmark itself crashed). The list is in benchmarks/run_all.py.
bench: $(VENV)/.test-stamp
	$(PY) benchmarks/run_all.py

# the README's examples are checked by tests/docs/test_readme_examples.py; after a change to the model, rerun them
readme: $(VENV)/.app-stamp
	$(PY) tools/readme_examples.py --update
	$(PY) tools/readme_examples.py

track-record: $(VENV)/.app-stamp
	$(PY) -m gpusim.track_record --write

clean-venv:
	rm -rf $(VENV)
