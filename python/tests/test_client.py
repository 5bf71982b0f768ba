"""hetsched.Client against a real daemon: units, status, shares, the
dispatch gate, and the errors a caller can make."""

from __future__ import annotations

import faulthandler
import json
import os
import subprocess
import threading

import numpy as np
import pytest

import hetsched
from conftest import hetsched_binary, wait_until


def test_no_daemon_raises_daemon_unavailable(no_socket: str) -> None:
    with pytest.raises(hetsched.DaemonUnavailable, match="cannot reach the hetsched daemon"):
        hetsched.Client(socket=no_socket)
    assert issubclass(hetsched.DaemonUnavailable, hetsched.HetschedError)


def test_units_describe_the_daemons_units(daemon) -> None:
    with daemon.client() as c:
        units = {u.name: u for u in c.units()}
    assert "emu-gpu0" in units, units
    emu = units["emu-gpu0"]
    assert emu.kind == "emu-gpu" and emu.emulated and emu.slots == 1
    assert emu.relative_speed == pytest.approx(8.0)
    cpus = [u for u in units.values() if u.unit_class == "cpu"]
    assert cpus and sum(u.slots for u in cpus) == os.cpu_count()
    # PoCL's device, under an agent (device_units = true).
    assert "opencl0" in units and units["opencl0"].kind.startswith("opencl:")


def test_status_is_what_status_json_prints(daemon) -> None:
    with daemon.client("status-test") as c:
        mine = c.status()
        cli = json.loads(
            subprocess.run(
                [hetsched_binary(), "status", "--json", "--socket", daemon.socket],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
        )
        assert set(mine) == set(cli)
        assert [u["info"]["name"] for u in mine["units"]] == [u["info"]["name"] for u in cli["units"]]
        me = [x for x in mine["clients"] if x["pid"] == c.pid]
        assert len(me) == 1 and me[0]["name"] == "status-test", mine["clients"]
        assert set(me[0]) == set(cli["clients"][0])


def test_set_shares_changes_this_process_on_one_unit(daemon) -> None:
    with daemon.client("shares-test") as c:
        applied = c.set_shares("custom", 70, unit="emu-gpu0")
        assert applied["pid"] == c.pid
        assert applied["units"] == {"emu-gpu0": {"class": "custom:70", "priority": 0}}
        emu = next(u.id for u in c.units() if u.name == "emu-gpu0")

        def my_classes():
            me = next(x for x in c.status()["clients"] if x["pid"] == c.pid)
            return {u["unit"]: u["settings"] for u in me["units"]}

        mine = my_classes()
        assert mine[emu] == {"class": {"Custom": 70}, "priority": 0}
        assert all(s["class"] == {"Normal": 10} for u, s in mine.items() if u != emu)
        applied = c.set_shares("background")
        assert set(applied["units"]) == {u.name for u in c.units()}
        assert all(s["class"] == "Background" for s in my_classes().values())
        c.set_shares(priority=5, unit="opencl0")
        assert my_classes()[next(u.id for u in c.units() if u.name == "opencl0")]["priority"] == 5


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"shares": 30}, ValueError, "shares need a class_"),
        ({}, ValueError, "nothing to change"),
        ({"class_": "gold"}, ValueError, "unknown class"),
        ({"class_": "custom"}, ValueError, "needs a number of shares"),
        ({"class_": "background", "shares": 3}, ValueError, "takes no shares"),
        ({"class_": "normal", "unit": "tpu9"}, hetsched.UnknownUnit, "no unit named \"tpu9\""),
    ],
)
def test_bad_settings_are_refused_with_a_reason(daemon, kwargs, error, message) -> None:
    with daemon.client() as c:
        with pytest.raises(error, match=message):
            c.set_shares(**kwargs)


def test_impossible_shares_are_refused_by_the_daemon(daemon) -> None:
    with daemon.client() as c:
        with pytest.raises(hetsched.DaemonError):
            c.set_shares("custom", 150, unit="emu-gpu0")


def test_a_closed_client_says_so(daemon) -> None:
    c = daemon.client()
    c.close()
    with pytest.raises(hetsched.HetschedError, match="closed"):
        c.units()


def test_dispatch_grants_and_reports_wall_time(daemon) -> None:
    with daemon.client("dispatch-test") as c:
        with c.dispatch("opencl0") as d:
            assert d.grant is not None and d.grant.unit == "opencl0"
            assert d.grant.waited_ns >= 0
            total = sum(range(20000))
        assert total == 199990000
        assert d.ran_ns is not None and d.ran_ns > 0
        with c.dispatch("opencl0") as d:
            d.device_time(12345)
        assert d.ran_ns == 12345


def test_dispatch_to_an_unknown_unit_names_the_units(daemon) -> None:
    assert issubclass(hetsched.UnknownUnit, hetsched.HetschedError)
    assert issubclass(hetsched.UnknownUnit, LookupError)
    with daemon.client() as c:
        with pytest.raises(hetsched.UnknownUnit, match="opencl0"):
            with c.dispatch("gpu7"):
                pass


def test_dispatch_reads_device_time_from_pyopencl_events(daemon) -> None:
    cl = pytest.importorskip("pyopencl")
    with daemon.client("events-test") as c:
        dev = hetsched.Device("opencl", 0, "pocl")
        ctx, queue = dev.context, dev.queue
        prog = cl.Program(ctx, "__kernel void twice(__global float *a) { int i = get_global_id(0); a[i] = 2 * a[i]; }").build()
        host = np.arange(1 << 16, dtype=np.float32)
        buf = cl.Buffer(ctx, cl.mem_flags.READ_WRITE | cl.mem_flags.COPY_HOST_PTR, hostbuf=host)
        with c.dispatch("opencl0") as d:
            ev = prog.twice(queue, host.shape, None, buf)
            d.record(ev)
            out = np.empty_like(host)
            cl.enqueue_copy(queue, out, buf).wait()
        assert np.array_equal(out, 2 * np.arange(1 << 16, dtype=np.float32))
        assert d.ran_ns == ev.profile.end - ev.profile.start > 0


def test_waiting_for_a_grant_does_not_hold_the_gil(daemon) -> None:
    faulthandler.dump_traceback_later(120, exit=True)  # a held GIL would hang here
    try:
        holder, waiter = daemon.client("holder"), daemon.client("waiter")
        got = threading.Event()
        with holder.dispatch("opencl0"):

            def wait_for_slot() -> None:
                with waiter.dispatch("opencl0"):
                    got.set()

            t = threading.Thread(target=wait_for_slot)
            t.start()
            # The waiter's request is queued at the agent ...
            wait_until("the waiter to queue on opencl0", lambda: holder.view("opencl0")["queued"] >= 1)
            # ... while this thread keeps running Python code.
            progress = sum(i * i for i in range(200000))
            assert progress > 0 and not got.is_set()
        t.join(timeout=30)
        assert got.is_set()
        holder.close()
        waiter.close()
    finally:
        faulthandler.cancel_dump_traceback_later()


def test_view_reads_the_shared_pages(daemon) -> None:
    with daemon.client() as c:
        v = c.view("emu-gpu0")
        assert 0.0 < v["guaranteed"] <= 1.0
        assert v["max_utilisation"] > 0
        assert set(v) >= {"wait_ns", "busy_fraction", "queued", "running", "active_clients"}
        with pytest.raises(hetsched.UnknownUnit):
            c.view("nope")
