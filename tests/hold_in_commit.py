"""``python hold_in_commit.py MARKER METHOD ARGS...``: ``compile-tune ARGS``, whose main thread,
the first time the search calls ``RDBStorage.METHOD``, stops at the end of that call's storage
transaction (in SQLAlchemy's ``RootTransaction._deactivate_from_connection``, which the
``finally`` of every commit runs) until MARKER is deleted.

The test waits for MARKER, sends SIGINT, then deletes it: the signal's handler so runs at the
bytecode where a ``KeyboardInterrupt`` becomes SQLAlchemy's ``AssertionError``
(``assert not self.is_active``) and leaves the storage unusable for the rest of the process.
"""
import os
import sys
import threading
import time

from optuna.storages import RDBStorage
from sqlalchemy.engine.base import RootTransaction

marker, method, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
state = {"search": False, "inside": False, "done": False}
deactivate = RootTransaction._deactivate_from_connection
storage_call = getattr(RDBStorage, method)


def held_deactivate(self):
    if state["inside"] and not state["done"] and threading.current_thread() is threading.main_thread():
        state["done"] = True
        open(marker, "w").close()
        deadline = time.time() + 120
        while os.path.exists(marker) and time.time() < deadline:
            time.sleep(0.01)
        time.sleep(0.05)  # the signal's handler runs here, before the transaction is ended
    deactivate(self)


def watched_call(self, *args, **kwargs):
    main = threading.current_thread() is threading.main_thread()
    state["inside"] = state["search"] and main
    try:
        return storage_call(self, *args, **kwargs)
    finally:
        if main:
            state["inside"] = False


RootTransaction._deactivate_from_connection = held_deactivate
setattr(RDBStorage, method, watched_call)

from tuner.decide import search as _tuner  # noqa: E402
from tuner.cli import main  # noqa: E402

search = _tuner.Tuner.search


def armed_search(self, *args, **kwargs):
    state["search"] = True
    return search(self, *args, **kwargs)


_tuner.Tuner.search = armed_search
sys.exit(main(argv))
