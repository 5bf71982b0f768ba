#!/usr/bin/env bash
# Issue 25: four tightly coupled clients (one call at a time: check the
# output, send the next) on the daemon's served PoCL unit, credits
# 256/512/1024/256, 3 s per policy. Prints, per policy and client, calls
# per second, p99 call latency (from the call to its result) and the
# share of device time it was charged. The `direct` row is the driver's
# own sharing (Pegasus's `none`): the same four loops calling the PoCL
# device in their own processes, without the daemon.
#
#   cargo build -p hetsched --features opencl
#   BIN=target/debug/hetsched scripts/pegasus-served.sh
#
# Environment: BIN (the hetsched binary), POLICIES (default
# "direct none rr accc augc cosched"), DEPTH (calls in flight, default 1),
# SECONDS_EACH (default 3), BYTES (histogram input, default 262144).
set -euo pipefail
BIN=${BIN:-target/debug/hetsched}
POLICIES=${POLICIES:-direct none rr accc augc cosched}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
CREDITS="256 512 1024 256"

# The four loops calling the device in their own processes.
run_direct() {
  local dir=$1 pids=() n=0 credits
  for credits in $CREDITS; do
    "$BIN" load --json --direct-opencl 0 --bytes "${BYTES:-262144}" \
      --seconds "${SECONDS_EACH:-3}" >"$dir/$n-$credits.json" 2>/dev/null &
    pids+=($!)
    n=$((n + 1))
  done
  wait "${pids[@]}"
}

# The four loops on the daemon's served unit under $2.
run_served() {
  local dir=$1 policy=$2 pids=() n=0 credits daemon
  printf 'state_file = "%s/state.json"\ninclude_cpus = false\nopencl_units = true\n[policies]\nserved-opencl0 = "%s"\n' \
    "$dir" "$policy" >"$dir/c.toml"
  "$BIN" daemon --config "$dir/c.toml" --socket "$dir/s" >/dev/null 2>"$dir/log" &
  daemon=$!
  for _ in $(seq 100); do
    [ -S "$dir/s" ] && break
    sleep 0.1
  done
  for credits in $CREDITS; do
    HETSCHED_SOCKET=$dir/s "$BIN" run --class normal --shares "$credits" -- \
      "$BIN" load --json --unit served-opencl0 --kernel histogram \
      --bytes "${BYTES:-262144}" --seconds "${SECONDS_EACH:-3}" --depth "${DEPTH:-1}" \
      >"$dir/$n-$credits.json" 2>/dev/null &
    pids+=($!)
    n=$((n + 1))
  done
  wait "${pids[@]}"
  kill "$daemon"
  wait "$daemon" 2>/dev/null || true
}

for policy in $POLICIES; do
  dir=$work/$policy
  mkdir -p "$dir"
  if [ "$policy" = direct ]; then
    run_direct "$dir"
  else
    run_served "$dir" "$policy"
  fi
  python3 - "$policy" "$dir" <<'PY'
import glob, json, sys
policy, d = sys.argv[1], sys.argv[2]
rows = []
for f in sorted(glob.glob(d + "/[0-9]-*.json")):
    credits = int(f.rsplit("-", 1)[1][:-5])
    rows.append((credits, json.load(open(f))))
total = sum(v["unit_ns"] for _, v in rows) or 1
rate = lambda v: v["tasks"] / (v["wall_ns"] / 1e9)
cells = " | ".join(
    "%d: %.1f/s p99 %.1f ms %.1f %%"
    % (c, rate(v), v["p99_call_ns"] / 1e6, 100 * v["unit_ns"] / total)
    for c, v in rows
)
print("%-8s %s | total %.0f/s" % (policy, cells, sum(rate(v) for _, v in rows)))
PY
done
