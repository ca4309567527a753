# gpusim: set-up and everyday commands. Every target creates .venv itself on a fresh machine.
#   make app    install what the planner needs and start it (http://localhost:8501)
#   make test   install everything the tests need and run the whole suite
#   make bench  print the speed figures of benchmarks/ (benchmarks/calibration_heldout.py runs apart: minutes)
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip --disable-pip-version-check
# The CPU build of torch: a fresh machine must not pull a multi-GB CUDA build just to run the tests.
# On a GPU machine: make test TORCH_SPEC="torch" (or your CUDA wheel).
TORCH_SPEC ?= torch==2.13.0
PORT ?= 8501

.PHONY: app test bench clean-venv

$(PY):
	$(PYTHON) -m venv $(VENV)

$(VENV)/.app-stamp: pyproject.toml | $(PY)
	$(PIP) install -q -e ".[app]"
	touch $@

$(VENV)/.test-stamp: pyproject.toml | $(PY)
	$(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[app,calibrate,test]" "$(TORCH_SPEC)"
	touch $@ $(VENV)/.app-stamp

app: $(VENV)/.app-stamp
	$(VENV)/bin/streamlit run app.py --server.port $(PORT) --browser.gatherUsageStats false

test: $(VENV)/.test-stamp
	$(PY) -m pytest -q

bench: $(VENV)/.test-stamp
	$(PY) benchmarks/model_speed.py
	$(PY) benchmarks/cold_start.py
	$(PY) benchmarks/sweep.py
	$(PY) benchmarks/app_rerun.py
	$(PY) benchmarks/llm_speed.py --rows 200000
	$(PY) benchmarks/layout_search.py

clean-venv:
	rm -rf $(VENV)
