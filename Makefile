# The two entry points of the README: `make demo` and `make test`.
CARGO ?= cargo

.PHONY: demo test deps fmt lint unit bench sim-all

## The main job: the Rinnegan contention scenario in the simulator.
demo: deps
	$(CARGO) run --release -q -p hetsched -- sim run rinnegan-contention --out sim-out/rinnegan-contention

## Everything CI checks: format, lints, all tests.
test: deps fmt lint unit

deps:
	@./scripts/install-deps.sh

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

unit:
	$(CARGO) test --workspace

## Criterion benchmarks (figures go to docs/PERFORMANCE.md).
bench:
	$(CARGO) bench -p hetsched-core --benches -- --warm-up-time 1 --measurement-time 3
	$(CARGO) bench -p hetsched-views --benches -- --warm-up-time 1 --measurement-time 3
	$(CARGO) run --release -q -p hetsched -- bench gate --clients 64 --task-us 5000

## Every built-in scenario, with CSV/JSON/SVG under sim-out/.
sim-all:
	$(CARGO) run --release -q -p hetsched -- sim all --out sim-out
