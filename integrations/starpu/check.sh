#!/usr/bin/env bash
# A short end-to-end check of the StarPU policy (CI, `make test`): a daemon
# with two emulated GPUs of different speed, two copies of bench/hs_app at
# once (each with two OpenCL workers, one per GPU) under the hetsched
# policy selected from outside (LD_PRELOAD + STARPU_SCHED), and the same
# under eager. Fails unless every task ran, the policy placed the tasks by
# model (not by its eager fallback) with each OpenCL worker standing for
# its own unit, and the daemon served the device work of both processes.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${OUT:?OUT (the build directory) must be set; use make check}
profile_dir=$(dirname "$out")
bin=${HETSCHED_BIN:-$profile_dir/hetsched}
if [ ! -x "$bin" ]; then
    echo "check: $bin not built (cargo build -p hetsched); StarPU check skipped" >&2
    exit 0
fi
# shellcheck source=../../scripts/daemon-lib.sh
. "$root/scripts/daemon-lib.sh"
hs_work_dir hetsched-starpu-check
hs_config '[policies]
emu-gpu0 = "fifo"
emu-gpu1 = "fifo"
# The slow device beside emu-gpu0 (OpenCL device 1).
[[emulated]]
name = "emu-gpu1"
kind = "emu-gpu-w"
class = "gpu"
speed = 4.0
copy_gbps = 12.0
streams = 1
# Stands for the OpenCL device in the gated run: StarPU drives the device,
# the daemon only grants turns on it.
[[emulated]]
name = "ocl0"
kind = "opencl"
class = "gpu"
speed = 1.0
copy_gbps = 12.0
streams = 1'
hs_start_daemon "$bin" check

export HETSCHED_SOCKET=$socket STARPU_HOME=$work/starpu XDG_CACHE_HOME=$work/cache
# PoCL exposes two devices, so StarPU starts two OpenCL workers.
export STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=1 STARPU_NOPENCL=2 STARPU_NCUDA=0
export STARPU_WORKERS_NOBIND=1 STARPU_SILENT=1 POCL_DEVICES="pthread pthread"
export HETSCHED_STARPU_DEVICE=emu-gpu0,emu-gpu1
fail() { echo "check: $*" >&2; cat "$work"/*.err >&2 || true; exit 1; }
# StarPU calibrates the bus into STARPU_HOME on its first start; two apps
# starting at once on an empty one race on those files (one read a
# half-written vm.affinity in CI), so one app alone calibrates first.
STARPU_SCHED=eager "$out/hs_app" -name warm -tasks 1 -cpu-us 100 -dev-us 100 -ipu 1 \
    >"$work/warm.out" 2>"$work/warm.err" || fail "StarPU bus calibration failed"
for policy in hetsched hetsched-gated eager; do
    preload= sched=$policy
    case $policy in
    hetsched) preload=$out/libhetsched_starpu.so ;;
    hetsched-gated)
        # Device workers stand for unit ocl0 and wait for its gate.
        preload=$out/libhetsched_starpu.so sched=hetsched
        export HETSCHED_STARPU_DEVICE=ocl0 HETSCHED_STARPU_GATE=1 ;;
    esac
    for app in a b; do
        LD_PRELOAD=$preload STARPU_SCHED=$sched HETSCHED_STARPU_VERBOSE=1 \
            "$out/hs_app" -name "$app" -tasks 60 -cpu-us 2000 -dev-us 500,1000 -ipu 100 \
            -unit emu-gpu0,emu-gpu1 -in-flight 4 \
            >"$work/$policy-$app.out" 2>"$work/$policy-$app.err" &
        eval "pid_$app=\$!"
    done
    # shellcheck disable=SC2154
    wait "$pid_a" || fail "app a failed under $policy"
    wait "$pid_b" || fail "app b failed under $policy"
    for app in a b; do
        line=$(cat "$work/$policy-$app.out")
        ran=$(awk '{ print $10 + $12 }' <<<"$line")
        [ "$ran" = 60 ] || fail "$policy/$app ran $ran of 60 tasks: $line"
    done
    if [ "$sched" = hetsched ]; then
        for app in a b; do
            grep -q "60 tasks placed by model, 0 by eager fallback" "$work/$policy-$app.err" ||
                fail "the hetsched policy did not place $app's tasks by model"
        done
    fi
    if [ "$policy" = hetsched ]; then
        # HETSCHED_STARPU_DEVICE maps OpenCL device N to its N-th unit.
        for app in a b; do
            if ! grep -q "(OpenCL 0 .*emu-gpu0)" "$work/$policy-$app.err" ||
                ! grep -q "(OpenCL 1 .*emu-gpu1)" "$work/$policy-$app.err"; then
                fail "$app's OpenCL workers do not stand for emu-gpu0 and emu-gpu1"
            fi
        done
    fi
    if [ "$policy" = hetsched-gated ]; then
        for app in a b; do
            grep -q ", gated)" "$work/$policy-$app.err" || fail "$app's device worker was not gated"
            ! grep -q "gate failed" "$work/$policy-$app.err" || fail "$app's gate requests failed"
        done
        export HETSCHED_STARPU_DEVICE=emu-gpu0,emu-gpu1
        unset HETSCHED_STARPU_GATE
    fi
    echo "check: $policy: $(cut -d" " -f2,9-12,19- "$work/$policy-a.out") | $(cut -d" " -f2,9-12,19- "$work/$policy-b.out")"
done
echo "check: StarPU policy OK"
