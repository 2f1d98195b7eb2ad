# placer — the two commands users need: `make demo` and `make test`.
# Everything is installed into a local virtualenv (.venv); nothing global is touched.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast lint typecheck unit install clean bench results

$(STAMP): pyproject.toml
	@echo "installing placer and its dependencies into $(VENV) (a few minutes the first time)"
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m placer.demo

lint: $(STAMP)
	$(BIN)/ruff check placer tests simulations
	$(BIN)/ruff format --check placer tests simulations
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy --strict placer

unit: $(STAMP)
	$(BIN)/pytest -q

test: lint typecheck unit

# the inner loop: lint, types and every test but the slow ones (processes, the demo, the wheel,
# benchmark runs, the docs' commands: @pytest.mark.slow); `make test` still runs them all
test-fast: lint typecheck
	$(BIN)/pytest -q -m "not slow"
# the tables of README.md, simulations/README.md and docs/ from simulations/results/*.json
results: $(STAMP)
	$(BIN)/python -m simulations.results_tables

clean:
	rm -rf $(VENV) build *.egg-info .mypy_cache .pytest_cache .ruff_cache .import_linter_cache .grimp_cache
