#!/usr/bin/env bash
# Unmodified CUDA programs under the CUDA interposer, on a machine with an
# NVIDIA GPU (scripts/gpu-check.sh runs it). Prints one JSON object:
#   direct: two copies of `hetsched load --direct-cuda 0` (the driver API
#     through cudarc, which opens libcuda itself and never talks to the
#     daemon) under `hetsched run` at CUSTOM 70/30: each one's part of
#     cuda0's device time from the daemon's accounting, whether the daemon
#     saw them as intercepted, and whether every result was right;
#   torch: the same with two PyTorch matmul loops, where torch with CUDA
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

# split NAME CMD...: runs CMD at CUSTOM 70 and 30 for window + 6 s, takes the
# daemon's accounting over a window in the middle, prints "NAME": {...}.
split() {
    local name=$1 a b
    shift
    "$hs" run --class custom --shares 70 -- "$@" >"$work/$name-a.out" 2>"$work/$name-a.err" &
    a=$!
    "$hs" run --class custom --shares 30 -- "$@" >"$work/$name-b.out" 2>"$work/$name-b.err" &
    b=$!
    sleep 3
    "$hs" status --json >"$work/$name-1.json"
    sleep "$window"
    "$hs" status --json >"$work/$name-2.json"
    local ra=0 rb=0
    wait "$a" || ra=$?
    wait "$b" || rb=$?
    python3 - "$work/$name-1.json" "$work/$name-2.json" "$a" "$b" "$ra" "$rb" "$name" <<'PY'
import json, sys
s1, s2 = (json.load(open(p)) for p in sys.argv[1:3])
pids = [int(sys.argv[3]), int(sys.argv[4])]
rcs = [int(sys.argv[5]), int(sys.argv[6])]
unit = next(u["info"]["id"] for u in s2["units"] if u["info"]["name"] == "cuda0")
def busy(s, pid):
    return sum(u["busy_ns_total"] for c in s["clients"] if c["pid"] == pid for u in c["units"] if u["unit"] == unit)
used = [busy(s2, p) - busy(s1, p) for p in pids]
total = max(1, sum(used))
seen = {c["pid"]: c.get("intercepted") for c in s2["clients"]}
print(json.dumps({sys.argv[7]: {"device_fraction": [u / total for u in used], "intercepted": [seen.get(p) for p in pids], "exit_status": rcs}})[1:-1])
PY
}

run_s=$((window + 6))
parts=()
parts+=("$(split direct "$hs" load --direct-cuda 0 --bytes 200000 --seconds "$run_s" --json)")
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    parts+=("$(split torch python3 -c "
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
