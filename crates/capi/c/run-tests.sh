#!/usr/bin/env bash
# Runs the C test (and the C example) of the hetsched C API: once against
# an embedded monitor, and against a real daemon (target/<profile>/hetsched)
# on a private socket when that binary exists.
set -euo pipefail
out=${1:?usage: run-tests.sh BUILD_DIR}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
bin=${HETSCHED_BIN:-$root/target/debug/hetsched}
# shellcheck source=../../../scripts/daemon-lib.sh
. "$root/scripts/daemon-lib.sh"
hs_work_dir hetsched-capi-test
hs_config ''
export XDG_CACHE_HOME="$work/cache"
# Where an OpenCL driver is installed, a missing OpenCL unit is a failure.
if [ -z "${HS_TEST_REQUIRE_OPENCL:-}" ] && compgen -G '/etc/OpenCL/vendors/*.icd' >/dev/null; then
    export HS_TEST_REQUIRE_OPENCL=1
fi
socket=
if [ -x "$bin" ]; then
    hs_start_daemon "$bin" run-tests
else
    echo "run-tests: $bin not built; daemon part skipped (cargo build -p hetsched)"
fi
"$out/test_capi" "$work/hetsched.toml" $socket
"$out/test_turnaround" "$root/crates/core/tests/turnaround_cases.txt" $socket
HETSCHED_CONFIG="$work/hetsched.toml" HETSCHED_SOCKET="$work/none.sock" "$out/example" | tail -2
