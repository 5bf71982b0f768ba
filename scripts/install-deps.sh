#!/usr/bin/env bash
# Installs what building and testing hetsched needs, when it is missing.
# Idempotent: a machine that has everything is left alone.
set -euo pipefail

need_apt=()
command -v cc >/dev/null 2>&1 || need_apt+=(build-essential)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
# hetsched-platform loads hwloc at run time (CPU kinds, caches); its tests
# need it installed. libudev-dev stays for scripts/gpu-check.sh, which checks for it.
pkg-config --exists hwloc 2>/dev/null || need_apt+=(libhwloc-dev)
pkg-config --exists libudev 2>/dev/null || need_apt+=(libudev-dev)
# hetsched-opencl loads libOpenCL at run time (the ICD loader); PoCL gives its
# tests and the runtime an OpenCL CPU device on machines without a GPU driver.
pkg-config --exists OpenCL 2>/dev/null || need_apt+=(ocl-icd-opencl-dev)
[ -e /etc/OpenCL/vendors/pocl.icd ] || need_apt+=(pocl-opencl-icd)
# The OpenCL layer's test checks its dispatch positions against the ICD
# header; clpeak is an unmodified OpenCL program to run under the layer.
[ -e /usr/include/CL/cl_icd.h ] || need_apt+=(opencl-headers)
command -v clpeak >/dev/null 2>&1 || need_apt+=(clpeak)
# The StarPU scheduling policy (integrations/starpu) builds against StarPU 1.3;
# its experiment can also run StarPU's own examples.
pkg-config --exists starpu-1.3 2>/dev/null || need_apt+=(libstarpu-dev)
if command -v dpkg >/dev/null 2>&1; then
    dpkg -s starpu-examples >/dev/null 2>&1 || need_apt+=(starpu-examples)
fi
# `hetsched top` is tested the way a person uses it, under tmux; the
# installed systemd unit is checked with systemd-analyze.
command -v tmux >/dev/null 2>&1 || need_apt+=(tmux)
command -v systemd-analyze >/dev/null 2>&1 || need_apt+=(systemd)
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "install-deps: missing ${need_apt[*]}; run as root or install them" >&2
        exit 1
    fi
    echo "install-deps: apt-get install ${need_apt[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}"
fi

if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: cargo not found; install Rust with rustup (https://rustup.rs)" >&2
    exit 1
fi
if command -v rustup >/dev/null 2>&1; then
    for component in rustfmt clippy; do
        rustup component list --installed 2>/dev/null | grep -q "^$component" \
            || rustup component add "$component"
    done
fi

# The Python package (python/) and its tests: maturin builds the module;
# numpy, pyopencl (on PoCL) and Ray are what the tests exercise.
PYTHON=${PYTHON:-python3}
if ! command -v "$PYTHON" >/dev/null 2>&1; then
    echo "install-deps: $PYTHON not found; install Python 3.9 or newer" >&2
    exit 1
fi
need_pip=()
"$PYTHON" -c 'import maturin' 2>/dev/null || need_pip+=('maturin>=1.16,<2')
"$PYTHON" -c 'import pytest' 2>/dev/null || need_pip+=(pytest)
"$PYTHON" -m ruff --version >/dev/null 2>&1 || need_pip+=(ruff)
"$PYTHON" -c 'import numpy' 2>/dev/null || need_pip+=(numpy)
"$PYTHON" -c 'import pyopencl' 2>/dev/null || need_pip+=(pyopencl)
"$PYTHON" -c 'import ray' 2>/dev/null || need_pip+=('ray==2.60.0')
"$PYTHON" -c 'import prometheus_client' 2>/dev/null || need_pip+=(prometheus_client)
if [ ${#need_pip[@]} -gt 0 ]; then
    echo "install-deps: pip install ${need_pip[*]}"
    "$PYTHON" -m pip install -q --root-user-action=ignore "${need_pip[@]}"
fi
