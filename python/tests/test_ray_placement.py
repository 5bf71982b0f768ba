"""hetsched.ray's choice of node, on made-up node summaries (no cluster)."""

from __future__ import annotations

import time

import pytest

from conftest import wait_until

pytest.importorskip("ray")
import hetsched.ray as hray  # noqa: E402


def unit(name, kind, cls="gpu", slots=1, speed=10.0, backlog=0, runnable=0):
    return {"name": name, "kind": kind, "class": cls, "slots": slots, "speed": speed,
            "busy": 0.0, "backlog": backlog, "runnable": runnable}


FAST = {"units": [unit("gpu-big0", "gpu-big", speed=30.0)], "models": {}}
SLOW = {"units": [unit("cpu", "cpu", "cpu", slots=2, speed=1.0), unit("gpu-wimpy0", "gpu-wimpy")], "models": {}}
KINDS = ["cpu", "gpu-big", "gpu-wimpy"]


def test_a_node_serves_at_the_sum_of_its_units_rates() -> None:
    times = {"cpu": 0.010, "gpu-wimpy": 0.002}
    assert hray.node_rate(KINDS, times, SLOW) == pytest.approx(2 / 0.010 + 1 / 0.002)
    busy = {"units": [unit("cpu", "cpu", "cpu", slots=2, runnable=4), unit("gpu-wimpy0", "gpu-wimpy", backlog=3)]}
    # Twice the runnable threads halves the CPUs; a backlog of 3 on one slot quarters the GPU.
    assert hray.node_rate(KINDS, times, busy) == pytest.approx(1 / 0.010 + 1 / 0.008)


def test_units_without_an_implementation_do_not_count() -> None:
    assert hray.node_rate(["cpu"], {"cpu": 0.01}, FAST) == 0.0
    assert hray.node_rate(["gpu-wimpy"], {"gpu-wimpy": 0.002}, SLOW) == pytest.approx(500.0)


def test_an_unmeasured_kind_is_estimated_from_relative_speed_or_tried() -> None:
    speeds = {"gpu-big": 30.0, "gpu-wimpy": 10.0}
    # gpu-wimpy not measured: three times gpu-big's 1 ms from the speeds.
    rate = hray.node_rate(["gpu-big", "gpu-wimpy"], {"gpu-big": 0.001}, SLOW, speeds)
    assert rate == pytest.approx(1 / 0.003)
    # Nothing measured on any device, or the CPU not measured: to be tried.
    assert hray.node_rate(["gpu-wimpy"], {}, SLOW, speeds) is None
    assert hray.node_rate(["cpu"], {}, SLOW, speeds) is None


def placer_with(summaries):
    p = hray._Placer()
    p.summaries = summaries
    p.refreshed_at = time.monotonic() + 3600  # no refresh: no cluster here
    p.answered_at = {nid: time.monotonic() + 3600 for nid in summaries}
    return p


def test_the_placer_spreads_calls_by_node_throughput() -> None:
    models = {"t": {"gpu-big": 0.001, "gpu-wimpy": 0.003}}
    p = placer_with({"A": dict(FAST, models=models), "B": dict(SLOW, models=models)})
    chosen = []
    for i in range(8):
        nid = p.choose("t", ["gpu-big", "gpu-wimpy"])
        chosen.append(nid)
        p.inflight.setdefault(nid, []).append(i)  # stays in flight
    # A serves three times faster: it takes three calls for each of B's.
    assert chosen.count("A") == 6 and chosen.count("B") == 2, chosen


def test_an_untried_node_gets_one_call_at_a_time() -> None:
    p = placer_with({"A": dict(FAST, models={"t": {"gpu-big": 0.001}}), "B": dict(SLOW, models={})})
    first = p.choose("t", ["cpu"])
    assert first == "B"  # only B implements cpu; untried: try it
    p.inflight["B"] = ["call"]
    assert p.choose("t", ["cpu"]) == "B"  # A cannot run it, whatever B has in flight
    with pytest.raises(hray.hetsched.HetschedError, match="no Ray node has a unit"):
        p.choose("t", ["opencl"])


def test_no_daemon_is_a_clear_error() -> None:
    p = placer_with({})
    p.refreshed_at = 0.0
    with pytest.raises(hray.hetsched.HetschedError, match="hetsched.ray.init"):
        p.summaries = {}
        p._refresh = lambda wait=False: None  # type: ignore[method-assign]
        p.choose("t", ["cpu"])


def test_failed_calls_count_as_in_flight() -> None:
    models = {"t": {"gpu-big": 0.001, "gpu-wimpy": 0.003}}
    p = placer_with({"A": dict(FAST, models=models), "B": dict(SLOW, models=models)})
    assert p.choose("t", ["gpu-big", "gpu-wimpy"]) == "A"
    # Calls on A failed at once: A does not look idle for FAILURE_MEMORY.
    p.failures["A"] = [time.monotonic()] * 3
    assert p.choose("t", ["gpu-big", "gpu-wimpy"]) == "B"
    assert hray.choose_node("t", ["gpu-big", "gpu-wimpy"], p.summaries, {"A": 3}) == "B"
    assert hray.choose_node("t", ["gpu-big", "gpu-wimpy"], p.summaries, {"A": 2}) == "A"


def test_a_node_is_offered_only_while_its_agent_daemon_and_executor_answer() -> None:
    down = dict(FAST, models={}, daemon={"up": False})
    p = placer_with({"A": dict(FAST, models={}, daemon={"up": True}), "B": dict(SLOW, models={}), "C": down})
    assert sorted(p.offered()) == ["A", "B"]  # C's daemon is restarting
    p.answered_at["B"] = time.monotonic() - 2 * hray.AGENT_TIMEOUT  # B's agent went silent
    assert sorted(p.offered()) == ["A"]
    p.pinged["A"] = ("ping", time.monotonic() - 2 * hray.EXECUTOR_TIMEOUT)  # A's executor restarting
    assert p.offered() == {}
    del p.pinged["A"]
    p.executor_failed.add("A")
    assert p.offered() == {}


def test_a_call_waits_for_a_node_that_can_run_it_to_come_back(monkeypatch) -> None:
    models = {"t": {"gpu-big": 0.001}}
    p = placer_with({"A": dict(FAST, models=models, daemon={"up": False}), "B": dict(SLOW, models={})})
    p.units_seen["A"] = FAST["units"]
    monkeypatch.setitem(hray._agents, "A", None)
    monkeypatch.setitem(hray._agents, "B", None)
    monkeypatch.setattr(hray, "NODE_WAIT", 0.3)

    def daemon_back(wait=False):
        refreshes.append(wait)
        if len(refreshes) == 2:
            p.summaries["A"] = dict(FAST, models=models, daemon={"up": True})

    refreshes = []
    p._refresh = daemon_back  # type: ignore[method-assign]
    # Only A has gpu-big, and its daemon is restarting: the call waits for it.
    assert p.choose("t", ["gpu-big"]) == "A"
    assert len(refreshes) == 2
    # It does not come back: a clear error after NODE_WAIT.
    p.summaries["A"]["daemon"] = {"up": False}
    refreshes.append("not again")
    with pytest.raises(hray.hetsched.HetschedError, match="no node that can run it has been offered"):
        p.choose("t", ["gpu-big"])
    # A task no node ever had a unit for fails at once.
    with pytest.raises(hray.hetsched.HetschedError, match="no Ray node has a unit"):
        p.choose("t", ["opencl"])


def test_the_placer_refreshes_while_it_places_and_rests_when_idle(monkeypatch) -> None:
    reads = []

    def collect(asked, actors, method, wait):
        if method == "summary":
            reads.append(time.monotonic())
            return {"A": dict(FAST, models={})}
        return {}

    monkeypatch.setattr(hray._Placer, "_collect", staticmethod(collect))
    monkeypatch.setattr(hray._Placer, "_check_nodes", lambda self: None)
    monkeypatch.setitem(hray._agents, "A", None)
    monkeypatch.setattr(hray, "PLACER_IDLE", 0.2)
    p = hray._Placer()
    p.start()
    try:
        assert len(reads) == 1  # read once by start()
        assert p.choose("t", ["gpu-big"]) == "A"
        # Placing: its thread keeps the summaries fresh.
        wait_until("three refreshes by the placer's thread", lambda: len(reads) >= 4, timeout=10)

        # Idle for longer than PLACER_IDLE: the thread's ticks stop reading.
        wait_until("the placer to go idle", lambda: p.idle_ticks >= 1, timeout=10)
        before, ticks = len(reads), p.idle_ticks
        wait_until("three idle ticks", lambda: p.idle_ticks >= ticks + 3, timeout=10)
        assert len(reads) == before
        # Stale summaries are read again before the next choice.
        before = len(reads)
        p.refreshed_at = 0.0
        p.choose("t", ["gpu-big"])
        assert len(reads) == before + 1
    finally:
        p.stop()
    assert p._thread is None and p.summaries == {}
