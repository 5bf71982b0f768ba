"""Fixtures: a real hetsched daemon on a private socket, and waiting on
conditions with a deadline (never a bare sleep)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Callable, Iterator, Optional, TypeVar

import pytest

import hetsched

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


def hetsched_binary() -> str:
    """The `hetsched` binary the tests start: $HETSCHED_BIN, else the
    workspace's build (debug, then release), else one on PATH."""
    env = os.environ.get("HETSCHED_BIN")
    if env:
        return env
    for profile in ("debug", "release"):
        candidate = REPO / "target" / profile / "hetsched"
        if candidate.exists():
            return str(candidate)
    found = shutil.which("hetsched")
    if found:
        return found
    pytest.fail("no hetsched binary: build it (cargo build -p hetsched) or set HETSCHED_BIN")


def wait_until(
    what: str, probe: Callable[[], Optional[T]], timeout: float = 20.0
) -> T:
    """Calls `probe` until it returns something other than None/False, or
    fails the test after `timeout` seconds saying what was awaited."""
    deadline = time.monotonic() + timeout
    last_error: Optional[BaseException] = None
    while True:
        try:
            got = probe()
            if got is not None and got is not False:
                return got
        except Exception as e:  # the condition may raise until it holds
            last_error = e
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout} s waiting for {what} (last error: {last_error})")
        time.sleep(0.01)


CONFIG = """\
state_file = "{work}/state.json"
device_units = true

[[emulated]]
name = "emu-gpu0"
kind = "emu-gpu"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
streams = 1
"""


class Daemon:
    def __init__(self, work: Path) -> None:
        self.work = work
        self.socket = str(work / "hetsched.sock")
        self.log = work / "daemon.log"
        (work / "hetsched.toml").write_text(CONFIG.format(work=work))
        self.proc = subprocess.Popen(
            [hetsched_binary(), "daemon", "--config", str(work / "hetsched.toml"), "--socket", self.socket],
            stdout=self.log.open("w"),
            stderr=subprocess.STDOUT,
        )

        def answers() -> bool:
            if self.proc.poll() is not None:
                pytest.fail(f"the daemon exited ({self.proc.returncode}): {self.log.read_text()}")
            with hetsched.Client("pytest-probe", socket=self.socket, observer=True):
                return True

        wait_until("the daemon to answer", answers)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def client(self, name: str = "pytest") -> hetsched.Client:
        return hetsched.Client(name, socket=self.socket)


@pytest.fixture(scope="session")
def daemon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Daemon]:
    d = Daemon(tmp_path_factory.mktemp("hetsched-daemon"))
    yield d
    d.stop()


@pytest.fixture
def no_socket(tmp_path: Path) -> str:
    """A socket path nothing listens on."""
    return str(tmp_path / "nobody.sock")
