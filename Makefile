# The two README commands: `make demo` and `make test`.  Both create .venv on a fresh
# machine and install the package with what it needs from PyPI.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
OUT    ?= demo_output
PYTEST_ARGS ?=
# The suite's matrices are small: OpenBLAS threads only add synchronisation overhead on them
# (measured 10x slower scipy expm on a busy 2-core machine), so run single-threaded.
export OPENBLAS_NUM_THREADS ?= 1

.PHONY: venv demo test test-fast bench lint docs clean urdf

venv: $(STAMP)

$(STAMP): setup.py package.xml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -qq --upgrade pip
	$(PY) -m pip install -qq -e '.[test,ros,dev]'
	touch $(STAMP)

demo: venv
	$(VENV)/bin/multibody models
	$(VENV)/bin/multibody requirements arm7 demo --payload-mass 5 --payload-com 0 0 0.05 --out $(OUT)
	$(VENV)/bin/multibody analyze passive_arm --gamma 0 0 0.5
	$(VENV)/bin/multibody invert config/scenarios/invert_passive_arm.yaml --out $(OUT)
	$(VENV)/bin/multibody simulate slider_crank --duration 2 --v0 12 -12 --out $(OUT)/slider_crank.csv --plot $(OUT)/slider_crank.png --animate $(OUT)/slider_crank.html

test: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q $(PYTEST_ARGS)

# The library tests without the ROS/DDS ones and those over about 10 s (markers in setup.cfg).
test-fast: venv
	$(PY) -m pytest -q -m "not ros and not slow" $(PYTEST_ARGS)

docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

bench: venv
	$(PY) bench/run.py --out bench/results.json

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

urdf: venv
	$(PY) tools/make_robots.py

clean:
	rm -rf $(VENV) $(OUT) build site *.egg-info .pytest_cache
