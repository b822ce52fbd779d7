"""One exception tree for everything a user can get wrong.

The CLI catches :class:`TunerError` in one place and prints ``error: <message>`` and
``hint: <hint>``, exit code 2. Library users get the same objects with the same text.
"""
from __future__ import annotations


class TunerError(Exception):
    """A problem the user can fix; ``hint`` says how."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class WorkloadError(TunerError):
    """The user's model file cannot be loaded or does not follow the workload contract."""


class SpaceError(TunerError):
    """A search-space YAML file is malformed."""


class ConfigError(TunerError):
    """A compile config (or a best_config.yaml file) is malformed."""


class StudyError(TunerError):
    """The study storage cannot be used as asked (e.g. resumed with different settings)."""
