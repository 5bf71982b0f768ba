#!/usr/bin/env bash
# Checks the wheel `make wheel` built as a user on another machine would
# meet it:
# - `auditwheel show` finds it consistent with manylinux_2_28 (or older),
#   and neither the module nor the binary links hwloc;
# - `pip install` of the wheel alone, into a fresh virtual environment,
#   gives a `hetsched` command (daemon included) of the same version as
#   `hetsched.__version__`, and `hetsched.ray` finds it;
# - the Python tests that need no device pass against that environment's
#   module and daemon, with the system's hwloc hidden: in a private mount
#   namespace, /dev/null is bound over libhwloc.so.15, so dlopen fails
#   there as on a machine without hwloc (needs root), and before that with
#   HETSCHED_NO_HWLOC=1, which only stops hetsched loading it.
# Usage: packaging/check-wheel.sh [WHEEL]
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
PYTHON=${PYTHON:-python3}
fail() { echo "wheel check: $*" >&2; exit 1; }

wheel=${1:-$(ls -t target/wheels/hetsched-*-manylinux_*.whl 2>/dev/null | head -n 1)}
[ -n "$wheel" ] && [ -f "$wheel" ] || fail "no manylinux wheel: run make wheel first"
wheel=$(cd "$(dirname "$wheel")" && pwd)/$(basename "$wheel")

# Its report is wrapped at 72 columns: one line to match in.
show=$("$PYTHON" -m auditwheel show "$wheel" | tr -s '\n ' '  ')
echo "$show" | grep -Eq 'consistent with the following platform tag: "manylinux_2_(1[0-9]|2[0-8])_x86_64"' \
    || fail "auditwheel does not find the wheel manylinux_2_28 or older: $show"

venv=$(mktemp -d -t hetsched-wheel-XXXXXX)
trap 'rm -rf "$venv"' EXIT
"$PYTHON" -m venv "$venv"
"$venv/bin/python" -m pip install -q "$wheel"
# What the tests use besides the package (numpy; prometheus_client for the
# metrics test). pyopencl is left out: the tests that need it skip.
"$venv/bin/python" -m pip install -q pytest numpy prometheus_client

exe="$venv/bin/hetsched"
[ -x "$exe" ] || fail "the wheel installed no hetsched command"
for f in "$exe" "$venv"/lib/python3*/site-packages/hetsched/_native*.so; do
    if readelf -d "$f" | grep -q 'NEEDED.*hwloc'; then fail "$f links hwloc"; fi
done
[ -s "$venv/lib/hetsched/libhetsched_opencl_layer.so" ] || fail "the OpenCL layer was not installed"
py_version=$("$venv/bin/python" -c 'import hetsched; print(hetsched.__version__)')
case "$("$exe" --version)" in
    "hetsched $py_version" | "hetsched $py_version (commit "*")") ;;
    *) fail "hetsched --version is not hetsched.__version__ ($py_version)" ;;
esac
# hetsched.ray (when Ray is installed) finds the wheel's binary beside the
# interpreter, with the environment not activated (not on PATH).
if "$venv/bin/python" -c 'import ray' 2>/dev/null; then
    found=$(env PATH=/usr/bin:/bin "$venv/bin/python" -c 'import hetsched.ray as r; print(r._binary(None))')
    [ "$found" = "$exe" ] || fail "hetsched.ray finds $found, not $exe"
else
    echo "wheel check: Ray is not installed in the environment; hetsched.ray's lookup not checked"
fi

hwloc=$(ldconfig -p | sed -n 's/.*libhwloc\.so\.15 (libc6,x86-64) => //p' | head -n 1)
tests=(python/tests/test_version.py python/tests/test_client.py python/tests/test_runtime.py
       python/tests/test_capability.py python/tests/test_metrics.py)
# These use the OpenCL unit of PoCL (a CPU device), whose library links
# hwloc: with hwloc hidden there is no such device, so they run only in
# the first pass.
needs_pocl=(test_units_describe_the_daemons_units test_set_shares_changes_this_process_on_one_unit
            test_dispatch_grants_and_reports_wall_time test_dispatch_to_an_unknown_unit_names_the_units
            test_waiting_for_a_grant_does_not_hold_the_gil)
deselect="-k 'not ($(IFS='|'; echo "${needs_pocl[*]}" | sed 's/|/ or /g'))'"
run_tests="cd '$root' && HETSCHED_BIN='$exe' '$venv/bin/python' -m pytest -q -p no:cacheprovider ${tests[*]}"
echo "wheel check: the tests, hetsched not loading hwloc (HETSCHED_NO_HWLOC=1)"
HETSCHED_NO_HWLOC=1 sh -c "$run_tests"
out=$(HETSCHED_NO_HWLOC=1 "$exe" units 2>&1) || fail "hetsched units failed: $out"
echo "$out" | grep -q 'hwloc unavailable' || fail "hetsched units did not fall back to sysfs: $out"
if [ "$(id -u)" = 0 ] && [ -n "$hwloc" ] && command -v unshare >/dev/null; then
    echo "wheel check: the tests with $hwloc hidden (/dev/null bound over it in a private mount namespace)"
    out=$(unshare -m sh -c "mount --bind /dev/null '$hwloc' && '$exe' units 2>&1") || fail "hetsched units failed: $out"
    echo "$out" | grep -q 'hwloc unavailable' || fail "hetsched units did not fall back to sysfs: $out"
    unshare -m sh -c "mount --bind /dev/null '$hwloc' && $run_tests $deselect"
else
    echo "wheel check: hwloc not hidden (needs root and an installed hwloc)"
fi
echo "wheel check: OK ($(basename "$wheel"): auditwheel, fresh venv, hetsched $py_version, tests without hwloc)"
