"""Parity of the placement formula from Python: the extension module's
``turnaround`` (the core's ``hetsched_core::turnaround::turnaround``) gives
the shared table's figures (crates/core/tests/turnaround_cases.txt, which
the core's, the C API's and the C tests check too), and ``hetsched.ray``'s
node rates are that formula's rates."""

from __future__ import annotations

import math
from typing import Any, Dict, List, NamedTuple, Optional

import pytest

from conftest import REPO
from hetsched import _native

CASES_FILE = REPO / "crates" / "core" / "tests" / "turnaround_cases.txt"


class Case(NamedTuple):
    name: str
    load: str
    slots: int
    exec_ns: float
    dispatch_ns: float
    copy_ns: float
    ahead_ns: float
    a: float
    b: float
    c: float
    turnaround_ns: Optional[float]
    rate_per_s: Optional[float]


def cases() -> List[Case]:
    out = []
    for line in CASES_FILE.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        f = line.split()
        assert len(f) == 12, line
        want = [None if x == "-" else float(x) for x in f[10:]]
        out.append(Case(f[0], f[1], int(f[2]), *map(float, f[3:10]), *want))
    assert len(out) >= 10
    return out


def load_args(case: Case) -> Dict[str, Any]:
    if case.load == "cpu":
        return {"runnable_threads": case.a}
    if case.load == "backlog":
        return {"backlog": case.a}
    return {"view": {"guaranteed": case.a, "wait_ns": case.b, "max_utilisation": case.c}}


@pytest.mark.parametrize("case", cases(), ids=lambda c: c.name)
def test_the_module_gives_the_tables_figures(case: Case) -> None:
    t = _native.turnaround(
        case.exec_ns,
        case.slots,
        dispatch_ns=case.dispatch_ns,
        copy_ns=case.copy_ns,
        ahead_ns=case.ahead_ns,
        **load_args(case),
    )
    if case.turnaround_ns is None:
        assert t is None
        return
    assert t is not None
    assert t["turnaround_ns"] == pytest.approx(case.turnaround_ns, rel=1e-9)
    assert t["rate_per_s"] == pytest.approx(case.rate_per_s, rel=1e-9)
    assert t["stretch"] >= 1.0


def test_the_load_must_be_given_once() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        _native.turnaround(1e6, 1)
    with pytest.raises(ValueError, match="exactly one"):
        _native.turnaround(1e6, 1, runnable_threads=2.0, backlog=1.0)


# hetsched.ray rates CPU kinds by runnable threads and devices by backlog;
# it counts at least 1 µs of execution.
RAY_CASES = [c for c in cases() if c.load in ("cpu", "backlog") and (
    math.isnan(c.exec_ns) or c.exec_ns >= 1e3)]


def ray_unit(case: Case) -> Dict[str, Any]:
    cpu = case.load == "cpu"
    return {
        "name": "cpu" if cpu else "gpu0",
        "kind": "cpu" if cpu else "gpu",
        "class": "cpu" if cpu else "gpu",
        "slots": case.slots,
        "speed": 1.0,
        "busy": 0.0,
        "backlog": 0 if cpu else case.a,
        "runnable": case.a if cpu else 0,
    }


@pytest.mark.parametrize("case", RAY_CASES, ids=lambda c: c.name)
def test_ray_rates_a_node_by_the_cores_formula(case: Case) -> None:
    hray = pytest.importorskip("hetsched.ray")
    u = ray_unit(case)
    summary = {"units": [u], "models": {}}
    kind = u["kind"]
    times = {} if math.isnan(case.exec_ns) else {kind: case.exec_ns / 1e9}
    rate = hray.node_rate([kind], times, summary)
    if case.rate_per_s is None:
        # Untried: the node should be tried, not rated.
        assert rate is None
        return
    assert rate == pytest.approx(case.rate_per_s, rel=1e-9)
    core = _native.turnaround(case.exec_ns, case.slots, **load_args(case))
    assert core is not None
    assert hray.unit_rate(u, case.exec_ns / 1e9) == pytest.approx(core["rate_per_s"], rel=1e-12)


def test_ray_sums_its_units_rates_and_scales_untried_devices() -> None:
    hray = pytest.importorskip("hetsched.ray")
    by_name = {c.name: c for c in RAY_CASES}
    cpu, dev = by_name["cpu_busy"], by_name["dev_backlog"]
    summary = {"units": [ray_unit(cpu), ray_unit(dev)], "models": {}}
    times = {"cpu": cpu.exec_ns / 1e9, "gpu": dev.exec_ns / 1e9}
    rate = hray.node_rate(["cpu", "gpu"], times, summary)
    assert rate == pytest.approx(cpu.rate_per_s + dev.rate_per_s, rel=1e-9)
    # A device kind not run yet, twice as fast as a measured one: half its time.
    fast = dict(ray_unit(dev), kind="gpu-fast", name="fast0", speed=2.0)
    rate = hray.node_rate(["gpu-fast"], {"gpu": dev.exec_ns / 1e9}, {"units": [fast]}, {"gpu": 1.0})
    want = _native.turnaround(dev.exec_ns / 2, dev.slots, backlog=dev.a)
    assert want is not None
    assert rate == pytest.approx(want["rate_per_s"], rel=1e-9)
