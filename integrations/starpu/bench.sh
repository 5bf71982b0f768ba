#!/usr/bin/env bash
# The StarPU contention experiment: four StarPU applications at once under
# StarPU's eager, its dmda, and the hetsched policy (LD_PRELOAD +
# STARPU_SCHED=hetsched). The applications are the same binary in all three
# cases; only the policy changes. Prints per-app times and system
# throughput (tasks / makespan), medians over RUNS runs, and ends with the
# `throughput ratio:` line.
#
# Default (SLOW=1), Rinnegan's GPU-B and GPU-W: every application has a CPU
# worker and two OpenCL workers (PoCL exposes two devices); OpenCL device 0
# stands for emu-gpu0 and device 1 for emu-gpu1, the same emulated GPU
# SLOW_FACTOR (default 2) times slower. The daemon serves both units to
# every process (one stream each, FIFO). Each application keeps IN_FLIGHT
# tasks in flight (default 2, as the simulator's rinnegan-starpu).
# SLOW=0: the earlier experiment, one OpenCL worker on emu-gpu0 and every
# task submitted at once (IN_FLIGHT default 0).
#
#   integrations/starpu/bench.sh            # RUNS=3, full size
#   RUNS=5 SCALE=0.5 integrations/starpu/bench.sh
#
# Environment: RUNS (default 3), SCALE (multiplies task counts, default 1),
# SLOW (1: two devices, the default; 0: one), SLOW_FACTOR, IN_FLIGHT (tasks
# each app keeps in flight, 0: all), HETSCHED_BIN (daemon binary; default
# target/release/hetsched, built if missing), KEEP=1 keeps the work
# directory (CSV of every run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=${RUNS:-3}
scale=${SCALE:-1}
slow=${SLOW:-1}
if [ "$slow" = 1 ]; then in_flight=${IN_FLIGHT:-2}; else in_flight=${IN_FLIGHT:-0}; fi
out=$root/target/release/starpu

make -s -C "$here" PROFILE=release >/dev/null
bin=${HETSCHED_BIN:-$root/target/release/hetsched}
[ -x "$bin" ] || (cd "$root" && cargo build -q --release -p hetsched)

# shellcheck source=../../scripts/daemon-lib.sh
. "$root/scripts/daemon-lib.sh"
hs_work_dir hetsched-starpu-bench
# A private copy: other builds may replace the binary while we run.
cp "$bin" "$work/hetsched"

# Rinnegan Table 3 in spirit: the device helps each application by a
# different factor (CPU µs per task, device µs per task, tasks).
if [ "$slow" = 1 ]; then
    # CPU / device ratios of Rinnegan's apps on GPU-B (the simulator's
    # scenarios/rinnegan-starpu.toml: aes 32x, dxt 16x, grep 10x, lbm
    # 1.4x). Device tasks of 10 ms for every app: long beside the few ms
    # that StarPU and the kernel's scheduler add to each task on two shared
    # cores, and alike so that the FIFO devices treat the apps alike.
    apps=(
        "aes   320000 10000 200"
        "dxt   160000 10000 200"
        "grep  100000 10000 200"
        "lbm    14000 10000 200"
    )
    # The slow device (GPU-W) is emu-gpu0 at 1/SLOW_FACTOR of its speed
    # for every application. Its speed informs the daemon's own models
    # only: each task's time on a unit is what hs_app asks for there.
    factor=${SLOW_FACTOR:-2}
    hs_config "[policies]
emu-gpu0 = \"fifo\"
emu-gpu1 = \"fifo\"
[[emulated]]
name = \"emu-gpu1\"
kind = \"emu-gpu-w\"
class = \"gpu\"
speed = $(awk -v f="$factor" 'BEGIN { print 8 / f }')
copy_gbps = 12.0
streams = 1"
    units=emu-gpu0,emu-gpu1 ndev=2
else
    apps=(
        "aes   4000  250 2400"
        "dxt   4000  500 1200"
        "grep  3000 1000  600"
        "lbm   3000 2400  400"
    )
    hs_config '[policies]
emu-gpu0 = "fifo"'
    units=emu-gpu0 ndev=1
fi
hs_start_daemon "$work/hetsched" bench
ipu=$("$out/hs_app" -calibrate)
export HETSCHED_SOCKET=$socket STARPU_HOME=$work/starpu XDG_CACHE_HOME=$work/cache
# One CPU worker and NDEV OpenCL workers (PoCL; POCL_DEVICES makes it
# expose one pthread device per worker) per application; no binding, or
# every process would pin its workers to the same cores. The hetsched
# policy maps OpenCL device i to the i-th unit of HETSCHED_STARPU_DEVICE,
# as hs_app does with -unit.
export STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=1 STARPU_NOPENCL=$ndev STARPU_NCUDA=0
export STARPU_WORKERS_NOBIND=1 STARPU_SILENT=1
POCL_DEVICES=$(printf 'pthread %.0s' $(seq "$ndev"))
export POCL_DEVICES HETSCHED_STARPU_DEVICE=$units

echo "machine: $(nproc) CPUs, $(uname -r); StarPU $(pkg-config --modversion starpu-1.3); ${ipu} hash iterations/µs"
if [ "$slow" = 1 ]; then
    echo "devices: emu-gpu0 and emu-gpu1 ($factor x slower), one OpenCL worker each; $in_flight tasks in flight per app"
else
    echo "device: emu-gpu0, one OpenCL worker; $in_flight tasks in flight per app (0: all)"
fi
printf '%s\n' "apps (name cpu_us dev_us tasks):" "${apps[@]/#/  }"
csv=$work/results.csv
echo "run,policy,app,seconds,on_cpu,on_device,by_device" > "$csv"

run_once() { # policy run
    local policy=$1 run=$2 pids=() t0 t1 a name cpu dev tasks
    local preload=
    [ "$policy" = hetsched ] && preload=$out/libhetsched_starpu.so
    # Start-up (StarPU, PoCL) is the same under every policy: all apps
    # begin submitting together once it is over.
    local start
    start=$(awk -v t="$(date +%s.%N)" 'BEGIN { printf "%.3f", t + 2.0 }')
    for a in "${apps[@]}"; do
        read -r name cpu dev tasks <<<"$a"
        [ "$slow" = 1 ] && dev=$dev,$(awk -v d="$dev" -v f="$factor" 'BEGIN { printf "%.0f", d * f }')
        tasks=$(awk -v t="$tasks" -v s="$scale" 'BEGIN { n = int(t * s); print (n < 1 ? 1 : n) }')
        LD_PRELOAD=$preload STARPU_SCHED=$policy \
            "$out/hs_app" -name "$name" -tasks "$tasks" -cpu-us "$cpu" -dev-us "$dev" -ipu "$ipu" \
            -unit "$units" -in-flight "$in_flight" -start-at "$start" \
            >"$work/$policy-$run-$name.out" 2>"$work/$policy-$run-$name.err" &
        pids+=($!)
    done
    local pid
    for pid in "${pids[@]}"; do
        wait "$pid" || { cat "$work/$policy-$run-"*.err >&2; echo "bench: an app failed under $policy" >&2; exit 1; }
    done
    local last=0
    for a in "${apps[@]}"; do
        read -r name _ <<<"$a"
        # fields: app NAME tasks N cpu C dev D on_cpu X on_device Y late L start T0 end T1
        # seconds S by_device Y0,Y1
        awk -v r="$run" -v p="$policy" '{ gsub(",", "/", $22); print r "," p "," $2 "," $20 "," $10 "," $12 "," $22 }' \
            "$work/$policy-$run-$name.out" >> "$csv"
        if awk '{ exit !($14 > 0.05) }' "$work/$policy-$run-$name.out"; then
            echo "bench: $name started $(awk '{ print $14 }' "$work/$policy-$run-$name.out") s late (slow start-up)" >&2
        fi
        last=$(awk -v l="$last" '{ print ($18 > l ? $18 : l) }' "$work/$policy-$run-$name.out")
    done
    # Makespan: from the common start to the last application's end.
    echo "$run,$policy,makespan,$(awk -v a="$start" -v b="$last" 'BEGIN { printf "%.3f", b - a }'),,," >> "$csv"
}

policies=(eager dmda hetsched)
for run in $(seq "$runs"); do
    # Rotate the order so no policy always runs first (warm caches, daemon).
    for i in 0 1 2; do
        p=${policies[$(( (i + run) % 3 ))]}
        run_once "$p" "$run"
        echo "run $run $p: makespan $(tail -1 "$csv" | cut -d, -f4) s" >&2
    done
done

total_tasks=0
for a in "${apps[@]}"; do
    read -r _ _ _ tasks <<<"$a"
    total_tasks=$(awk -v n="$total_tasks" -v t="$tasks" -v s="$scale" 'BEGIN { m = int(t * s); print n + (m < 1 ? 1 : m) }')
done

median() { # policy app -> median seconds
    awk -F, -v p="$1" -v a="$2" '$2 == p && $3 == a { print $4 }' "$csv" | sort -g |
        awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo
printf '%-10s' "policy"
for a in "${apps[@]}"; do read -r name _ <<<"$a"; printf '%10s' "$name s"; done
printf '%12s%16s\n' "makespan s" "tasks/s"
declare -A thr
for p in "${policies[@]}"; do
    printf '%-10s' "$p"
    for a in "${apps[@]}"; do read -r name _ <<<"$a"; printf '%10.3f' "$(median "$p" "$name")"; done
    m=$(median "$p" makespan)
    thr[$p]=$(awk -v n="$total_tasks" -v m="$m" 'BEGIN { printf "%.1f", n / m }')
    printf '%12.3f%16s\n' "$m" "${thr[$p]}"
done
echo "(medians of $runs runs; throughput = $total_tasks tasks / median makespan)"
echo
echo "tasks on CPU / each device, mean over the runs:"
printf '%-10s' "policy"
for a in "${apps[@]}"; do read -r name _ <<<"$a"; printf '%20s' "$name"; done
echo
for p in "${policies[@]}"; do
    printf '%-10s' "$p"
    for a in "${apps[@]}"; do
        read -r name _ <<<"$a"
        printf '%20s' "$(awk -F, -v p="$p" -v a="$name" '$2 == p && $3 == a {
            n++; c += $5; k = split($7, d, "/"); for (i = 1; i <= k; i++) s[i] += d[i]
        } END { printf "%.0f", c / n; for (i = 1; i <= k; i++) printf " / %.0f", s[i] / n }' "$csv")"
    done
    echo
done
awk -v h="${thr[hetsched]}" -v e="${thr[eager]}" -v d="${thr[dmda]}" -v n="$runs" \
    'BEGIN { printf "throughput ratio: hetsched/eager = %.2f, hetsched/dmda = %.2f (median of %d runs)\n", h / e, h / d, n }'
