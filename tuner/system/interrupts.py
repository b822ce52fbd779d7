"""Ctrl-C stops a tuning run only where stopping is safe.

Python raises ``KeyboardInterrupt`` at whatever bytecode runs when SIGINT arrives. Most of a
tuning run's own time is spent in the storage (SQLAlchemy, Optuna): an interrupt that lands
inside a commit leaves the storage's session half-finished, and every later write of the
process fails with it (``AssertionError`` in ``Transaction.commit``), so the interrupted trial
is never marked and no output is written. One that lands inside a ``__del__`` or a weakref
callback, of which SQLAlchemy has many, is printed as "Exception ignored" and lost.

So while :func:`deferred` is active, SIGINT only records that a stop was asked for; the
``KeyboardInterrupt`` is raised inside :func:`interruptible` blocks (waiting for a trial's child
process, a worker's sleep), or when one is entered or left. A second Ctrl-C raises at once,
wherever the run is, for a user who does not want to wait. SIGTERM (a scheduler's stop, ``kill``,
a job's time limit) is taken the same way where nothing else handles it: the run stops at the next
safe point and writes its answer so far, instead of dying with nothing written.

>>> with deferred():  # doctest: +SKIP
...     write_to_storage()            # a Ctrl-C here is held...
...     with interruptible():
...         child.wait()              # ...and raised here
"""
from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class _State:
    def __init__(self) -> None:
        self.active = False
        self.pending = False
        self.signals = 0
        self.open = 0  # interruptible blocks we are inside


_state = _State()


def _on_sigint(signum, frame) -> None:
    _state.signals += 1
    _state.pending = True
    if _state.open or _state.signals > 1:
        _state.pending = _state.open > 0  # if raised in a __del__ and lost, the block's exit raises it again
        raise KeyboardInterrupt


def _raise_pending() -> None:
    if _state.active and _state.pending:
        _state.pending = False
        raise KeyboardInterrupt


@contextmanager
def deferred() -> Iterator[None]:
    """Hold Ctrl-C until the next :func:`interruptible` block (or this block's end, where it
    is raised). A no-op outside the main thread, or when already active."""
    if _state.active or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.getsignal(signal.SIGINT)
    if previous is not signal.default_int_handler:
        yield  # SIGINT ignored, or handled by the embedding program: leave it alone
        return
    _state.active, _state.pending, _state.signals, _state.open = True, False, 0, 0
    signal.signal(signal.SIGINT, _on_sigint)
    term = signal.getsignal(signal.SIGTERM)
    if term is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigint)
    try:
        yield
        _raise_pending()
    finally:
        signal.signal(signal.SIGINT, previous)
        if term is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, term)
        _state.active, _state.open = False, 0


@contextmanager
def interruptible() -> Iterator[None]:
    """A block that Ctrl-C may interrupt: nothing in it leaves the storage half-written."""
    if not _state.active:
        yield
        return
    _raise_pending()
    _state.open += 1
    try:
        yield
    except KeyboardInterrupt:
        _state.pending = False  # delivered
        raise
    finally:
        _state.open -= 1
    _raise_pending()


def check() -> None:
    """Raise the held Ctrl-C now, if there is one (a safe point between two steps)."""
    _raise_pending()


def requested() -> bool:
    """Whether a Ctrl-C is held and not yet raised."""
    return _state.active and _state.pending
