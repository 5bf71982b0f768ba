# The two entry points of the README: `make demo` and `make test`.
CARGO ?= cargo
PYTHON ?= python3

.PHONY: demo test deps fmt lint unit python python-test bench sim-all sim-demo install uninstall install-check

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

## Crates checked for file-level import circles: all of them.
IMPORT_CYCLE_CRATES = $(patsubst %/src,%,$(wildcard crates/*/src crates/*/*/src))

lint:
	$(CARGO) clippy --workspace --all-targets --all-features -- -D warnings
	$(PYTHON) scripts/import-cycles.py $(IMPORT_CYCLE_CRATES)
	$(PYTHON) -m ruff check --select F,E9 python

unit:
	$(CARGO) test --workspace --all-features
	$(MAKE) -C crates/capi/c check
	$(MAKE) -C integrations/starpu check PROFILE=debug
	./packaging/check-install.sh

## Install: the binary, libhetsched (.so, .a), its header and pkg-config
## file, the StarPU policy (where StarPU is installed), the example config
## as $(SYSCONFDIR)/hetsched/hetsched.toml (kept if present), the systemd
## unit, shell completions and man pages. A release build unless PROFILE=debug.
PREFIX ?= /usr/local
DESTDIR ?=
SYSCONFDIR ?= /etc
PROFILE ?= release
BINDIR = $(PREFIX)/bin
LIBDIR = $(PREFIX)/lib
INCLUDEDIR = $(PREFIX)/include
DATADIR = $(PREFIX)/share
SYSTEMDUNITDIR ?= $(LIBDIR)/systemd/system
BUILT = target/$(PROFILE)
PROFILE_FLAG = $(if $(filter release,$(PROFILE)),--release,)
HAVE_STARPU := $(shell pkg-config --exists starpu-1.3 2>/dev/null && echo yes)

# Cargo feature flags of the installed binary and library (CUDA: add cuda).
INSTALL_FEATURES ?= --features opencl

# The binary and the shared library are installed without their debug
# info, which goes next to them in a `.debug` directory that gdb and perf
# find through the `.gnu_debuglink` section (most of a build's size is
# debug info). SPLIT_DEBUG=no installs them as built, SPLIT_DEBUG=strip
# without their debug info (the Debian package).
SPLIT_DEBUG ?= yes
OBJCOPY ?= objcopy
# $(call split_debug,DIR,FILE): moves FILE's debug info to DIR/.debug/FILE.debug.
define split_debug
	install -d $(1)/.debug
	$(OBJCOPY) --only-keep-debug $(1)/$(2) $(1)/.debug/$(2).debug
	chmod 644 $(1)/.debug/$(2).debug
	$(OBJCOPY) --strip-debug --add-gnu-debuglink=$(1)/.debug/$(2).debug $(1)/$(2)
endef

# Two builds: in one, Cargo would unify the features of both, and the
# library would carry what only the daemon needs (the coordinator and its
# conic solver: hetsched-monitor's `coordination`).
install:
	$(CARGO) build -q $(PROFILE_FLAG) -p hetsched $(INSTALL_FEATURES)
	$(CARGO) build -q $(PROFILE_FLAG) -p hetsched-capi $(INSTALL_FEATURES)
	$(CARGO) build -q $(PROFILE_FLAG) -p hetsched-opencl-layer -p hetsched-cuda-intercept
	install -d $(DESTDIR)$(BINDIR) $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(INCLUDEDIR) \
	    $(DESTDIR)$(SYSTEMDUNITDIR) $(DESTDIR)$(SYSCONFDIR)/hetsched $(DESTDIR)$(DATADIR)/man/man1 \
	    $(DESTDIR)$(DATADIR)/bash-completion/completions $(DESTDIR)$(DATADIR)/zsh/site-functions \
	    $(DESTDIR)$(DATADIR)/fish/vendor_completions.d
	install -m 755 $(BUILT)/hetsched $(DESTDIR)$(BINDIR)/hetsched
	install -m 755 $(BUILT)/libhetsched.so $(DESTDIR)$(LIBDIR)/libhetsched.so
	install -d $(DESTDIR)$(LIBDIR)/hetsched
	install -m 755 $(BUILT)/libhetsched_opencl_layer.so $(BUILT)/libhetsched_cuda_intercept.so $(DESTDIR)$(LIBDIR)/hetsched/
	install -m 644 $(BUILT)/libhetsched.a $(DESTDIR)$(LIBDIR)/libhetsched.a
ifeq ($(SPLIT_DEBUG),yes)
	$(call split_debug,$(DESTDIR)$(BINDIR),hetsched)
	$(call split_debug,$(DESTDIR)$(LIBDIR),libhetsched.so)
endif
ifeq ($(SPLIT_DEBUG),strip)
	$(OBJCOPY) --strip-debug $(DESTDIR)$(BINDIR)/hetsched
	$(OBJCOPY) --strip-debug $(DESTDIR)$(LIBDIR)/libhetsched.so
	$(OBJCOPY) --strip-debug $(DESTDIR)$(LIBDIR)/libhetsched.a
	$(OBJCOPY) --strip-debug $(DESTDIR)$(LIBDIR)/hetsched/libhetsched_opencl_layer.so
	$(OBJCOPY) --strip-debug $(DESTDIR)$(LIBDIR)/hetsched/libhetsched_cuda_intercept.so
endif
	install -m 644 crates/capi/include/hetsched.h $(DESTDIR)$(INCLUDEDIR)/hetsched.h
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@LIBDIR@|$(LIBDIR)|' -e 's|@INCLUDEDIR@|$(INCLUDEDIR)|' \
	    -e "s|@VERSION@|$$(sed -n 's/^version = \"\(.*\)\"/\1/p' Cargo.toml | head -1)|" \
	    crates/capi/c/hetsched.pc.in > $(DESTDIR)$(LIBDIR)/pkgconfig/hetsched.pc
	sed -e 's|/usr/local/bin/hetsched|$(BINDIR)/hetsched|' -e 's|/etc/hetsched/|$(SYSCONFDIR)/hetsched/|' \
	    packaging/systemd/hetsched.service > $(DESTDIR)$(SYSTEMDUNITDIR)/hetsched.service
	install -m 644 packaging/systemd/hetsched.socket $(DESTDIR)$(SYSTEMDUNITDIR)/hetsched.socket
	chmod 644 $(DESTDIR)$(SYSTEMDUNITDIR)/hetsched.service
	[ -e $(DESTDIR)$(SYSCONFDIR)/hetsched/hetsched.toml ] || \
	    install -m 644 config/hetsched.example.toml $(DESTDIR)$(SYSCONFDIR)/hetsched/hetsched.toml
	$(BUILT)/hetsched manpages $(DESTDIR)$(DATADIR)/man/man1
	$(BUILT)/hetsched completions bash > $(DESTDIR)$(DATADIR)/bash-completion/completions/hetsched
	$(BUILT)/hetsched completions zsh > $(DESTDIR)$(DATADIR)/zsh/site-functions/_hetsched
	$(BUILT)/hetsched completions fish > $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/hetsched.fish
ifeq ($(HAVE_STARPU),yes)
	$(MAKE) -C integrations/starpu PROFILE=$(PROFILE) RPATH=$(LIBDIR) OUT=$(CURDIR)/$(BUILT)/starpu-install \
	    $(CURDIR)/$(BUILT)/starpu-install/libhetsched_starpu.so
	install -d $(DESTDIR)$(LIBDIR)/hetsched
	install -m 755 $(BUILT)/starpu-install/libhetsched_starpu.so $(DESTDIR)$(LIBDIR)/hetsched/libhetsched_starpu.so
endif

uninstall:
	rm -f $(DESTDIR)$(BINDIR)/hetsched $(DESTDIR)$(LIBDIR)/libhetsched.so $(DESTDIR)$(LIBDIR)/libhetsched.a \
	    $(DESTDIR)$(BINDIR)/.debug/hetsched.debug $(DESTDIR)$(LIBDIR)/.debug/libhetsched.so.debug \
	    $(DESTDIR)$(INCLUDEDIR)/hetsched.h $(DESTDIR)$(LIBDIR)/pkgconfig/hetsched.pc \
	    $(DESTDIR)$(SYSTEMDUNITDIR)/hetsched.service $(DESTDIR)$(SYSTEMDUNITDIR)/hetsched.socket \
	    $(DESTDIR)$(DATADIR)/man/man1/hetsched*.1 \
	    $(DESTDIR)$(DATADIR)/bash-completion/completions/hetsched $(DESTDIR)$(DATADIR)/zsh/site-functions/_hetsched \
	    $(DESTDIR)$(DATADIR)/fish/vendor_completions.d/hetsched.fish $(DESTDIR)$(LIBDIR)/hetsched/libhetsched_starpu.so \
	    $(DESTDIR)$(LIBDIR)/hetsched/libhetsched_opencl_layer.so $(DESTDIR)$(LIBDIR)/hetsched/libhetsched_cuda_intercept.so
	@echo "kept $(DESTDIR)$(SYSCONFDIR)/hetsched/hetsched.toml and /var/lib/hetsched (remove them by hand)"

## The Debian package, target/debian/hetsched_<version>-1_<arch>.deb
## (cargo-deb, installed when missing): what `make install` puts in a
## staging tree with PREFIX=/usr, without debug info; the metadata is in
## crates/cli/Cargo.toml. A release build unless PROFILE=debug. The
## StarPU policy is left out (its package would depend on StarPU).
DEB_ROOT = target/release/deb-root
.PHONY: deb deb-check
deb: deps
	command -v cargo-deb >/dev/null 2>&1 || $(CARGO) install --locked cargo-deb@^3.8
	rm -rf $(DEB_ROOT)
	$(MAKE) install DESTDIR=$(CURDIR)/$(DEB_ROOT) PREFIX=/usr SYSCONFDIR=/etc \
	    SYSTEMDUNITDIR=/usr/lib/systemd/system SPLIT_DEBUG=strip HAVE_STARPU=
	$(CARGO) deb -p hetsched --no-build --no-strip

## Installs the package built by `make deb` with dpkg and checks it, then
## removes and purges it (packaging/check-deb.sh; as root).
deb-check:
	./packaging/check-deb.sh

## `make install` into a scratch DESTDIR (debug build), then checks what
## it installed: the unit file with systemd-analyze, a C program built
## with the installed pkg-config file, the man pages and completions.
install-check:
	./packaging/check-install.sh

## The Python package, built from python/ and installed (release build).
python: deps
	$(PYTHON) -m maturin build --release --manifest-path python/Cargo.toml -o target/wheels
	$(PYTHON) -m pip install -q --root-user-action=ignore --force-reinstall --no-deps target/wheels/hetsched-*-abi3-*.whl

## A portable wheel, target/wheels/hetsched-<version>-cp39-abi3-manylinux_2_28_x86_64.whl:
## the module, and the `hetsched` binary with the OpenCL layer and CUDA
## interposer (pip puts them in the environment's bin/ and lib/hetsched/).
## Linked by zig against glibc 2.28 (maturin --zig, cargo-zigbuild; both
## from PyPI, installed when missing); hwloc is loaded at run time. Checked
## with auditwheel. A release build unless WHEEL_PROFILE=dev.
WHEEL_TARGET = x86_64-unknown-linux-gnu
WHEEL_GLIBC = 2.28
WHEEL_PROFILE ?= release
WHEEL_BUILT = target/$(WHEEL_TARGET)/$(if $(filter dev,$(WHEEL_PROFILE)),debug,$(WHEEL_PROFILE))
WHEEL_STAGE = target/wheel-stage
.PHONY: wheel wheel-check
wheel: deps
	$(PYTHON) -c 'import ziglang' 2>/dev/null || $(PYTHON) -m pip install -q --root-user-action=ignore ziglang
	command -v cargo-zigbuild >/dev/null 2>&1 || $(PYTHON) -m pip install -q --root-user-action=ignore cargo-zigbuild
	$(PYTHON) -c 'import auditwheel' 2>/dev/null || $(PYTHON) -m pip install -q --root-user-action=ignore auditwheel
	$(CARGO) zigbuild -q --profile $(WHEEL_PROFILE) --target $(WHEEL_TARGET).$(WHEEL_GLIBC) \
	    -p hetsched $(INSTALL_FEATURES) -p hetsched-opencl-layer -p hetsched-cuda-intercept
	rm -rf $(WHEEL_STAGE) && mkdir -p $(WHEEL_STAGE)/wheel
	$(PYTHON) -m maturin build -q --profile $(WHEEL_PROFILE) --zig --target $(WHEEL_TARGET) \
	    --compatibility manylinux_$(subst .,_,$(WHEEL_GLIBC)) --manifest-path python/Cargo.toml -o $(WHEEL_STAGE)/wheel
	for f in hetsched libhetsched_opencl_layer.so libhetsched_cuda_intercept.so; do \
	    $(OBJCOPY) --strip-debug $(WHEEL_BUILT)/$$f $(WHEEL_STAGE)/$$f || exit 1; done
	$(PYTHON) packaging/wheel-add-files.py $(WHEEL_STAGE)/wheel/hetsched-*.whl \
	    scripts/hetsched=$(WHEEL_STAGE)/hetsched \
	    data/lib/hetsched/libhetsched_opencl_layer.so=$(WHEEL_STAGE)/libhetsched_opencl_layer.so \
	    data/lib/hetsched/libhetsched_cuda_intercept.so=$(WHEEL_STAGE)/libhetsched_cuda_intercept.so
	$(PYTHON) -m auditwheel show $(WHEEL_STAGE)/wheel/hetsched-*.whl
	mkdir -p target/wheels && mv $(WHEEL_STAGE)/wheel/hetsched-*.whl target/wheels/

## Installs the wheel `make wheel` built into a fresh virtual environment
## and runs the Python tests that need no device there, with the system's
## hwloc hidden (packaging/check-wheel.sh).
wheel-check:
	./packaging/check-wheel.sh

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

## Faults on the same 2-node cluster (a daemon killed, an executor killed,
## a node removed), each in the middle of a run of >= 300 calls with 16 in
## flight: one line per fault, `ray fault <name>: NN.N % of calls
## succeeded, recovered in X.X s`.
.PHONY: ray-faults
ray-faults: python
	$(CARGO) build --release -q -p hetsched --features opencl
	unshare $$( [ "$$(id -u)" = 0 ] && printf -- -n || printf -- -rn ) sh -c 'ip link set lo up && HETSCHED_BIN=$(CURDIR)/target/release/hetsched exec $(PYTHON) python/demos/ray_faults.py'

## Regenerates the figures of docs/PERFORMANCE.md: the criterion benches,
## the simulator's scenarios, `make demo`, the daemon's and the runtime's
## `hetsched bench` / `pipeline` commands and the balancer's overhead, raw
## outputs under bench-out/ (BENCH_OUT=DIR). BENCH_AREAS picks the areas
## (`scripts/bench.sh --list`: devices, starpu, ray, … need PoCL, StarPU, Ray
## or root and run only when named), e.g. `make bench BENCH_AREAS="criterion devices"`.
BENCH_AREAS ?=
bench:
	CARGO="$(CARGO)" PYTHON="$(PYTHON)" ./scripts/bench.sh $(BENCH_AREAS)

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
