"""Where a study lives: storage URLs, passwords kept out of every output, and heartbeats.

Every worker is the same process pointed at one study in a shared storage; the storage is the
whole distributed engine, there is no scheduler. ``--storage`` takes:

    sqlite:///OUT/study.db              one machine (the default)
    postgresql://USER@HOST[:PORT]/DB    many machines; the password from ~/.pgpass or PGPASSWORD,
                                        or in the URL (it is never printed: see ``redact``)
    journal:///shared/dir/study.log     many machines sharing a filesystem, no database server

A running trial's worker records a heartbeat every ``--heartbeat`` seconds (Optuna's own
heartbeat table on sqlite/postgresql, a system attribute on the journal). A trial that misses
``GRACE_BEATS`` heartbeats is declared dead by whichever worker looks next; ``study`` fails it and
queues its config again.
"""
from __future__ import annotations

import datetime
import functools
import os
import platform
import re
import threading
import time
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from ..core.errors import StudyError

#: Seconds between two heartbeats of a running trial (``--heartbeat``).
HEARTBEAT_S = 10
#: Heartbeats a trial may miss before another worker declares it dead.
GRACE_BEATS = 6
JOURNAL_PREFIX = "journal://"
#: Trial system attributes: who runs the trial, and its last heartbeat on storages without
#: Optuna's heartbeat table (the journal).
OWNER_ATTR = "compile_tune:owner"
BEAT_ATTR = "compile_tune:heartbeat"

URL_FORMS = "sqlite:///PATH, postgresql://USER[:PASSWORD]@HOST[:PORT]/DB or journal:///PATH"
_USERINFO = re.compile(r"(?P<head>[A-Za-z][\w+.-]*://[^:@/\s]*):(?P<password>\S*)@")
_QUERY_SECRET = re.compile(r"(?P<key>[?&;](?:password|passwd|pwd|secret|token)=)(?P<value>[^&;\s]*)", re.I)


# --------------------------------------------------------------------------- passwords


def redact(url: str) -> str:
    """``url`` with its password replaced by ``***``: the only form in which a URL is shown.

    >>> redact("postgresql://tuner:s3cret@db.example.com:5432/tune")
    'postgresql://tuner:***@db.example.com:5432/tune'
    """
    text = _USERINFO.sub(lambda m: f"{m['head']}:***@", url)
    return _QUERY_SECRET.sub(lambda m: f"{m['key']}***", text)


def scrub(text: str, url: str | None) -> str:
    """``text`` (an error message, a traceback, a command line) with no trace of ``url``'s password.

    Drivers put pieces of the URL into their messages, so besides the URL itself every
    occurrence of the password, quoted or not, is replaced.
    """
    text = redact(text)
    for secret in _secrets(url or ""):
        if len(secret) >= 3:  # shorter strings occur by chance and reveal nothing
            text = text.replace(secret, "***")
    return text


def _secrets(url: str) -> set[str]:
    found = [m["password"] for m in _USERINFO.finditer(url)]
    found += [m["value"] for m in _QUERY_SECRET.finditer(url)]
    return {s for raw in found for s in (raw, unquote(raw)) if s}


# --------------------------------------------------------------------------- opening


def journal_path(url: str) -> Path:
    """``journal:///shared/study.log`` -> ``/shared/study.log`` (``journal://x.log`` is relative)."""
    path = url[len(JOURNAL_PREFIX):]
    if not path:
        raise StudyError(f"the journal URL {url!r} names no file", "use journal:///absolute/path/study.log")
    return Path(os.path.expanduser(path))


def open_storage(url: str, heartbeat_s: int = HEARTBEAT_S):
    """The Optuna storage behind ``url``, with heartbeats on; errors are one redacted line.

    >>> storage = open_storage("journal:///tmp/compile-tune-doctest.log")  # doctest: +SKIP
    """
    if url.startswith(JOURNAL_PREFIX):
        return _open_journal(url)
    import optuna
    import sqlalchemy.exc

    db_url = _sqlalchemy_url(url)
    if db_url.startswith("sqlite"):
        # Several workers may share one SQLite file: wait for its lock instead of failing.
        engine_kwargs: dict[str, Any] = {"connect_args": {"timeout": 60}}
    else:
        engine_kwargs = {"pool_pre_ping": True}  # a worker outlives idle connections
    for attempt in range(3):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    db_url, engine_kwargs=engine_kwargs, heartbeat_interval=heartbeat_s,
                    grace_period=GRACE_BEATS * heartbeat_s)
        except (sqlalchemy.exc.IntegrityError, sqlalchemy.exc.ProgrammingError) as exc:
            # Two workers creating the tables of an empty database at once: the loser retries.
            if attempt == 2:
                raise storage_error(url, exc) from None
            time.sleep(1 + attempt)
        except Exception as exc:  # drivers and SQLAlchemy raise many types; all mean "cannot open"
            raise storage_error(url, exc) from None
    raise AssertionError("unreachable")


def _open_journal(url: str):
    from optuna.storages.journal import JournalFileBackend, JournalStorage

    path = journal_path(url)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return JournalStorage(JournalFileBackend(str(path)))
    except OSError as exc:
        raise StudyError(f"cannot open the journal file {path}: {exc.strerror or exc}",
                         "give a path on a filesystem every worker can write, e.g. journal:///shared/study.log",
                         ) from exc


def _sqlalchemy_url(url: str) -> str:
    """``postgres://`` (the form many hosting services hand out) -> ``postgresql://``.

    SQLAlchemy reads a bare ``postgresql://`` as psycopg 3, the driver we ship, so the URL
    otherwise passes unchanged: the same URL works in the Optuna CLI and optuna-dashboard.
    """
    if url.startswith("postgres://"):
        return "postgresql://" + url[len("postgres://"):]
    return url


def storage_error(url: str, exc: BaseException) -> StudyError:
    """One line saying why ``url`` cannot be used, with the password scrubbed out."""
    text = str(exc).strip() or type(exc).__name__
    if isinstance(exc, ImportError) or "Failed to import DB access module" in text:
        hint = ('install the database driver: pip install "psycopg[binary]" for postgresql://, '
                "or the one SQLAlchemy names for your URL's dialect")
    elif "Can't load plugin" in text or "Could not parse" in text:
        hint = f"a storage URL looks like {URL_FORMS}"
    else:
        hint = ("check that the database server is running and reachable from here, and the URL "
                f"({URL_FORMS}); keep a password in ~/.pgpass or PGPASSWORD rather than in the URL")
    first = text.splitlines()[0]
    first = re.sub(r"^\([\w.]+\)\s*", "", first)  # SQLAlchemy's "(psycopg.OperationalError) " prefix
    return StudyError(f"cannot open the study storage {redact(url)}: {scrub(first, url)}", hint)


# --------------------------------------------------------------------------- who runs a trial


@functools.lru_cache(maxsize=1)
def owner() -> dict:
    """This process, as recorded on the trials it runs (``OWNER_ATTR``)."""
    return {"host": platform.node(), "boot": _boot_id(), "pid": os.getpid(), "start": _start_ticks(os.getpid())}


def worker_label(who: dict | None = None) -> str:
    who = who or owner()
    return f"{who.get('host')}:{who.get('pid')}"


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _start_ticks(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot): tells a reused pid from the original."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def _gone(who: dict) -> bool:
    """True when ``who`` ran on this machine (this boot) and its process no longer exists."""
    me = owner()
    if who.get("host") != me["host"] or who.get("boot") != me["boot"]:
        return False  # another machine: only its heartbeat can tell
    pid = int(who.get("pid", 0))
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # exists, owned by someone else
    start = _start_ticks(pid)
    return who.get("start") is not None and start is not None and start != who["start"]


# --------------------------------------------------------------------------- heartbeats


class Heartbeat:
    """While a trial runs, record from a thread that its worker is alive.

    The worker's main thread mostly waits on the trial's child process, so the beat is not
    delayed by the measurement. A failed beat (a database hiccup) is retried at the next one.

    ``storage`` is the object ``open_storage`` returned; ``tuner.study.TrialStore.heartbeat``
    finds the trial's id in it from the trial's number.

    >>> with store.heartbeat(trial.number, interval=10):  # doctest: +SKIP
    ...     result = run_the_trial()
    """

    def __init__(self, storage, trial_id: int, interval: float = HEARTBEAT_S) -> None:
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"heartbeat-{trial_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self.beat()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def beat(self) -> None:
        if has_optuna_heartbeat(self.storage):
            self.storage.record_heartbeat(self.trial_id)
        else:
            self.storage.set_trial_system_attr(self.trial_id, BEAT_ATTR, time.time())

    def _run(self) -> None:
        from optuna.exceptions import UpdateFinishedTrialError

        while not self._stop.wait(self.interval):
            try:
                self.beat()
            except UpdateFinishedTrialError:
                return  # another worker declared the trial dead; the main thread finds out
            except Exception:
                pass


def has_optuna_heartbeat(storage) -> bool:
    """True for a database storage that ``open_storage`` opened with Optuna's heartbeat table."""
    from optuna.storages import RDBStorage

    return isinstance(storage, RDBStorage) and storage.get_heartbeat_interval() is not None


def stale_trial_numbers(storage, study_name: str) -> set[int]:
    """Numbers of the study's running trials whose Optuna heartbeat is older than the grace period.

    The one use of Optuna's private API in compile-tune (tests/test_optuna_api.py allows it here
    and nowhere else). Optuna reads its heartbeat table only inside
    ``optuna.storages.fail_stale_trials``, which fails those trials at once, and a failed trial
    can no longer be written to. A dead trial must first be marked with why it died
    (``interrupted``, ``failure_explanation``: the reports show them, ``requeue`` counts them),
    so the stale ids are read here. The table holds the database server's clock, which is why it
    is used at all: the journal's per-worker timestamps depend on every machine's clock.
    """
    if not has_optuna_heartbeat(storage):
        return set()
    study_id = storage.get_study_id_from_name(study_name)
    return {storage.get_trial_number_from_id(i) for i in storage._get_stale_trial_ids(study_id)}


def dead_trials(study, storage, heartbeat_s: int = HEARTBEAT_S, local_processes: bool = False) -> list[tuple]:
    """Running trials whose worker is dead, with the reason: ``[(FrozenTrial, str), ...]``.

    ``storage`` is the object ``study`` was opened on (``open_storage``). A trial is dead when it
    missed ``GRACE_BEATS`` heartbeats, or was never claimed by a worker and started that long ago.
    With ``local_processes``, also when it was run by a process of this machine that no longer
    exists (found at once, which is what a resumed run wants).
    """
    from optuna.trial import TrialState

    grace = GRACE_BEATS * heartbeat_s
    stale = stale_trial_numbers(storage, study.study_name)
    me, now = owner(), time.time()
    dead = []
    for t in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        who = t.system_attrs.get(OWNER_ATTR)
        if who and who.get("pid") == me["pid"] and who.get("host") == me["host"]:
            continue  # ours, and we are alive
        beat = t.system_attrs.get(BEAT_ATTR)
        started = t.datetime_start or datetime.datetime.now()
        if t.number in stale or (beat is not None and now - beat > grace):
            dead.append((t, f"no heartbeat from {worker_label(who or {})} for over {grace} s"))
        elif who and local_processes and _gone(who):
            dead.append((t, f"its process {worker_label(who)} is gone"))
        elif not who and (datetime.datetime.now() - started).total_seconds() > grace:
            dead.append((t, f"no worker claimed it for over {grace} s"))
    return dead
