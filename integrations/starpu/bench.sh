#!/usr/bin/env bash
# The StarPU contention experiment: four StarPU applications at once, each
# with a CPU implementation and one on an emulated GPU that the hetsched
# daemon serves to every process (one stream, FIFO), under StarPU's eager,
# its dmda, and the hetsched policy (LD_PRELOAD + STARPU_SCHED=hetsched).
# The applications are the same binary in all three cases; only the policy
# changes. Prints per-app times and system throughput (tasks / makespan),
# medians over RUNS runs, and ends with the `throughput ratio:` line.
#
#   integrations/starpu/bench.sh            # RUNS=3, full size
#   RUNS=5 SCALE=0.5 integrations/starpu/bench.sh
#
# Environment: RUNS (default 3), SCALE (multiplies task counts, default 1),
# HETSCHED_BIN (daemon binary; default target/release/hetsched, built if
# missing), KEEP=1 keeps the work directory (CSV of every run).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
runs=${RUNS:-3}
scale=${SCALE:-1}
out=$root/target/release/starpu

make -s -C "$here" PROFILE=release >/dev/null
bin=${HETSCHED_BIN:-$root/target/release/hetsched}
[ -x "$bin" ] || (cd "$root" && cargo build -q --release -p hetsched)

# shellcheck source=../../scripts/daemon-lib.sh
. "$root/scripts/daemon-lib.sh"
hs_work_dir hetsched-starpu-bench
# A private copy: other builds may replace the binary while we run.
cp "$bin" "$work/hetsched"

hs_config '[policies]
emu-gpu0 = "fifo"'
hs_start_daemon "$work/hetsched" bench

# Rinnegan Table 3 in spirit: the device helps each application by a
# different factor (CPU µs per task, device µs per task, tasks).
apps=(
    "aes   4000  250 2400"
    "dxt   4000  500 1200"
    "grep  3000 1000  600"
    "lbm   3000 2400  400"
)
ipu=$("$out/hs_app" -calibrate)
export HETSCHED_SOCKET=$socket STARPU_HOME=$work/starpu XDG_CACHE_HOME=$work/cache
# One CPU worker and one OpenCL worker (PoCL) per application; no binding,
# or every process would pin its workers to the same cores.
export STARPU_OPENCL_ON_CPUS=1 STARPU_NCPU=1 STARPU_NOPENCL=1 STARPU_NCUDA=0
export STARPU_WORKERS_NOBIND=1 STARPU_SILENT=1

echo "machine: $(nproc) CPUs, $(uname -r); StarPU $(pkg-config --modversion starpu-1.3); ${ipu} hash iterations/µs"
printf '%s\n' "apps (name cpu_us dev_us tasks):" "${apps[@]/#/  }"
csv=$work/results.csv
echo "run,policy,app,seconds,on_cpu,on_device" > "$csv"

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
        tasks=$(awk -v t="$tasks" -v s="$scale" 'BEGIN { n = int(t * s); print (n < 1 ? 1 : n) }')
        LD_PRELOAD=$preload STARPU_SCHED=$policy \
            "$out/hs_app" -name "$name" -tasks "$tasks" -cpu-us "$cpu" -dev-us "$dev" -ipu "$ipu" \
            -start-at "$start" >"$work/$policy-$run-$name.out" 2>"$work/$policy-$run-$name.err" &
        pids+=($!)
    done
    local pid
    for pid in "${pids[@]}"; do
        wait "$pid" || { cat "$work/$policy-$run-"*.err >&2; echo "bench: an app failed under $policy" >&2; exit 1; }
    done
    local last=0
    for a in "${apps[@]}"; do
        read -r name _ <<<"$a"
        # fields: app NAME tasks N cpu C dev D on_cpu X on_device Y late L start T0 end T1 seconds S
        awk -v r="$run" -v p="$policy" '{ print r "," p "," $2 "," $NF "," $10 "," $12 }' \
            "$work/$policy-$run-$name.out" >> "$csv"
        if awk '{ exit !($14 > 0.05) }' "$work/$policy-$run-$name.out"; then
            echo "bench: $name started $(awk '{ print $14 }' "$work/$policy-$run-$name.out") s late (slow start-up)" >&2
        fi
        last=$(awk -v l="$last" '{ print ($18 > l ? $18 : l) }' "$work/$policy-$run-$name.out")
    done
    # Makespan: from the common start to the last application's end.
    echo "$run,$policy,makespan,$(awk -v a="$start" -v b="$last" 'BEGIN { printf "%.3f", b - a }'),," >> "$csv"
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
awk -v h="${thr[hetsched]}" -v e="${thr[eager]}" -v d="${thr[dmda]}" -v n="$runs" \
    'BEGIN { printf "throughput ratio: hetsched/eager = %.2f, hetsched/dmda = %.2f (median of %d runs)\n", h / e, h / d, n }'
