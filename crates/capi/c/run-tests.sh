#!/usr/bin/env bash
# Runs the C test (and the C example) of the hetsched C API: once against
# an embedded monitor, and against a real daemon (target/<profile>/hetsched)
# on a private socket when that binary exists.
set -euo pipefail
out=${1:?usage: run-tests.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${HETSCHED_BIN:-$root/target/debug/hetsched}
tmp=$(mktemp -d /tmp/hetsched-capi-test.XXXXXX)
daemon=
cleanup() {
    if [ -n "$daemon" ]; then kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; fi
    rm -rf "$tmp"
}
trap cleanup EXIT
cat > "$tmp/hetsched.toml" <<TOML
state_file = "$tmp/state.json"
[[emulated]]
name = "emu-gpu0"
kind = "emu-gpu"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
streams = 1
TOML
export XDG_CACHE_HOME="$tmp/cache"
socket=
if [ -x "$bin" ]; then
    socket="$tmp/hetsched.sock"
    "$bin" daemon --config "$tmp/hetsched.toml" --socket "$socket" >"$tmp/daemon.log" 2>&1 &
    daemon=$!
    for _ in $(seq 100); do [ -S "$socket" ] && break; sleep 0.05; done
    [ -S "$socket" ] || { cat "$tmp/daemon.log"; echo "run-tests: daemon did not start" >&2; exit 1; }
else
    echo "run-tests: $bin not built; daemon part skipped (cargo build -p hetsched)"
fi
"$out/test_capi" "$tmp/hetsched.toml" $socket
HETSCHED_CONFIG="$tmp/hetsched.toml" HETSCHED_SOCKET="$tmp/none.sock" "$out/example" | tail -2
