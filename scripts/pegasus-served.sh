#!/usr/bin/env bash
# Issue 25: four tightly coupled clients (one call at a time: check the
# output, send the next) on the daemon's served PoCL unit, credits
# 256/512/1024/256, 3 s per policy. Prints, per policy and client, calls
# per second, p99 wait and the share of device time it was charged.
#
#   cargo build -p hetsched --features opencl
#   BIN=target/debug/hetsched scripts/pegasus-served.sh
#
# Environment: BIN (the hetsched binary), POLICIES (default
# "none rr accc augc cosched"), DEPTH (calls in flight, default 1),
# SECONDS_EACH (default 3), BYTES (histogram input, default 262144).
set -euo pipefail
BIN=${BIN:-target/debug/hetsched}
POLICIES=${POLICIES:-none rr accc augc cosched}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for policy in $POLICIES; do
  dir=$work/$policy
  mkdir -p "$dir"
  printf 'state_file = "%s/state.json"\ninclude_cpus = false\nopencl_units = true\n[policies]\nserved-opencl0 = "%s"\n' \
    "$dir" "$policy" >"$dir/c.toml"
  "$BIN" daemon --config "$dir/c.toml" --socket "$dir/s" >/dev/null 2>"$dir/log" &
  daemon=$!
  for _ in $(seq 100); do
    [ -S "$dir/s" ] && break
    sleep 0.1
  done
  pids=()
  n=0
  for credits in 256 512 1024 256; do
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
    % (c, rate(v), v["p99_wait_ns"] / 1e6, 100 * v["unit_ns"] / total)
    for c, v in rows
)
print("%-8s %s | total %.0f/s" % (policy, cells, sum(rate(v) for _, v in rows)))
PY
done
