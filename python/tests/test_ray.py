"""hetsched.ray on a 2-node Ray cluster on this machine: a daemon per node,
tasks placed across the nodes, shares between actors enforced.

The cluster runs in a network namespace with only loopback up (Ray then
stays on 127.0.0.1), in a child process: ray_cluster_check.py.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import hetsched_binary

HERE = Path(__file__).resolve().parent

pytest.importorskip("ray")


@pytest.fixture(scope="module")
def report():
    if os.geteuid() != 0 and shutil.which("unshare") is None:
        pytest.skip("needs unshare for a private network namespace")
    if shutil.which("ip") is None:
        pytest.skip("needs ip (iproute2) to bring loopback up in the namespace")
    netns = ["unshare", "-n"] if os.geteuid() == 0 else ["unshare", "-rn"]
    env = dict(os.environ, HETSCHED_BIN=hetsched_binary(), PYTHONPATH=str(HERE))
    script = f"ip link set lo up && exec {sys.executable} {HERE / 'ray_cluster_check.py'}"
    run = subprocess.run(
        netns + ["sh", "-c", script], env=env, capture_output=True, text=True, timeout=170
    )
    if run.returncode != 0:
        pytest.fail(f"the Ray cluster check failed ({run.returncode}):\n{run.stdout[-3000:]}\n{run.stderr[-6000:]}")
    return json.loads(run.stdout.strip().splitlines()[-1])


def test_every_node_runs_a_daemon_and_every_result_is_right(report) -> None:
    assert report["daemons"] == 2
    assert report["wrong"] == 0
    assert report["decorated_wrong"] == 0
    assert report["decorated_name"].endswith("decorated")


def test_calls_run_on_the_node_executor_unless_given_ray_options(report) -> None:
    assert report["plain_call_in_actor"] is True
    assert report["option_call_in_actor"] is False


def test_tasks_use_both_nodes_gpus(report) -> None:
    # Each node's workers learned the task's time on the node's own GPU.
    models = report["models"]
    assert models["gpu-big0"].get("gpu-big") == pytest.approx(0.003, rel=0.2), models
    assert models["gpu-wimpy0"].get("gpu-wimpy") == pytest.approx(0.009, rel=0.2), models


def test_actor_shares_hold_on_the_nodes_gpu(report) -> None:
    heavy, light = report["split_hetsched"]
    assert heavy == pytest.approx(0.70, abs=0.05), report
    assert light == pytest.approx(0.30, abs=0.05), report
    # Without hetsched classes the two actors split the GPU evenly.
    a, b = report["split_plain"]
    assert a == pytest.approx(0.5, abs=0.1), report


def test_actors_own_opencl_calls_split_the_device_by_shares(report) -> None:
    # Actors that call pyopencl themselves, with no hetsched call: the
    # OpenCL layer in their environment puts their launches under leases.
    assert report["opencl_intercepted"] == ["opencl", "opencl"], report
    heavy, light = report["split_opencl"]
    assert heavy == pytest.approx(0.70, abs=0.05), report
    assert light == pytest.approx(0.30, abs=0.05), report


def test_a_bad_actor_declaration_is_refused(report) -> None:
    assert "needs class_" in report["actor_error"]
