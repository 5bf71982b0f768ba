#!/usr/bin/env bash
# Unmodified CUDA programs under the CUDA interposer, on a machine with an
# NVIDIA GPU (scripts/gpu-check.sh runs it). Prints one JSON object:
#   direct: `hetsched load --direct-cuda 0` (the driver API through
#     cudarc, which opens libcuda itself and never talks to the daemon)
#     under `hetsched run`, four copies at CUSTOM 70 and four at 30 (a
#     copy checks every result on the CPU between its calls, so one copy
#     a side would leave the GPU idle part of the time;
#     one_copy_alone_busy_fraction says how much one copy holds alone):
#     each side's part of cuda0's device time from the daemon's
#     accounting, how busy cuda0 was, whether the daemon saw every copy as
#     intercepted, and whether every result was right;
#   torch: the same with one PyTorch matmul loop a side, where torch with CUDA
#     is installed (the CUDA runtime finds the driver through
#     cuGetProcAddress);
#   alone: one copy alone with and without the interposer (calls/s).
#
#   scripts/intercept-cuda-check.sh HETSCHED_BINARY LIB_DIR [SECONDS]
set -euo pipefail
hs=${1:?the hetsched binary}
lib=${2:?the folder with libhetsched_cuda_intercept.so}
window=${3:-5}
[ -s "$lib/libhetsched_cuda_intercept.so" ] || { echo "no $lib/libhetsched_cuda_intercept.so" >&2; exit 2; }
# shellcheck source=daemon-lib.sh
. "$(dirname "$0")/daemon-lib.sh"
hs_work_dir hetsched-cuda-check
# The devices only: no CPU units, no emulated GPU.
printf 'include_cpus = false\nstate_file = "%s/state.json"\n' "$work" >"$work/hetsched.toml"
hs_start_daemon "$hs" intercept-cuda-check
export HETSCHED_SOCKET=$socket HETSCHED_LIB_DIR=$lib HETSCHED_INTERCEPT_QUIET=1

# busy_of "PIDS" FILE1 FILE2 NS: the part of cuda0 the clients of the
# space-separated PIDS held between two status snapshots NS nanoseconds
# apart.
busy_of() {
    python3 - "$@" <<'PY'
import json, sys
pids, ns = [int(p) for p in sys.argv[1].split()], int(sys.argv[4])
s1, s2 = (json.load(open(p)) for p in sys.argv[2:4])
unit = next(u["info"]["id"] for u in s2["units"] if u["info"]["name"] == "cuda0")
busy = lambda s: sum(u["busy_ns_total"] for c in s["clients"] if c["pid"] in pids for u in c["units"] if u["unit"] == unit)
print((busy(s2) - busy(s1)) / ns)
PY
}

# alone NAME CMD...: the part of cuda0 one copy of CMD holds when alone,
# over 2 s after a 3 s start: what one copy a side asks of the device.
alone() {
    local name=$1 pid t1 t2
    shift
    "$hs" run --class custom --shares 70 -- "$@" >"$work/$name-alone.out" 2>"$work/$name-alone.err" &
    pid=$!
    sleep 3
    t1=$(date +%s%N)
    "$hs" status --json >"$work/$name-alone-1.json"
    sleep 2
    t2=$(date +%s%N)
    "$hs" status --json >"$work/$name-alone-2.json"
    wait "$pid" || true
    busy_of "$pid" "$work/$name-alone-1.json" "$work/$name-alone-2.json" "$((t2 - t1))"
}

# split NAME COPIES CMD...: runs COPIES copies of CMD at CUSTOM 70 and as
# many at CUSTOM 30 for window + 6 s, takes the daemon's accounting over a
# window in the middle, prints "NAME": {...}: each side's part of cuda0's
# device time, and how busy cuda0 was. Shares divide a device only while
# its users want more than it has: below busy_fraction ~0.9 the sides got
# what they asked and the split says nothing about the shares.
split() {
    local name=$1 copies=$2 i t1 t2 one
    shift 2
    one=$(alone "$name" "$@")
    local pids_a=() pids_b=()
    for ((i = 0; i < copies; i++)); do
        "$hs" run --class custom --shares 70 -- "$@" >"$work/$name-a$i.out" 2>"$work/$name-a$i.err" &
        pids_a+=($!)
        "$hs" run --class custom --shares 30 -- "$@" >"$work/$name-b$i.out" 2>"$work/$name-b$i.err" &
        pids_b+=($!)
    done
    sleep 3
    t1=$(date +%s%N)
    "$hs" status --json >"$work/$name-1.json"
    sleep "$window"
    t2=$(date +%s%N)
    "$hs" status --json >"$work/$name-2.json"
    local rcs=() pid rc
    for pid in "${pids_a[@]}" "${pids_b[@]}"; do
        rc=0
        wait "$pid" || rc=$?
        rcs+=("$rc")
    done
    local held_a held_b
    held_a=$(busy_of "${pids_a[*]}" "$work/$name-1.json" "$work/$name-2.json" "$((t2 - t1))")
    held_b=$(busy_of "${pids_b[*]}" "$work/$name-1.json" "$work/$name-2.json" "$((t2 - t1))")
    python3 - "$work/$name-2.json" "$name" "${pids_a[*]}" "${pids_b[*]}" "${rcs[*]}" "$one" \
        "$held_a" "$held_b" <<'PY'
import json, sys
s2 = json.load(open(sys.argv[1]))
name = sys.argv[2]
sides = [[int(p) for p in sys.argv[3].split()], [int(p) for p in sys.argv[4].split()]]
rcs = [int(r) for r in sys.argv[5].split()]
one = float(sys.argv[6])
held = [float(sys.argv[7]), float(sys.argv[8])]
total = sum(held) or 1.0
seen = {c["pid"]: c.get("intercepted") for c in s2["clients"]}
print(json.dumps({name: {
    "copies_per_side": len(sides[0]),
    "one_copy_alone_busy_fraction": one,
    "device_fraction": [h / total for h in held],
    "busy_fraction": sum(held),
    "intercepted": [seen.get(p) for pids in sides for p in pids],
    "exit_status": rcs,
}})[1:-1])
PY
}

run_s=$((window + 6))
parts=()
parts+=("$(split direct 4 "$hs" load --direct-cuda 0 --bytes 200000 --seconds "$run_s" --json)")
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    parts+=("$(split torch 1 python3 -c "
import time, torch
a = torch.randn(2048, 2048, device='cuda'); b = torch.randn(2048, 2048, device='cuda')
want = (a @ b).sum().item(); end = time.monotonic() + $run_s; n = 0
while time.monotonic() < end:
    c = a @ b; n += 1
    if n % 8 == 0: torch.cuda.synchronize()
assert abs(c.sum().item() - want) <= 1e-3 * abs(want) + 1e-3
print(n)")")
else
    parts+=('"torch": {"skipped": "torch with CUDA is not installed"}')
fi
without=$(env -u HETSCHED_LIB_DIR "$hs" run --class custom --shares 100 --no-intercept -- "$hs" load --direct-cuda 0 --bytes 2000 --seconds 3 --json \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"] / 3.0)')
with=$("$hs" run --class custom --shares 100 -- "$hs" load --direct-cuda 0 --bytes 2000 --seconds 3 --json \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["tasks"] / 3.0)')
parts+=("\"alone\": {\"calls_per_s_without\": $without, \"calls_per_s_with\": $with}")
(IFS=,; echo "{${parts[*]}}")
