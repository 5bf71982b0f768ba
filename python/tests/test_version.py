"""One version: the workspace's, in the module, the installed package's
metadata and the `hetsched` binary the package runs."""

from __future__ import annotations

import importlib.metadata
import subprocess

import hetsched
from conftest import REPO, hetsched_binary


def workspace_version() -> str:
    text = (REPO / "Cargo.toml").read_text()
    section = text.split("[workspace.package]", 1)[1]
    for line in section.splitlines():
        if line.startswith('version = "'):
            return line.split('"')[1]
    raise AssertionError("no version in [workspace.package]")


def test_module_and_metadata_carry_the_workspace_version() -> None:
    assert hetsched.__version__ == workspace_version()
    assert importlib.metadata.version("hetsched") == hetsched.__version__


def test_binary_names_the_same_version() -> None:
    out = subprocess.run(
        [hetsched_binary(), "--version"], capture_output=True, text=True, check=True
    ).stdout
    assert out.split()[:2] == ["hetsched", hetsched.__version__], out
