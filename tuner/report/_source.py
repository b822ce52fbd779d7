"""Finding the study of a finished run from its output folder (no trial is run or changed)."""
from __future__ import annotations

from pathlib import Path

from ..core.errors import StudyError, TunerError
from ..system.storage import open_storage, redact, scrub


def default_storage(out_dir: str | Path) -> str:
    return f"sqlite:///{(Path(out_dir) / 'study.db').resolve()}"


def has_storage(out_dir: str | Path, storage: str | None = None) -> bool:
    return storage is not None or (Path(out_dir) / "study.db").is_file()


def open_saved_study(out_dir: str | Path, storage: str | None = None, study_name: str | None = None):
    """The Optuna study of the run in ``out_dir``: ``sqlite:///OUT/study.db`` unless ``storage``.

    With one study in the storage it is used; with several, ``study_name`` picks one.
    """
    out_dir = Path(out_dir)
    if storage is None:
        if not out_dir.is_dir():
            raise TunerError(f"{out_dir}: no such folder", "give the output folder of a compile-tune run (--out)")
        if not (out_dir / "study.db").is_file():
            raise TunerError(f"{out_dir}: no study.db in this folder",
                             "give the folder a compile-tune run wrote, or its storage with --storage URL")
        storage = default_storage(out_dir)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    shown = redact(storage)
    try:
        backend = open_storage(storage)
        names = [s.study_name for s in backend.get_all_studies()]
    except TunerError:
        raise
    except Exception as exc:  # a bad URL or an unreadable file: optuna raises many types
        message = scrub(str(exc).splitlines()[0] if str(exc) else repr(exc), storage)
        raise TunerError(f"cannot read the study storage {shown}: {message}",
                         "check the --storage URL or the study.db file") from exc
    if study_name is None:
        if len(names) != 1:
            listed = ", ".join(sorted(names)) or "none"
            raise StudyError(f"{shown} holds {len(names)} studies ({listed})", "pick one with --study NAME")
        study_name = names[0]
    elif study_name not in names:
        raise StudyError(f"no study named {study_name!r} in {shown} (it has: {', '.join(sorted(names)) or 'none'})",
                         "use one of the listed names with --study")
    # Reading needs no sampler: load_study's default one is never asked for a trial here.
    return optuna.load_study(study_name=study_name, storage=backend)
