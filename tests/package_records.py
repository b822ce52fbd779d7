"""Copies of a built .pt2 whose compile-tune record says something else: what the package and C++
serving tests feed the loaders to see them refuse (tests/test_package.py, tests/test_serve_cpp.py)."""
from __future__ import annotations

import json
import zipfile
from pathlib import Path

from tuner.pt2.record import META_KEY


def altered(path: Path, to: Path, change) -> Path:
    """A copy of the package at ``path`` whose compile-tune record is ``change(record)``."""
    with zipfile.ZipFile(path) as src, zipfile.ZipFile(to, "w") as dst:
        for item in src.infolist():
            data = src.read(item)
            if item.filename.endswith("_metadata.json"):
                meta = json.loads(data)
                meta[META_KEY] = json.dumps(change(json.loads(meta[META_KEY])))
                data = json.dumps(meta).encode()
            dst.writestr(item, data)
    return to


def needing(flag: str):
    """A record change: its code requires ``flag`` besides what it does."""
    return lambda meta: {**meta, "cpu": {**meta["cpu"], "required_flags": [*meta["cpu"]["required_flags"], flag]}}
