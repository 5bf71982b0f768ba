#!/usr/bin/env bash
# One prepared check of hetsched on a machine with an NVIDIA GPU (docs/cuda.md,
# "Checking on a GPU"): build with CUDA and OpenCL, run every CUDA test, measure
# the GPU's costs, and write one JSON report with a log beside it.
#
#   scripts/gpu-check.sh            # report in $OUT, else ./gpu-check-out
#   scripts/gpu-check.sh --bundle DIR
#       # on a machine with Rust and no GPU: build everything the check runs
#       # into DIR (binaries, test binaries, the interposer, the shared
#       # libraries they need beyond glibc), for a GPU machine without Rust
#   GPU_CHECK_PREBUILT=DIR scripts/gpu-check.sh
#       # on the GPU machine: the same check, run from that bundle
#
# Each step has its own timeout, and all of them together a budget
# (GPU_CHECK_BUDGET_S, default 480 s); a step that fails records
# {"error": "..."} for its fields and the next one runs. The exit status is 1
# if any step failed. Other settings: GPU_CHECK_ONLINE=1 lets cargo use the
# network (it runs --offline otherwise), GPU_CHECK_VENDOR=DIR builds from a
# `cargo vendor` directory, GPU_CHECK_DEBS=DIR installs the .deb files there
# when the build's system libraries are missing.
set -euo pipefail
bundle_dir=
if [ "${1:-}" = --bundle ]; then
    bundle_dir=$(realpath -m "${2:?--bundle needs a folder}")
elif [ $# -gt 0 ]; then
    echo "usage: scripts/gpu-check.sh [--bundle DIR]" >&2
    exit 2
fi
prebuilt=
if [ -n "${GPU_CHECK_PREBUILT:-}" ]; then
    prebuilt=$(realpath "$GPU_CHECK_PREBUILT")
    [ -s "$prebuilt/manifest" ] || {
        echo "gpu-check: $GPU_CHECK_PREBUILT holds no bundle (no manifest): make one with scripts/gpu-check.sh --bundle DIR" >&2
        exit 2
    }
fi
cd "$(dirname "$0")/.."
SECONDS=0

out_dir=${OUT:-gpu-check-out}
mkdir -p "$out_dir"
report=$out_dir/gpu-check.json
log=$out_dir/gpu-check.log
: >"$log"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
budget=${GPU_CHECK_BUDGET_S:-480}
export CARGO_TERM_COLOR=never
# On the GPU machine a test that finds no CUDA device fails instead of
# skipping (crates/platform/src/test_support.rs).
export HETSCHED_TEST_REQUIRE=cuda

fragments=() # "key": value pairs of the report, in order
summary=()   # one line per step for the end
failures=0

# ---- helpers ---------------------------------------------------------------

# A JSON string of $1.
json_str() {
    local s=$1
    s=${s//\\/\\\\}
    s=${s//\"/\\\"}
    s=${s//$'\n'/\\n}
    s=${s//$'\t'/\\t}
    s=${s//$'\r'/}
    printf '"%s"' "$(printf '%s' "$s" | tr -d '\000-\010\013\014\016-\037')"
}

# Whether file $1 holds one JSON value (python3 or jq where there is one).
is_json() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$1" 2>/dev/null
    elif command -v jq >/dev/null 2>&1; then
        jq -e . "$1" >/dev/null 2>&1
    else
        grep -q '^[[:space:]]*[{[]' "$1"
    fi
}

set_field() { fragments+=("$(json_str "$1"): $2"); }

# Records step $1 as failed with reason $2 for each field named after it.
fail() {
    local step=$1 why=$2
    shift 2
    failures=$((failures + 1))
    summary+=("$step: FAILED: $why")
    local f
    for f in "$@"; do
        set_field "$f" "{\"error\": $(json_str "$why")}"
    done
}

# run_step NAME SECONDS CMD...: CMD under `timeout` (which signals its whole
# process group, so a daemon it started ends with it), stdout in $step_out,
# stderr in $step_err, both in the log. Sets rc (125: not run, the budget is
# spent) and never fails the script.
run_step() {
    local name=$1 want=$2 left
    shift 2
    step_out=$work/$name.out
    step_err=$work/$name.err
    : >"$step_out"
    left=$((budget - SECONDS))
    step_t=$((want < left ? want : left))
    if ((step_t < 15)); then
        echo "not run: the ${budget} s budget (GPU_CHECK_BUDGET_S) is spent" >"$step_err"
        rc=125
        return 0
    fi
    printf '\n===== %s (timeout %s s): %s\n' "$name" "$step_t" "$*" >>"$log"
    local start=$SECONDS
    rc=0
    timeout --kill-after=10 "$step_t" "$@" >"$step_out" 2>"$step_err" </dev/null || rc=$?
    step_secs=$((SECONDS - start))
    {
        cat "$step_out"
        [ ! -s "$step_err" ] || { echo "----- stderr"; cat "$step_err"; }
        printf '===== %s: exit %s after %s s\n' "$name" "$rc" "$step_secs"
    } >>"$log"
    echo "gpu-check: $name: exit $rc after $step_secs s" >&2
}

# One line saying why the last step failed.
reason() {
    local line
    if ((rc == 125)); then
        cat "$step_err"
        return
    fi
    if ((rc == 124 || rc == 137)); then
        printf 'timed out after %s s; last output: ' "$step_t"
    else
        printf 'exit %s: ' "$rc"
    fi
    line=$(grep -hE -A1 'panicked at' "$step_err" "$step_out" | head -n 4 || true)
    [ -n "$line" ] || line=$(grep -hE -m2 '^error(\[E[0-9]+\])?: ' "$step_err" "$step_out" || true)
    [ -n "$line" ] || line=$(grep -hE '^(Error|hetsched): ' "$step_err" "$step_out" | tail -n 1 || true)
    [ -n "$line" ] || line=$(cat "$step_err" "$step_out" | grep -v '^[[:space:]]*$' | tail -n 1 || true)
    line=$(printf '%s' "$line" | tr '\n' ' ')
    printf '%s' "${line:0:600}"
}

# The first number after "key": in file $2.
num() { grep -oE "\"$1\": ?-?[0-9.]+([eE][-+]?[0-9]+)?" "$2" | head -n 1 | sed 's/.*: *//'; }

# ---- what is built -------------------------------------------------------------

# Every test file gated on the cuda feature, plus the unit tests of the GPU
# modules; all built in one selection so that no step rebuilds another's.

# The package a manifest is for: its first `name = ` (a [lib] name comes later).
package_of() { sed -n 's/^name = "\(.*\)"/\1/p' "$1" | head -n 1; }
packages=(hetsched hetsched-runtime hetsched-platform hetsched-monitor hetsched-daemon)
test_targets=()
for f in crates/*/tests/*.rs; do
    grep -q 'feature = "cuda"' "$f" || continue
    pkg=$(package_of "$(dirname "$(dirname "$f")")/Cargo.toml")
    [[ " ${packages[*]} " == *" $pkg "* ]] || packages+=("$pkg")
    test_targets+=("$pkg:$(basename "$f" .rs)")
done
features=()
for manifest in crates/*/Cargo.toml; do
    pkg=$(package_of "$manifest")
    [[ " ${packages[*]} " == *" $pkg "* ]] || continue
    if grep -q '^cuda = ' "$manifest"; then features+=("$pkg/cuda"); fi
done
features+=(hetsched/opencl)
selection=()
for pkg in "${packages[@]}"; do selection+=(-p "$pkg"); done
test_flags=()
for t in "${test_targets[@]}"; do test_flags+=(--test "${t#*:}"); done
feature_list=$(
    IFS=,
    echo "${features[*]}"
)
lib_filters=(gpu:: kernel_exec::cuda kernel_exec::confine)

cargo_flags=(--release)
[ "${GPU_CHECK_ONLINE:-0}" = 1 ] || cargo_flags+=(--offline)
if [ -n "${GPU_CHECK_VENDOR:-}" ]; then
    vendor=$(cd "$GPU_CHECK_VENDOR" && pwd)
    cargo_flags+=(--config 'source.crates-io.replace-with="gpu-check-vendor"'
        --config "source.gpu-check-vendor.directory=\"$vendor\"")
fi
target_dir=${CARGO_TARGET_DIR:-target}

# ---- a bundle for a GPU machine without Rust -------------------------------------

# --bundle DIR builds what the check runs and puts it in DIR: bin/ (hetsched,
# the cuda_mix example), lib/ (the interposer), tests/ (the test binaries),
# sys/ (each shared library they link beyond glibc; none today: hwloc is
# linked in and the drivers are opened at run time) and a manifest. The test binaries find hetsched where cargo built
# it (CARGO_BIN_EXE_hetsched), so the manifest names that path and the
# prebuilt check puts the binary there. Binaries built on an older glibc
# than the GPU machine's run there.
make_bundle() {
    local dir=$1 json=$work/tests.json
    # Not a bundle of a dirty tree without saying so.
    local commit
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    [ -z "$(git status --porcelain --untracked-files=no 2>/dev/null)" ] || commit="$commit+changes"
    cargo test "${cargo_flags[@]}" "${selection[@]}" --features "$feature_list" \
        --no-run --lib "${test_flags[@]}" --message-format=json-render-diagnostics >"$json"
    cargo build "${cargo_flags[@]}" -p hetsched-cuda-intercept
    cargo build "${cargo_flags[@]}" "${selection[@]}" --features "$feature_list" --example cuda_mix
    rm -rf "$dir"
    mkdir -p "$dir/bin" "$dir/lib" "$dir/tests" "$dir/sys"
    cp "$target_dir/release/hetsched" "$target_dir/release/examples/cuda_mix" "$dir/bin/"
    cp "$target_dir/release/libhetsched_cuda_intercept.so" "$dir/lib/"
    {
        echo "commit $commit"
        echo "hetsched $(realpath "$target_dir/release/hetsched")"
        # "test NAME FILE": lib-PACKAGE for unit tests, PACKAGE:TARGET for a
        # test file; unit-test binaries with no test under the filters are left out.
        python3 - "$json" "$dir/tests" "${lib_filters[@]}" <<'PY'
import json, shutil, subprocess, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    pkg = m["package_id"].split("#")[-1].split("@")[0]
    if "/" in pkg:  # an id without a #name@version tail
        pkg = m["target"]["name"]
    lib = "test" not in m["target"]["kind"]
    if lib:
        listed = subprocess.run([m["executable"], "--list", *sys.argv[3:]], capture_output=True, text=True, check=True)
        if listed.stdout.strip().endswith("0 tests, 0 benchmarks"):
            continue
    name = f"lib-{pkg}" if lib else f"{pkg}:{m['target']['name']}"
    file = name.replace(":", "-")
    shutil.copy(m["executable"], f"{sys.argv[2]}/{file}")
    print(f"test {name} {file}")
PY
    } >"$dir/manifest"
    strip --strip-debug "$dir"/bin/* "$dir"/lib/* "$dir"/tests/*
    # Every library the binaries link but glibc and the GPU's own.
    local so
    ldd "$dir"/bin/* "$dir"/lib/* "$dir"/tests/* 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
        while read -r so; do
            case $(basename "$so") in
            libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | ld-linux* | libgcc_s.so* | libcuda.so* | libnvidia-*) ;;
            *) cp -L "$so" "$dir/sys/" ;;
            esac
        done
    echo "gpu-check: bundle of $commit in $dir ($(du -sh "$dir" | cut -f1)); on the GPU machine: GPU_CHECK_PREBUILT=$dir scripts/gpu-check.sh" >&2
}
if [ -n "$bundle_dir" ]; then
    make_bundle "$bundle_dir"
    exit 0
fi

# ---- the machine -------------------------------------------------------------

run_step card 30 nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
if ((rc == 0)) && [ -s "$step_out" ]; then
    card=$(head -n 1 "$step_out")
    set_field card "$(json_str "$card")"
    summary+=("card: $card")
else
    fail card "no NVIDIA GPU answers nvidia-smi ($(reason))" card
fi

# NVRTC comes with the CUDA toolkit, not the driver: put a copy on the
# library path when the loader does not know one.
nvrtc_dir=
# (grep reads all of ldconfig's output: with pipefail, grep -q stopping
# early can fail the pipeline on ldconfig's SIGPIPE.)
nvrtc_known() { ldconfig -p 2>/dev/null | grep 'libnvrtc\.so' >/dev/null; }
if ! nvrtc_known; then
    shopt -s nullglob
    site=()
    if command -v python3 >/dev/null 2>&1; then
        read -r -a site < <(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null || true)
    fi
    found=(/usr/local/cuda*/lib64/libnvrtc.so* /usr/local/cuda*/targets/*/lib/libnvrtc.so*)
    for dir in "${site[@]}"; do
        found+=("$dir"/nvidia/cu13/lib/libnvrtc.so* "$dir"/nvidia/cuda_nvrtc/lib/libnvrtc.so*)
    done
    [ ${#found[@]} -eq 0 ] || nvrtc_dir=$(dirname "${found[0]}")
    shopt -u nullglob
    [ -z "$nvrtc_dir" ] || export LD_LIBRARY_PATH="$nvrtc_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -n "$nvrtc_dir" ]; then
    set_field nvrtc "$(json_str "$nvrtc_dir (added to LD_LIBRARY_PATH)")"
elif nvrtc_known; then
    set_field nvrtc '"on the loader path"'
else
    fail nvrtc "no libnvrtc.so on the loader path, in /usr/local/cuda or in Python's nvidia packages" nvrtc
fi

# ---- dependencies and build --------------------------------------------------

if [ -n "$prebuilt" ]; then
    # The bundle's own libraries first; the test binaries find hetsched
    # where it was built.
    export LD_LIBRARY_PATH="$prebuilt/sys${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    set_field deps "$(json_str "bundle $prebuilt ($(sed -n 's/^commit //p' "$prebuilt/manifest")): $(find "$prebuilt/sys" -type f | wc -l) libraries on LD_LIBRARY_PATH")"
    hs=$prebuilt/bin/hetsched
    tests_hs=$(sed -n 's/^hetsched //p' "$prebuilt/manifest")
    built=0
    # On the GPU machine that path is new; where it exists (the machine that
    # made the bundle) it is the build the bundle was made from.
    if [ ! -e "$tests_hs" ]; then
        mkdir -p "$(dirname "$tests_hs")" && cp "$hs" "$tests_hs" || built=1
    fi
    if ((built == 0)); then
        set_field build "$(json_str "prebuilt ($prebuilt)")"
        summary+=("build: prebuilt bundle")
    else
        fail build "cannot put hetsched at $tests_hs, where the test binaries look for it" build
    fi
else
    missing=()
    command -v cc >/dev/null 2>&1 || missing+=(build-essential)
    command -v pkg-config >/dev/null 2>&1 || missing+=(pkg-config)
    pkg-config --exists hwloc 2>/dev/null || missing+=(libhwloc-dev)
    pkg-config --exists libudev 2>/dev/null || missing+=(libudev-dev)
    command -v cargo >/dev/null 2>&1 || missing+=(cargo)
    if [ ${#missing[@]} -eq 0 ]; then
        set_field deps '"present"'
    else
        if [ -n "${GPU_CHECK_DEBS:-}" ]; then
            debs=("$GPU_CHECK_DEBS"/*.deb)
            run_step deps 120 dpkg -i "${debs[@]}"
        else
            # It needs apt and a mirror: without a network it fails, and says so.
            run_step deps 120 ./scripts/install-deps.sh
        fi
        if ((rc == 0)) && pkg-config --exists hwloc libudev 2>/dev/null; then
            set_field deps "$(json_str "installed ${missing[*]}")"
        else
            fail deps "missing ${missing[*]}, and installing them failed (no network? carry .deb files in GPU_CHECK_DEBS): $(reason)" deps
        fi
    fi

    # The binary this run built, kept apart: the test build below rebuilds
    # target/release/hetsched with the tests' feature set.
    hs=$work/hetsched

    run_step build 330 cargo build "${cargo_flags[@]}" -p hetsched --features cuda,opencl
    built=$rc
    ((built != 0)) || cp "$target_dir/release/hetsched" "$hs"
    if ((built == 0)); then
        set_field build "{\"seconds\": $step_secs}"
        summary+=("build: ok ($step_secs s)")
    else
        why=$(reason)
        grep -q 'offline' "$step_err" && why="$why (crates missing offline: give cargo a registry in CARGO_HOME or GPU_CHECK_VENDOR)"
        fail build "$why" build
    fi
fi

# ---- CUDA tests ----------------------------------------------------------------

# run_tests NAME TARGET: one test step, `cargo test` or the bundle's binaries
# (TARGET: lib, or PACKAGE:FILE).
run_tests() {
    local step=$1 t=$2
    if [ -n "$prebuilt" ]; then
        local bins=() name file
        while read -r _ name file; do
            if [ "$t" = lib ] && [[ $name == lib-* ]] || [ "$name" = "$t" ]; then bins+=("$prebuilt/tests/$file"); fi
        done < <(grep '^test ' "$prebuilt/manifest")
        local filters=()
        [ "$t" != lib ] || filters=("${lib_filters[@]}")
        # Each binary in turn, all with the same arguments; the first to fail ends the step.
        # shellcheck disable=SC2016 # "$b" and "$@" are the inner shell's
        run_step "$step" 150 bash -c 'for b in '"${bins[*]@Q}"'; do "$b" "$@" || exit; done' \
            _ --include-ignored --test-threads=1 --nocapture "${filters[@]}"
    elif [ "$t" = lib ]; then
        run_step "$step" 150 cargo test "${cargo_flags[@]}" "${selection[@]}" --features "$feature_list" \
            --lib -- --include-ignored --test-threads=1 --nocapture "${lib_filters[@]}"
    else
        run_step "$step" 150 cargo test "${cargo_flags[@]}" "${selection[@]}" --features "$feature_list" \
            --test "${t#*:}" -- --include-ignored --test-threads=1 --nocapture
    fi
}

tests_fragments=()
if ((built != 0)); then
    fail tests "not run: the build failed" tests
else
    rc=0
    [ -n "$prebuilt" ] || run_step build-tests 240 cargo test "${cargo_flags[@]}" "${selection[@]}" --features "$feature_list" \
        --no-run --lib "${test_flags[@]}"
    if ((rc != 0)); then
        fail tests "building the test binaries failed: $(reason)" tests
    else
        test_failed=0
        for t in lib "${test_targets[@]}"; do
            if [ "$t" = lib ]; then
                name="lib tests ${lib_filters[*]}"
                run_tests test-lib lib
            else
                name="${t%%:*} tests/${t#*:}.rs"
                run_tests "test-${t#*:}" "$t"
            fi
            skipped=$(grep -hE 'skipping|no CUDA here' "$step_out" "$step_err" | head -n 2 | paste -sd ';' || true)
            # (no "test result" line where the step was killed: grep fails, awk says 0)
            ran=$(grep -hE '^test result: ' "$step_out" | awk '{n += $4} END {print n + 0}' || true)
            if ((rc != 0)); then
                tests_fragments+=("$(json_str "$name"): {\"error\": $(json_str "$(reason)")}")
                test_failed=1
            elif [ -n "$skipped" ]; then
                tests_fragments+=("$(json_str "$name"): {\"error\": $(json_str "passed, but without the GPU: ${skipped:0:500}")}")
                test_failed=1
            elif ((ran == 0)); then
                tests_fragments+=("$(json_str "$name"): {\"error\": \"no test matched\"}")
                test_failed=1
            else
                tests_fragments+=("$(json_str "$name"): {\"passed\": $ran}")
            fi
        done
        joined=$(
            IFS=,
            echo "${tests_fragments[*]}"
        )
        set_field tests "{$joined}"
        if ((test_failed)); then
            failures=$((failures + 1))
            summary+=("tests: FAILED (see \"tests\" in the report)")
        else
            summary+=("tests: all passed on the GPU")
        fi
    fi
fi

# ---- GPU costs: hetsched bench cuda-costs, one part at a time ----------------

declare -A part_fields=(
    [launch]="launch_overhead_us calibration"
    [copy]="copy_in_us_per_mib copy_out_us_per_mib copies"
    [model]="prediction_error"
    [served]="served_overhead"
)
declare -A part_timeout=([launch]=60 [copy]=90 [model]=120 [served]=120)
for part in launch copy model served; do
    read -r -a names <<<"${part_fields[$part]}"
    if ((built != 0)); then
        fail "cuda-costs $part" "not run: the build failed" "${names[@]}"
        continue
    fi
    run_step "cuda-costs-$part" "${part_timeout[$part]}" "$hs" bench cuda-costs --json --parts "$part"
    line=$(grep -m1 '^{' "$step_out" || true)
    printf '%s\n' "$line" >"$work/part.json"
    if [ -n "$line" ] && is_json "$work/part.json"; then
        # One object whose keys are this part's fields (errors included).
        inner=${line#\{}
        fragments+=("${inner%\}}")
        if ((rc != 0)); then
            failures=$((failures + 1))
            summary+=("cuda-costs $part: FAILED: $(reason)")
            continue
        fi
        case $part in
        launch) summary+=("launch round trip: $(num launch_overhead_us "$work/part.json") µs (median)") ;;
        copy) summary+=("copies: in $(num copy_in_us_per_mib "$work/part.json") µs/MiB, out $(num copy_out_us_per_mib "$work/part.json") µs/MiB") ;;
        model) summary+=("model: mean held-out prediction error $(num held_out_mean "$work/part.json")") ;;
        served) summary+=("served vs in process: overhead $(grep -oE '"overhead_us":-?[0-9.]+' "$work/part.json" | sed 's/.*://' | tr '\n' ' ')µs at $(grep -oE '"bytes":[0-9]+' "$work/part.json" | sed 's/.*://' | tr '\n' ' ')B") ;;
        esac
    else
        fail "cuda-costs $part" "$(reason)" "${names[@]}"
    fi
done

# ---- two clients sharing the GPU at CUSTOM 70/30 ------------------------------

if ((built != 0)); then
    fail share_split "not run: the build failed" share_split
else
    run_step device-shares 90 "$hs" bench device-shares --json --unit cuda0 --seconds 5
    if ((rc == 0)) && [ -s "$step_out" ] && is_json "$step_out"; then
        set_field share_split "$(cat "$step_out")"
        summary+=("share split: device_fraction $(grep -oE '"device_fraction": ?[0-9.]+' "$step_out" | sed 's/.*: *//' | tr '\n' ' ')")
    else
        fail share_split "$(reason)" share_split
    fi
fi

# ---- unmodified CUDA programs under the interposer ---------------------------

# Two programs that open the GPU themselves (hetsched load --direct-cuda,
# and PyTorch where it is installed) under `hetsched run` at CUSTOM 70/30,
# through the CUDA interposer (crates/intercept/cuda, docs/intercept.md).
if ((built != 0)); then
    fail intercept "not run: the build failed" intercept
else
    rc=0 lib_dir=$prebuilt/lib
    if [ -z "$prebuilt" ]; then
        run_step build-interposer 180 cargo build "${cargo_flags[@]}" -p hetsched-cuda-intercept
        lib_dir=$target_dir/release
    fi
    if ((rc != 0)); then
        fail intercept "building the CUDA interposer failed: $(reason)" intercept
    else
        run_step intercept 120 scripts/intercept-cuda-check.sh "$hs" "$lib_dir" 5
        if ((rc == 0)) && [ -s "$step_out" ] && is_json "$step_out"; then
            set_field intercept "$(cat "$step_out")"
            summary+=("interposer: $(tr -d '\n' <"$step_out" | cut -c1-200)")
        else
            fail intercept "$(reason)" intercept
        fi
    fi
fi

# ---- the mix on the GPU against the CPU alone ----------------------------------

# `hetsched demo` runs Table 3 on emulated GPUs only (crates/cli/src/demo);
# the runtime's cuda_mix example is what runs a mix on the real GPU, with the
# GPU and with it switched off (HETSCHED_CUDA=0), checking every result.
mix_args=(48 4096 512 50)
mix=${prebuilt:+$prebuilt/bin}
mix=${mix:-$target_dir/release/examples}/cuda_mix
throughput() { sed -n 's/.* calls in .* ms (\([0-9.]*\) calls\/s)$/\1/p' "$1" | tail -n 1; }
mix_demo() {
    local gpu_tp cpu_tp ratio placement
    rc=0
    [ -n "$prebuilt" ] || run_step build-cuda-mix 180 cargo build "${cargo_flags[@]}" "${selection[@]}" --features "$feature_list" --example cuda_mix
    ((rc == 0)) || { fail demo "building the cuda_mix example failed: $(reason)" demo; return; }
    run_step cuda-mix-gpu 120 "$mix" "${mix_args[@]}"
    ((rc == 0)) || { fail demo "the mix with the GPU failed: $(reason)" demo; return; }
    if grep -q 'no CUDA unit' "$step_out"; then
        fail demo "the runtime had no CUDA unit: $(grep -m1 'no CUDA' "$step_out")" demo
        return
    fi
    gpu_tp=$(throughput "$step_out")
    placement=$(grep -E '^[a-z0-9-]+ +[a-z0-9-]+ +[0-9]+ calls$' "$step_out" | tr -s ' ' | tr '\n' ';')
    run_step cuda-mix-cpu 120 env HETSCHED_CUDA=0 "$mix" "${mix_args[@]}"
    ((rc == 0)) || { fail demo "the mix without the GPU failed: $(reason)" demo; return; }
    cpu_tp=$(throughput "$step_out")
    if [ -z "$gpu_tp" ] || [ -z "$cpu_tp" ]; then
        fail demo "no throughput line in the example's output" demo
        return
    fi
    ratio=$(awk -v a="$gpu_tp" -v b="$cpu_tp" 'BEGIN {printf "%.3f", a / b}')
    set_field demo "{\"source\": \"hetsched-runtime example cuda_mix ${mix_args[*]} (one process; hetsched demo has emulated GPUs only)\", \
\"gpu_calls_per_s\": $gpu_tp, \"cpu_only_calls_per_s\": $cpu_tp, \"gpu_vs_cpu_only\": $ratio, \"placement\": $(json_str "$placement")}"
    summary+=("cuda_mix: $gpu_tp calls/s with the GPU, $cpu_tp without (x$ratio)")
}
if ((built != 0)); then
    fail demo "not run: the build failed" demo
else
    mix_demo
fi

# ---- the report ----------------------------------------------------------------

fragments+=("\"seconds\": $SECONDS")
{
    echo "{"
    for i in "${!fragments[@]}"; do
        sep=,
        ((i + 1 < ${#fragments[@]})) || sep=
        printf '  %s%s\n' "${fragments[$i]}" "$sep"
    done
    echo "}"
} >"$report"
if ! is_json "$report"; then
    echo "gpu-check: the report is not valid JSON (a step printed something unexpected): $report" >&2
    failures=$((failures + 1))
fi

echo
echo "gpu-check summary ($SECONDS s; report $report, log $log):"
printf '  %s\n' "${summary[@]}"
if ((failures > 0)); then
    echo "gpu-check: $failures step(s) failed"
    exit 1
fi
echo "gpu-check: every step passed"
