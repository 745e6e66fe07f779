# The two README commands: `make demo` and `make test`.  Both create .venv on a fresh
# machine and install the package with what it needs from PyPI.
VENV   ?= .venv
PYTHON ?= python3
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-stamp
# ROS 2 launch/launch_ros are not on PyPI: wheels beside the clone (docs/ros-launch.md); the
# launch tests skip without them.  lark is left out: launch needs it only for XML/YAML launch
# files, and it would overwrite the lark-parser that rosidl_parser pulls in (same module name).
# launch_testing goes to $(VENV)/launch-testing, off sys.path: its pytest plugin does not load
# under pytest 9 (hookimpl argument 'path'); `launch_test` runs from there in a subprocess.
LAUNCH_WHEELS ?= ../shared/ros-launch-wheels
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
	if [ -d $(LAUNCH_WHEELS) ]; then \
	  $(PY) -m pip install -qq osrf-pycommon ros-lifecycle-msgs ros-ament-index-python && \
	  $(PY) -m pip install -qq --no-deps $(LAUNCH_WHEELS)/launch-[0-9]*.whl \
	    $(LAUNCH_WHEELS)/launch_xml-*.whl $(LAUNCH_WHEELS)/launch_yaml-*.whl \
	    $(LAUNCH_WHEELS)/launch_ros-*.whl $(LAUNCH_WHEELS)/composition_interfaces-*.whl && \
	  $(PY) -m pip install -qq --no-deps --target $(VENV)/launch-testing \
	    $(LAUNCH_WHEELS)/launch_testing-*.whl $(LAUNCH_WHEELS)/launch_testing_ros-*.whl; \
	fi
	touch $(STAMP)

demo: venv
	$(VENV)/bin/multibody models
	$(VENV)/bin/multibody requirements arm7 demo --payload-mass 5 --payload-com 0 0 0.05 --out $(OUT)
	$(VENV)/bin/multibody analyze passive_arm --gamma 0 0 0.5
	$(VENV)/bin/multibody invert config/scenarios/invert_passive_arm.yaml --out $(OUT)
	$(VENV)/bin/multibody simulate slider_crank --duration 2 --v0 12 -24 --out $(OUT)/slider_crank.csv --plot $(OUT)/slider_crank.png --animate $(OUT)/slider_crank.html

# The library tests run in TEST_WORKERS processes (pytest-xdist; a test file stays in one
# process, so its module fixtures are computed once), then the ROS/DDS tests one at a time:
# their nodes and loops need the machine's cores.  Exit status: the first half's failure, else
# the second's; "no test collected" (5) in one half counts only when both collect nothing.
TEST_WORKERS ?= 2
test: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -q -m "not ros" -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS); a=$$?; \
	$(PY) -m pytest -q -m ros $(PYTEST_ARGS); b=$$?; \
	if [ $$a -eq 5 ] && [ $$b -eq 5 ]; then exit 5; fi; \
	if [ $$a -ne 0 ] && [ $$a -ne 5 ]; then exit $$a; fi; \
	if [ $$b -ne 0 ] && [ $$b -ne 5 ]; then exit $$b; fi

# The library tests without the ROS/DDS ones and those over about 10 s (markers in setup.cfg).
test-fast: venv
	$(PY) -m pytest -q -m "not ros and not slow" $(PYTEST_ARGS)

docs: venv
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# The peer simulators (bench extra) have wheels for fewer Pythons/platforms than the suite:
# where they do not install, bench_peers records them as "not installed".
bench: venv
	$(PY) -m pip install -qq -e '.[bench]' || \
	  echo "make bench: the bench extra did not install; missing peers are skipped" >&2
	$(PY) bench/run.py --out bench/results.json

lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

urdf: venv
	$(PY) tools/make_robots.py

clean:
	rm -rf $(VENV) $(OUT) build site *.egg-info .pytest_cache
