"""hetsched.Runtime: Python implementations placed by the Rust runtime,
numpy without copies, pyopencl on PoCL, errors, models, the GIL."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import hetsched


@pytest.fixture
def rt(daemon, tmp_path: Path):
    r = hetsched.Runtime("pytest-rt", monitor="daemon", socket=daemon.socket, model_dir=str(tmp_path))
    yield r
    r.close()


def test_run_and_submit_return_the_implementations_result(rt) -> None:
    square = hetsched.Task("square", cpu=lambda x: x * x)
    assert rt.monitor == "daemon"
    assert rt.run(square, 12) == 144
    futures = [rt.submit(square, i) for i in range(50)]
    assert [f.result(timeout=30) for f in futures] == [i * i for i in range(50)]
    f = futures[0]
    assert f.done() and f.unit.startswith("cpu") and f.turnaround > 0
    # A worker hands a task's result over, then counts it done: the count
    # reaches zero just after the last result, not before.
    deadline = time.monotonic() + 5
    while rt.stats()["outstanding"] != 0:
        assert time.monotonic() < deadline, rt.stats()
        time.sleep(0.001)


def test_an_implementations_exception_reaches_the_caller(rt) -> None:
    def fails(x):
        raise KeyError(f"no key {x}")

    task = hetsched.Task("fails", cpu=fails)
    with pytest.raises(KeyError, match="no key 3"):
        rt.run(task, 3)
    f = rt.submit(task, 4)
    with pytest.raises(KeyError, match="no key 4"):
        f.result()
    with pytest.raises(KeyError):  # asked twice, the same exception
        f.result()


def test_numpy_arrays_are_passed_without_copies(rt) -> None:
    a = np.zeros(1 << 20, dtype=np.float64)
    seen = {}

    def fill(arr, value):
        seen["same"] = arr is a
        arr += value
        return arr[:4]

    task = hetsched.Task("fill", cpu=fill, sizes=lambda arr, v: (arr.nbytes, 32))
    view = rt.run(task, a, 2.5)
    assert seen["same"]
    assert a[0] == a[-1] == 2.5
    assert np.shares_memory(view, a)


def test_waiting_for_a_result_does_not_hold_the_gil(rt) -> None:
    release = threading.Event()
    started = threading.Event()

    def blocked():
        started.set()  # needs the GIL: the caller must not hold it
        assert release.wait(60)
        return "done"

    f = rt.submit(hetsched.Task("blocked", cpu=blocked))
    with pytest.raises(TimeoutError):
        f.result(timeout=0.05)
    assert started.wait(30)
    release.set()
    assert f.result(timeout=30) == "done"


def test_emulated_implementations_run_on_the_emulated_gpu(rt) -> None:
    def cpu_sum(data):
        total = 0
        for x in data:  # slow on purpose: the emulated GPU wins
            total += x
        return total

    task = hetsched.Task(
        "emu-sum",
        cpu=cpu_sum,
        emulated={"emu-gpu": (lambda data: 20e-6, lambda data: int(np.sum(data)))},
        sizes=lambda data: (data.nbytes, 8),
    )
    data = np.arange(200_000, dtype=np.int64)
    expected = int(data.sum())
    units = []
    for _ in range(40):
        f = rt.submit(task, data)
        assert f.result(timeout=60) == expected
        units.append(f.unit)
    assert "emu-gpu0" in units, units


def test_pyopencl_implementations_run_on_pocl(daemon, tmp_path: Path) -> None:
    cl = pytest.importorskip("pyopencl")
    src = "__kernel void add(__global const float *a, __global const float *b, __global float *c)" \
          " { int i = get_global_id(0); c[i] = a[i] + b[i]; }"
    built = {}

    def add_on_device(dev, a, b):
        assert dev.api == "opencl" and dev.index == 0
        ctx, queue = dev.context, dev.queue
        if "prog" not in built:
            built["prog"] = cl.Program(ctx, src).build()
        mf = cl.mem_flags
        da = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=a)
        db = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=b)
        dc = cl.Buffer(ctx, mf.WRITE_ONLY, a.nbytes)
        built["prog"].add(queue, a.shape, None, da, db, dc)
        c = np.empty_like(a)
        cl.enqueue_copy(queue, c, dc).wait()
        return c

    with hetsched.Runtime("pytest-cl", monitor="daemon", socket=daemon.socket, model_dir=str(tmp_path)) as rt:
        assert "opencl0" in [u.name for u in rt.units()]
        task = hetsched.Task("vadd", opencl=add_on_device, sizes=lambda a, b: (2 * a.nbytes, a.nbytes))
        a = np.arange(4096, dtype=np.float32)
        b = np.full(4096, 0.5, dtype=np.float32)
        f = rt.submit(task, a, b)
        assert np.array_equal(f.result(timeout=60), a + b)
        assert f.unit == "opencl0"


def test_models_persist_across_runtimes(daemon, tmp_path: Path) -> None:
    task = hetsched.Task("persisted", cpu=lambda n: sum(range(n)))
    with hetsched.Runtime("pytest-models", monitor="daemon", socket=daemon.socket, model_dir=str(tmp_path)) as rt:
        assert rt.predict("persisted") == {}
        for _ in range(20):
            assert rt.run(task, 1000) == 499500
        predicted = rt.predict("persisted")
        assert predicted["cpu"] is not None and 0 < predicted["cpu"] < 1.0, predicted
        assert predicted["emu-gpu"] is None  # never ran there
    files = list(tmp_path.iterdir())
    assert files, "no model file written"
    assert "persisted" in "".join(f.read_text() for f in files)


def test_an_embedded_monitor_serves_a_lone_program(no_socket: str, tmp_path: Path) -> None:
    with hetsched.Runtime("pytest-embedded", socket=no_socket, model_dir=str(tmp_path)) as rt:
        assert rt.monitor == "embedded"
        assert rt.run(hetsched.Task("neg", cpu=lambda x: -x), 5) == -5


@pytest.mark.parametrize(
    "make, error, message",
    [
        (lambda: hetsched.Task("none"), ValueError, "has no implementation"),
        (lambda: hetsched.Task("", cpu=abs), ValueError, "needs a name"),
        (lambda: hetsched.Task("x", cpu=3), TypeError, "cpu must be callable"),
        (lambda: hetsched.Task("x", emulated={"emu-gpu": abs}), TypeError, "must be a pair"),
        (lambda: hetsched.Task("x", cpu=abs, sizes="big"), TypeError, "sizes must be"),
    ],
)
def test_bad_tasks_are_refused(make, error, message) -> None:
    with pytest.raises(error, match=message):
        make()


def test_bad_calls_are_refused_and_lose_nothing(rt) -> None:
    bad_sizes = hetsched.Task("bad-sizes", cpu=lambda x: x, sizes=lambda x: "many")
    with pytest.raises(ValueError, match="sizes"):
        rt.run(bad_sizes, 1)
    bad_cost = hetsched.Task("bad-cost", cpu=lambda x: x, emulated={"emu-gpu": (lambda x: -1.0, lambda x: x)})
    with pytest.raises(ValueError, match="finite number of seconds"):
        rt.submit(bad_cost, 1)
    assert rt.stats()["outstanding"] == 0
    assert rt.run(hetsched.Task("after", cpu=lambda x: x + 1), 1) == 2


def test_a_task_no_unit_can_run_fails_clearly(daemon, tmp_path: Path) -> None:
    only_cl = hetsched.Task("only-cl", opencl=lambda dev, x: x)
    with hetsched.Runtime("pytest-nocl", monitor="daemon", socket=daemon.socket, opencl=False,
                          model_dir=str(tmp_path)) as rt:
        with pytest.raises(hetsched.TaskFailed, match="no implementation"):
            rt.run(only_cl, 1)


def test_runtime_arguments_are_checked(no_socket: str) -> None:
    with pytest.raises(ValueError, match="monitor must be"):
        hetsched.Runtime(monitor="remote")
    with pytest.raises(hetsched.DaemonUnavailable):
        hetsched.Runtime(monitor="daemon", socket=no_socket)
    rt = hetsched.Runtime(monitor="embedded", persist_models=False)
    rt.close()
    with pytest.raises(hetsched.HetschedError, match="closed"):
        rt.run(hetsched.Task("t", cpu=abs), 1)
