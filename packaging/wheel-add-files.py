#!/usr/bin/env python3
"""Adds built files to a wheel under its .data directory, with their lines
in RECORD, so that pip installs them outside the package: a `scripts/`
file to the environment's bin/ (executable), a `data/` one under its prefix.

    wheel-add-files.py WHEEL scripts/hetsched=PATH data/lib/hetsched/x.so=PATH ...

The wheel is rewritten in place.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
import tempfile
import zipfile


def record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def main(argv: list[str]) -> None:
    if len(argv) < 3:
        sys.exit(__doc__)
    wheel, pairs = argv[1], [a.split("=", 1) for a in argv[2:]]
    # The wheel's name is {dist}-{version}-{tags}.whl; its .data and
    # .dist-info directories are {dist}-{version}.data and .dist-info.
    dist_version = "-".join(os.path.basename(wheel).split("-")[:2])
    record = f"{dist_version}.dist-info/RECORD"
    fd, tmp = tempfile.mkstemp(suffix=".whl", dir=os.path.dirname(os.path.abspath(wheel)))
    os.close(fd)
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as out:
        lines = src.read(record).decode().splitlines()
        for item in src.infolist():
            if item.filename != record:
                out.writestr(item, src.read(item))
        for dest, path in pairs:
            name = f"{dist_version}.data/{dest}"
            with open(path, "rb") as f:
                data = f.read()
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100755 if os.access(path, os.X_OK) else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            out.writestr(info, data)
            lines.insert(-1 if lines and lines[-1].startswith(record) else len(lines), record_line(name, data))
        out.writestr(src.getinfo(record), "\n".join(lines) + "\n")
    os.replace(tmp, wheel)


if __name__ == "__main__":
    main(sys.argv)
