# The two entry points of the README: `make demo` and `make test`.
CARGO ?= cargo
PYTHON ?= python3

.PHONY: demo test deps fmt lint unit python python-test bench sim-all sim-demo

## The main job: Rinnegan Table 3 apps as real processes sharing a real
## daemon's CPUs and emulated GPUs, native placement against hetsched.
demo: deps
	$(CARGO) run --release -q -p hetsched -- demo --out demo-out

## Everything CI checks: format, lints, all tests.
test: deps fmt lint unit python-test

deps:
	@./scripts/install-deps.sh

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	$(PYTHON) -m ruff check --select F,E9 python

unit:
	$(CARGO) test --workspace --all-features
	$(MAKE) -C crates/capi/c check
	$(MAKE) -C integrations/starpu check PROFILE=debug

## The Python package, built from python/ and installed (release build).
python: deps
	$(PYTHON) -m maturin build --release --manifest-path python/Cargo.toml -o target/wheels
	$(PYTHON) -m pip install -q --root-user-action=ignore --force-reinstall --no-deps target/wheels/hetsched-*-abi3-*.whl

## The Python tests against a real daemon (a debug build of the package,
## which reuses what `unit` compiled).
python-test: deps
	$(CARGO) build -q -p hetsched --all-features
	rm -rf target/wheels-dev
	$(PYTHON) -m maturin build --profile dev --manifest-path python/Cargo.toml -o target/wheels-dev
	$(PYTHON) -m pip install -q --root-user-action=ignore --force-reinstall --no-deps target/wheels-dev/hetsched-*-abi3-*.whl
	$(PYTHON) -m pytest -q python/tests

## The Ray benchmark: a 2-node Ray cluster on this machine (each node a
## hetsched daemon), Ray's own scheduling against hetsched.ray; inside a
## network namespace with only loopback up, so Ray stays on 127.0.0.1.
.PHONY: ray-demo
ray-demo: python
	$(CARGO) build --release -q -p hetsched --features opencl
	$(PYTHON) -c 'import matplotlib' 2>/dev/null || $(PYTHON) -m pip install -q --root-user-action=ignore matplotlib
	unshare $$( [ "$$(id -u)" = 0 ] && printf -- -n || printf -- -rn ) sh -c 'ip link set lo up && HETSCHED_BIN=$(CURDIR)/target/release/hetsched exec $(PYTHON) python/demos/ray_demo.py --out ray-out'

## Criterion benchmarks (figures go to docs/PERFORMANCE.md).
bench:
	$(CARGO) bench -p hetsched-core --benches -- --warm-up-time 1 --measurement-time 3
	$(CARGO) bench -p hetsched-views --benches -- --warm-up-time 1 --measurement-time 3
	$(CARGO) bench -p hetsched-runtime --benches -- --warm-up-time 1 --measurement-time 3
	$(CARGO) run --release -q -p hetsched -- bench gate --clients 64 --task-us 5000

## The Rinnegan contention scenario in the simulator (CSV, JSON, SVG).
sim-demo:
	$(CARGO) run --release -q -p hetsched -- sim run rinnegan-contention --out sim-out/rinnegan-contention

## Every built-in scenario, with CSV/JSON/SVG under sim-out/.
sim-all:
	$(CARGO) run --release -q -p hetsched -- sim all --out sim-out

## StarPU contention experiment: eager vs dmda vs the hetsched policy
## (figures go to docs/PERFORMANCE.md; see docs/starpu.md).
.PHONY: starpu-bench
starpu-bench: deps
	integrations/starpu/bench.sh
