"""Python overhead benchmark: ``python -m hetsched.bench [--json]``.

Measures, in one process and one run, what Python adds to

* an empty task through :class:`hetsched.Runtime` (a Python ``cpu=``
  implementation that does nothing) against the same empty task submitted
  from Rust on the same runtime (``_native.rust_empty_task_ns``), and
* one pass through a unit's dispatch gate with
  :meth:`hetsched.Client.dispatch` against ``request_dispatch`` +
  ``task_completed`` called from Rust on the same connection
  (``_native.rust_gate_ns``).

Rounds alternate Rust and Python; the figures are medians over rounds.
Without ``--socket`` it starts a private daemon (the ``hetsched`` binary
on PATH, or ``$HETSCHED_BIN``) whose OpenCL device (PoCL here) is the
gated unit.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional

import hetsched
from hetsched import _native


def _python_empty_ns(rt: hetsched.Runtime, task: hetsched.Task, calls: int) -> float:
    run = rt.run
    start = time.perf_counter_ns()
    for _ in range(calls):
        run(task)
    return (time.perf_counter_ns() - start) / calls


def _python_gate_ns(client: hetsched.Client, unit: str, calls: int) -> float:
    start = time.perf_counter_ns()
    for _ in range(calls):
        with client.dispatch(unit):
            pass
    return (time.perf_counter_ns() - start) / calls


def _pairs(rounds: int, rust, python) -> Dict[str, float]:
    r: List[float] = []
    p: List[float] = []
    for _ in range(rounds):
        r.append(rust())
        p.append(python())
    rm, pm = statistics.median(r), statistics.median(p)
    return {"rust_us": rm / 1e3, "python_us": pm / 1e3, "extra_us": (pm - rm) / 1e3}


class _PrivateDaemon:
    def __init__(self, binary: str) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="hetsched-bench-")
        work = Path(self.dir.name)
        self.socket = str(work / "hetsched.sock")
        (work / "hetsched.toml").write_text(f'state_file = "{work}/state.json"\ndevice_units = true\n')
        self.proc = subprocess.Popen(
            [binary, "daemon", "--config", str(work / "hetsched.toml"), "--socket", self.socket],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while True:
            try:
                hetsched.Client("bench-probe", socket=self.socket, observer=True).close()
                return
            except hetsched.DaemonUnavailable:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait()
        self.dir.cleanup()


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hetsched.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", help="a running daemon's socket (default: start a private daemon)")
    ap.add_argument("--unit", help="the gated unit (default: the first OpenCL or CUDA unit)")
    ap.add_argument("--calls", type=int, default=2000, help="calls per round (default 2000)")
    ap.add_argument("--rounds", type=int, default=7, help="rounds of each (default 7)")
    ap.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = ap.parse_args(argv)
    if args.calls < 1 or args.rounds < 1:
        ap.error("--calls and --rounds must be at least 1")

    daemon = None
    if args.socket is None:
        from .ray import _binary

        daemon = _PrivateDaemon(_binary(None))
        args.socket = daemon.socket
    try:
        rt = hetsched.Runtime("bench-python", monitor="daemon", socket=args.socket, persist_models=False)
        empty = hetsched.Task("hetsched-bench-empty-python", cpu=lambda: None)
        rt.run(empty)
        _native.rust_empty_task_ns(rt, 100)
        task = _pairs(
            args.rounds,
            lambda: _native.rust_empty_task_ns(rt, args.calls),
            lambda: _python_empty_ns(rt, empty, args.calls),
        )
        rt.close()
        client = hetsched.Client("bench-python-gate", socket=args.socket)
        unit = args.unit or next(
            (u.name for u in client.units() if u.kind.startswith(("opencl:", "cuda:"))), None
        )
        gate = None
        if unit is not None:
            gate = _pairs(
                args.rounds,
                lambda: _native.rust_gate_ns(client, unit, args.calls),
                lambda: _python_gate_ns(client, unit, args.calls),
            )
        client.close()
    finally:
        if daemon is not None:
            daemon.stop()

    out = {"calls": args.calls, "rounds": args.rounds, "empty_task": task, "gate_unit": unit, "gate": gate}
    if args.json:
        print(json.dumps(out))
        return 0
    print(f"median of {args.rounds} rounds of {args.calls} calls, Rust and Python alternating")
    print(
        f"empty task  rust {task['rust_us']:7.2f} µs  python {task['python_us']:7.2f} µs  "
        f"python - rust {task['extra_us']:+6.2f} µs"
    )
    if gate is None:
        print("dispatch    (no OpenCL or CUDA unit to gate; give --unit)")
    else:
        print(
            f"dispatch    rust {gate['rust_us']:7.2f} µs  python {gate['python_us']:7.2f} µs  "
            f"python - rust {gate['extra_us']:+6.2f} µs  (unit {unit})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
