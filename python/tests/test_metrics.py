"""The daemon's /metrics, read with the Prometheus client library's own
OpenMetrics parser (a parse error fails the test)."""

from __future__ import annotations

import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from conftest import hetsched_binary, wait_until

parser = pytest.importorskip("prometheus_client.openmetrics.parser")

CONFIG = """\
state_file = "{work}/state.json"
include_cpus = false
device_units = false
[[emulated]]
name = "gpu0"
class = "gpu"
speed = 8.0
copy_gbps = 12.0
"""


@pytest.fixture
def metrics_daemon(tmp_path: Path):
    (tmp_path / "hetsched.toml").write_text(CONFIG.format(work=tmp_path))
    log = tmp_path / "daemon.log"
    socket = str(tmp_path / "hetsched.sock")
    proc = subprocess.Popen(
        [hetsched_binary(), "daemon", "--config", str(tmp_path / "hetsched.toml"), "--socket", socket,
         "--metrics", "127.0.0.1:0"],
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        url = wait_until(
            "the daemon's metrics line",
            lambda: (m := re.search(r"metrics on (http://\S+)", log.read_text())) and m.group(1),
        )
        yield url, socket
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def scrape(url: str):
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.headers["Content-Type"].startswith("application/openmetrics-text")
        text = r.read().decode()
    return {f.name: f for f in parser.text_string_to_metric_families(text)}


def test_the_exposition_is_valid_openmetrics_with_units_and_clients(metrics_daemon) -> None:
    import hetsched

    url, socket = metrics_daemon
    with hetsched.Client('py "quoted" \\ name', socket=socket) as c:
        c.set_shares("custom", 40)
        for _ in range(5):
            with c.dispatch("gpu0"):
                pass
        # The last completion is sent without a reply: scrape until the
        # daemon has counted it.
        def counted():
            families = scrape(url)
            tasks = {s.labels["client"]: s.value for s in families["hetsched_client_tasks"].samples}
            return families if tasks.get('py "quoted" \\ name') == 5 else None

        families = wait_until("the five tasks to be counted", counted, timeout=5.0)
    util = families["hetsched_unit_utilization"]
    assert util.type == "gauge"
    assert [s.labels["unit"] for s in util.samples] == ["gpu0"]
    seconds = families["hetsched_client_device_seconds"]
    assert seconds.type == "counter"
    mine = [s for s in seconds.samples if s.labels.get("client") == 'py "quoted" \\ name']
    assert mine and mine[0].name == "hetsched_client_device_seconds_total"
    tasks = {s.labels["client"]: s.value for s in families["hetsched_client_tasks"].samples}
    assert tasks['py "quoted" \\ name'] == 5
    shares = families["hetsched_client_shares"].samples
    assert any(s.labels == {"client": 'py "quoted" \\ name', "class": "custom", "unit": "gpu0"}
               and s.value == 40 for s in shares)
    wait = families["hetsched_client_wait_seconds"]
    assert wait.type == "histogram"
    assert families["hetsched_build"].type == "info"
