"""compile-tune's small caches in the user's cache folder (``$XDG_CACHE_HOME/compile-tune``):
facts read once from torch or the compiler and kept under a key of what they depend on, so a later
process reads them instead of importing Dynamo or running a compiler again."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any


def cache_file(stem: str, key: list[Any]) -> Path:
    """``$XDG_CACHE_HOME/compile-tune/STEM-DIGEST.json`` (``~/.cache`` without the variable), the
    digest of ``key``: a change of anything in it names another file."""
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "compile-tune" / f"{stem}-{digest}.json"


def write_whole(path: Path, data: dict) -> None:
    """Written whole or not at all (another run may read it at the same moment); a cache that
    cannot be written is no cache, so errors are ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            json.dump(data, f)
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        pass
