"""The inductor caches of measured configs, kept through the run for confirmation.

A search trial compiles cold, in a cache directory of its own: its compile time is what a first
run costs. Confirmation then re-times the finalists' steps in fresh processes; compiling them
cold again each round would re-measure a figure that is stable to a few percent (compile times
are, on this kind of machine; step times vary 10-20 % between processes) at the price of the
whole compile. So the cache of each measured config is kept, and confirmation trials compile
from it: the same kernels, in seconds. Their cold compile time is the search's measurement, and
the compile they do measure is the warm one (a restart that keeps the cache) at no extra cost.
Only the caches of the best few configs are kept; all are removed when the run ends.

The correctness checks share one more (:attr:`KeptCaches.checks`): a training step that draws
random numbers is checked with its forwards compiled again under ``fallback_random``, a second
cold compile of them, after everything the trial times. The forwards of ``+optimizer`` are plain
compile's, so its check found them compiled already; on the zoo's GPT-2 training that check was
48-58 s of a 144-216 s trial (docs/zoo.md, measurement 17).
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

#: Caches kept at once: the best configs so far (plain torch.compile's is always kept). Enough
#: for the finalists (--confirm, 2 by default) with room for the ranking to change.
KEEP = 6


class KeptCaches:
    def __init__(self, work_dir: Path) -> None:
        self.root = Path(work_dir) / "caches"

    @property
    def checks(self) -> Path:
        """The inductor cache the run's correctness checks share (``TrialSpec.check_cache_dir``)."""
        return self.root.parent / "check-cache"

    def path(self, key: str) -> Path:
        return self.root / hashlib.sha256(key.encode()).hexdigest()[:16]

    def get(self, key: str) -> Path | None:
        path = self.path(key)
        return path if path.is_dir() else None

    def keep(self, key: str, cache: Path) -> None:
        """Move a trial's own cache directory here, as the cache of ``key``."""
        dest = self.path(key)
        shutil.rmtree(dest, ignore_errors=True)
        self.root.mkdir(parents=True, exist_ok=True)
        shutil.move(str(cache), str(dest))

    def prune(self, keys: list[str]) -> None:
        """Keep only the caches of ``keys``."""
        wanted = {self.path(k).name for k in keys}
        for path in self.root.glob("*") if self.root.is_dir() else []:
            if path.name not in wanted:
                shutil.rmtree(path, ignore_errors=True)

    def clear(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        shutil.rmtree(self.checks, ignore_errors=True)


def link_tree(source: Path, dest: Path) -> None:
    """Every file of ``source`` into ``dest`` as well (hard links, copies across file systems), but
    none that ``dest`` holds already: inductor writes each cache entry once, by its key."""
    for root, _, files in os.walk(source):
        into = dest / Path(root).relative_to(source)
        into.mkdir(parents=True, exist_ok=True)
        for name in files:
            target = into / name
            if target.exists():
                continue
            try:
                os.link(Path(root) / name, target)
            except FileExistsError:  # another lane's check linked it first
                pass
            except OSError:
                shutil.copy2(Path(root) / name, target)
