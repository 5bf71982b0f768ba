"""hetsched.report_capability_fallback writes the process's fault ledger,
which `hetsched balance` reads (Kinship's functional asymmetry)."""

import os
import struct
import subprocess
import sys

import pytest

import hetsched


def test_an_unknown_category_is_a_value_error():
    with pytest.raises(ValueError, match="unknown fallback category"):
        hetsched.report_capability_fallback("aes-ni")
    with pytest.raises(ValueError):
        hetsched.report_capability_fallback("general")


def test_a_fallback_lands_in_the_ledger_of_the_reporting_process(tmp_path):
    # A fresh process: the ledger directory is read at its first report.
    script = (
        "import os, threading, hetsched\n"
        "hetsched.report_capability_fallback('crypto')\n"
        "print(os.getpid(), threading.get_native_id())\n"
    )
    env = dict(os.environ, HETSCHED_FAULT_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    pid, tid = (int(x) for x in out.stdout.split())
    data = (tmp_path / f"hetsched-faults.{pid}").read_bytes()
    assert len(data) == 32, data
    rec_tid, cpu, categories, reserved, count, _check = struct.unpack("<IIIIQQ", data)
    assert (rec_tid, categories, reserved, count) == (tid, 2, 0, 1)
    assert cpu < os.cpu_count()
