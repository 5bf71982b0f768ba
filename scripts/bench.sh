#!/usr/bin/env bash
# Regenerates the figures of docs/PERFORMANCE.md: runs the commands its
# tables name and writes each one's raw output to $BENCH_OUT/AREA/STEP.txt
# (default bench-out/), printing which section of docs/PERFORMANCE.md each
# output feeds. It does not edit the document: copy the figures in by hand,
# with the machine and the date.
#
#   scripts/bench.sh                 # the default areas (what `make bench` runs)
#   scripts/bench.sh AREA...         # only these areas (see --list)
#   scripts/bench.sh --list          # the areas, what they feed and need
#   scripts/bench.sh --dry-run AREA  # print the commands without running them
#
# Environment: BENCH_OUT (output directory), CARGO (default cargo), PYTHON
# (default python3), CRITERION_ARGS (default "--warm-up-time 1
# --measurement-time 3"). A step that fails is reported at the end and the
# next one runs; the exit status is 1 if any failed.
set -uo pipefail
cd "$(dirname "$0")/.."

CARGO=${CARGO:-cargo}
PYTHON=${PYTHON:-python3}
OUT=${BENCH_OUT:-bench-out}
CRITERION_ARGS=${CRITERION_ARGS:---warm-up-time 1 --measurement-time 3}
BIN=target/release/hetsched
DEFAULT_AREAS="criterion sim demo daemon runtime balancer"
ALL_AREAS="criterion sim demo daemon runtime balancer tests devices embedded starpu python ray intercept"

list() {
    cat <<'EOF'
area       feeds (docs/PERFORMANCE.md)                                     needs               default
criterion  Hot paths (every criterion figure)                              -                   yes
sim        Simulator scenarios; Coordination; Thread balancer and          -                   yes
           Backend policies (simulator)
demo       The main job: `make demo`                                       -                   yes
daemon     Dispatch gate (and its anchor); Daemon; Thousands of clients;   -                   yes
           Metrics under a scrape loop
runtime    Pipelines                                                       -                   yes
balancer   Thread balancer (the real balancer; `bench balance` as root)    root for part       yes
tests      figures integration tests print: Daemon, Runtime, Pipelines,    -                   no (slow)
           Coordination (100 mixes), Thread balancer, Backend policies,
           Embedded monitor
devices    Served kernels; Real OpenCL devices; Runtime (PoCL); Pipelines  PoCL                no
           (OpenCL stage); Backend policies (served unit); the OpenCL layer
embedded   Embedded monitor (library sizes)                                -                   no
starpu     C API and StarPU                                                StarPU 1.3, PoCL    no
python     Python and Ray (what Python adds)                               maturin             no
ray        Python and Ray (the cluster); Ray faults                        Ray, unshare        no
intercept  the OpenCL layer (clpeak, StarPU's examples)                    clpeak, starpu-examples  no
EOF
}

dry_run=0
areas=()
for arg in "$@"; do
    case $arg in
    --list) list; exit 0 ;;
    --dry-run) dry_run=1 ;;
    -h | --help) sed -n '2,16s/^# \{0,1\}//p' "$0"; exit 0 ;;
    -*) echo "bench.sh: unknown option $arg (see --help)" >&2; exit 2 ;;
    *)
        case " $ALL_AREAS " in
        *" $arg "*) areas+=("$arg") ;;
        *) echo "bench.sh: unknown area $arg (one of: $ALL_AREAS)" >&2; exit 2 ;;
        esac
        ;;
    esac
done
[ ${#areas[@]} -gt 0 ] || read -r -a areas <<<"$DEFAULT_AREAS"

failed=()
area=
# step NAME SECTION COMMAND...: runs COMMAND, its stdout and stderr into
# $OUT/$area/NAME.txt.
step() {
    local name=$1 section=$2
    shift 2
    local file=$OUT/$area/$name.txt
    printf '[%s] %-28s -> %s\n    feeds: %s\n    $ %s\n' "$area" "$name" "$file" "$section" "$*"
    [ $dry_run = 1 ] && return 0
    mkdir -p "$OUT/$area"
    { printf '# %s\n# %s, %s\n' "$*" "$(date -u +%F)" "$(uptime)"; } >"$file"
    if ! "$@" >>"$file" 2>&1; then
        echo "    FAILED (see $file)"
        failed+=("$area/$name")
    fi
}
build() { # build [FEATURES]: the release binary the steps run
    local what=("$CARGO" build --release -q -p hetsched)
    [ -n "${1:-}" ] && what+=(--features "$1")
    echo "[$area] building: ${what[*]}"
    [ $dry_run = 1 ] || "${what[@]}" || { failed+=("$area/build"); return 1; }
    if [ "${1:-}" = opencl ]; then # the OpenCL layer, found next to the binary
        echo "[$area] building: $CARGO build --release -q -p hetsched-opencl-layer"
        [ $dry_run = 1 ] || "$CARGO" build --release -q -p hetsched-opencl-layer ||
            { failed+=("$area/build-layer"); return 1; }
    fi
}
is_root() { [ "$(id -u)" = 0 ]; }

area_criterion() {
    # shellcheck disable=SC2086
    step core "Hot paths: placement, model, policy, coordination, backend_policy, balance rows; solve memory" \
        "$CARGO" bench -p hetsched-core --benches -- $CRITERION_ARGS
    # shellcheck disable=SC2086
    step views "Hot paths: views, call_ring, data_region rows" \
        "$CARGO" bench -p hetsched-views --benches -- $CRITERION_ARGS
    # shellcheck disable=SC2086
    step runtime "Hot paths: runtime and pipeline rows" \
        "$CARGO" bench -p hetsched-runtime --benches -- $CRITERION_ARGS
    step intercept "Hot paths: launch_path row" \
        "$CARGO" bench -p hetsched-intercept --bench launch_path
}

area_sim() {
    build || return
    step all "Simulator scenarios: the scenario table (CSV, JSON, SVG under $OUT/sim/sim-out)" \
        "$BIN" sim all --out "$OUT/sim/sim-out"
    for s in 1 2 3 4 5; do
        step "rinnegan-contention-seed$s" "Simulator scenarios (rinnegan-contention row); Coordination (seeds 1-3)" \
            "$BIN" sim run rinnegan-contention --seed "$s" --json
    done
    for s in 1 2 3; do
        step "pf-arrivals-seed$s" "Coordination: pf-arrivals" "$BIN" sim run pf-arrivals --seed "$s" --json
    done
    step rinnegan-goals "Simulator scenarios: throughput goals" "$BIN" sim run rinnegan-goals --json
    for e in 0.1 0.25 0.5; do
        step "rinnegan-goals-error$e" "Simulator scenarios: model error" \
            "$BIN" sim run rinnegan-goals --model-error "$e" --json
        step "rinnegan-contention-error$e" "Simulator scenarios: model error" \
            "$BIN" sim run rinnegan-contention --model-error "$e" --json
    done
    for s in random-8apps-4gpus-2kinds-seed1 random-8apps-8gpus-2kinds-seed1 \
        random-32apps-4gpus-2kinds-seed1 random-32apps-8gpus-2kinds-seed1; do
        step "$s" "Coordination: mixes of 8 and 32 applications" "$BIN" sim run "$s" --json
    done
    for s in pegasus-fig5 pegasus-fig6 pegasus-fwt; do
        step "$s" "Backend policies: Pegasus's scenarios" "$BIN" sim run "$s" --json
    done
    for s in smartbalance-mixes kinship-usecase1 kinship-usecase2 kinship-cache; do
        step "$s" "Thread balancer: simulator" "$BIN" sim run "$s" --json
    done
}

area_demo() {
    build || return
    step demo "The main job: make demo (plots under $OUT/demo/demo-out)" "$BIN" demo --out "$OUT/demo/demo-out"
}

area_daemon() {
    build || return
    for c in 64 8 1; do
        step "gate-$c" "Dispatch gate" "$BIN" bench gate --clients "$c" --seconds 4 --json
    done
    mkdir -p "$OUT/daemon"
    if [ $dry_run = 1 ] || rustc -O scripts/pingpong.rs -o "$OUT/daemon/pingpong"; then
        for gap in 5000 50 0; do
            step "pingpong-gap$gap" "Dispatch gate: the bare round trip (anchor)" "$OUT/daemon/pingpong" "$gap" 4
        done
    else
        failed+=("daemon/pingpong-build")
    fi
    step settings-churn "Daemon: settings changes, state-file writes, probe" \
        "$BIN" bench settings-churn --seconds 5 --json
    step units "Daemon: CPU round trip and memcpy bandwidth" "$BIN" units --json
    step clients-idle "Thousands of clients: idle" "$BIN" bench clients --idle 10000 --seconds 5 --json
    step clients-active "Thousands of clients: active" \
        "$BIN" bench clients --active 1024 --task-us 5000 --seconds 10 --json
    step process-shares "Thousands of clients: shares per process" \
        "$BIN" bench process-shares --connections 4 --seconds 5 --json
    step scrape "Running as a service: metrics under a scrape loop" \
        "$BIN" bench clients --idle 3000 --seconds 3 --scrape
}

area_runtime() {
    build || return
    step pipeline-cpu "Pipelines: CPUs only" "$BIN" pipeline demo --json
    step pipeline-emulated "Pipelines: CPUs + two emulated GPUs" \
        "$BIN" pipeline demo --json --config config/hetsched.example.toml --chunks 200
    step pipeline-scale "Pipelines: scaling (plot: copy $OUT/runtime/pipeline-scale.svg to docs/img/)" \
        "$BIN" pipeline scale --svg "$OUT/runtime/pipeline-scale.svg"
}

area_balancer() {
    build || return
    step overhead-smartbalance "Thread balancer: overhead per epoch" "$BIN" bench balance-overhead --epochs 50
    step overhead-kinship "Thread balancer: overhead per epoch" \
        "$BIN" bench balance-overhead --epochs 50 --policy kinship
    if is_root; then
        step balance "Thread balancer: runs on emulated big/little" "$BIN" bench balance --runs 4 --seconds 3
    else
        echo "[$area] skipping \`bench balance\` (needs root)"
    fi
}

area_tests() {
    step daemon-shares "Daemon: device time at CUSTOM 50 / 30 / 20" \
        "$CARGO" test -p hetsched --test daemon custom_shares -- --nocapture
    step optimizer "Runtime: goal optimizer" "$CARGO" test -p hetsched --test optimizer -- --nocapture
    step backend "Backend policies: in the real daemon (cpu_shares_split needs root)" \
        "$CARGO" test -p hetsched --test backend -- --nocapture
    step pipeline-contended "Pipelines: re-planning under contention" \
        "$CARGO" test --release -p hetsched-runtime --test pipeline contended -- --nocapture
    step pf-mixes "Coordination: 100 random mixes" \
        "$CARGO" test --release -p hetsched-sim --test pf_mixes -- --nocapture
    step eq11 "Thread balancer: Eq. 11 against its own optimum" \
        "$CARGO" test --release -p hetsched-sim --test balance_scenarios -- --nocapture eq11
    step pegasus "Backend policies: every policy >= 0.97 x none on fig5" \
        "$CARGO" test --release -p hetsched-sim pegasus
    step embedded-lifecycle "Embedded monitor: 100 runtimes" \
        "$CARGO" test -p hetsched-runtime --test embedded_lifecycle -- --nocapture
    if is_root; then
        step slow-kind "Pipelines: slow-kind lanes" \
            "$CARGO" test -p hetsched-runtime --test pipeline slow_kind -- --nocapture
    else
        echo "[$area] skipping the slow-kind lanes test (needs root)"
    fi
}

area_devices() {
    build opencl || return
    step served-user "Served kernels: registered" "$BIN" bench served-kernel --kernel user
    step served-histogram "Served kernels: histogram" "$BIN" bench served-kernel --kernel histogram
    step device-shares "Real OpenCL devices: CUSTOM 70 / 30" "$BIN" bench device-shares --seconds 5
    step device-shares-background "Real OpenCL devices: CUSTOM 70 / BACKGROUND" \
        "$BIN" bench device-shares --seconds 5 --classes custom:70,background
    step device-gate "Real OpenCL devices: the gate's cost per call" "$BIN" bench device-gate --calls 1000
    step device-placement "Real OpenCL devices: placement (plot: $OUT/devices/device-placement.svg)" \
        "$BIN" bench device-placement --bin-ms 100 --cpu-slowdown 4 --svg "$OUT/devices/device-placement.svg"
    step pipeline-opencl "Pipelines: an OpenCL stage on PoCL" "$BIN" pipeline demo --json
    step intercept-1 "the OpenCL layer: run 1" "$BIN" bench intercept --json
    step intercept-2 "the OpenCL layer: run 2" "$BIN" bench intercept --json
    step intercept-plot "the OpenCL layer: the plot ($OUT/devices/intercept-split.svg)" \
        "$BIN" bench intercept --json --seconds 5 --overhead-seconds 2 --overhead-rounds 9 \
        --background-seconds 3 --svg "$OUT/devices/intercept-split.svg"
    step aes-histogram "Runtime: OpenCL tasks on PoCL" \
        "$CARGO" run --release -q -p hetsched-runtime --features opencl --example aes_histogram -- 40 256
    step killed-client "Real OpenCL devices: a killed client's slot" \
        "$CARGO" test -p hetsched --features opencl --test device_units a_killed_client -- --nocapture
    step kernel-backend "Served kernels: credits on the served device" \
        "$CARGO" test -p hetsched --all-features --test kernel_backend -- --nocapture
    echo "[$area] building the debug binary for the served Pegasus policies"
    if [ $dry_run = 1 ] || "$CARGO" build -q -p hetsched --features opencl; then
        step pegasus-served "Backend policies: on a served PoCL unit" \
            env BIN=target/debug/hetsched scripts/pegasus-served.sh
        step pegasus-served-cosched "Backend policies: on a served PoCL unit (cosched row)" \
            env BIN=target/debug/hetsched POLICIES="none accc cosched" scripts/pegasus-served.sh
    else
        failed+=("devices/debug-build")
    fi
}

area_embedded() {
    echo "[$area] building libhetsched as \`make install\` does"
    [ $dry_run = 1 ] || "$CARGO" build --release -q -p hetsched-capi --features opencl || {
        failed+=("embedded/build")
        return
    }
    step tree-runtime "Embedded monitor: the daemon out of the runtime" \
        sh -c "$CARGO tree -p hetsched-runtime | grep -c hetsched-daemon; true"
    step tree-capi "Embedded monitor: the daemon out of the C API" \
        sh -c "$CARGO tree -p hetsched-capi | grep -c hetsched-daemon; true"
    step size "Embedded monitor: libhetsched.so as built, its code and data" \
        sh -c 'ls -l target/release/libhetsched.so && size target/release/libhetsched.so'
    step installed "Embedded monitor: libhetsched.so installed" \
        sh -c "d=\$(mktemp -d) && make -s install DESTDIR=\$d >/dev/null && ls -lR \$d/usr/local/lib | grep libhetsched; rm -rf \$d"
}

area_starpu() {
    step starpu "C API and StarPU: slow device" env RUNS=5 KEEP=1 integrations/starpu/bench.sh
    step starpu-slow3 "C API and StarPU: slow device 3x slower" \
        env SLOW_FACTOR=3 RUNS=3 SCALE=0.5 integrations/starpu/bench.sh
    step starpu-one-device "C API and StarPU: one device" env SLOW=0 RUNS=3 integrations/starpu/bench.sh
}

area_python() {
    build opencl || return
    step make-python "(build) the Python module" make -s python
    step python-bench "Python and Ray: what Python adds to a call" \
        env HETSCHED_BIN="$BIN" "$PYTHON" -m hetsched.bench
}

area_ray() {
    step ray-demo "Python and Ray: the 2-node cluster, two actors (plot: ray-out/)" make -s ray-demo
    step ray-faults "Ray faults" make -s ray-faults
}

area_intercept() {
    build opencl || return
    step clpeak "the OpenCL layer: clpeak" scripts/clpeak-under-layer.sh "$BIN" 2
    step starpu-examples "the OpenCL layer: StarPU's examples" scripts/starpu-examples-under-layer.sh "$BIN" 60
}

for area in "${areas[@]}"; do
    "area_$area"
done

echo
if [ ${#failed[@]} -gt 0 ]; then
    echo "bench.sh: ${#failed[@]} step(s) failed: ${failed[*]}"
    exit 1
fi
[ $dry_run = 1 ] || echo "bench.sh: outputs under $OUT/; copy the figures into docs/PERFORMANCE.md with the date"
