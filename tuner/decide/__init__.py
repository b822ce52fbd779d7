"""Deciding: the search, each trial it starts, the dead ends it leaves out, the confirmation of
the finalists, the statistics both rest on, and the verdict.

``search`` runs the baselines and the search; ``trial_runner`` starts each trial through
``isolated`` from the study's settings; ``dead_ends`` says when regional compilation cannot work
here; ``confirm`` re-measures the finalists in fresh processes, round by round, until the
sequential decision in ``stats`` can say compile, stay eager or undecided; ``verdict`` reads
what to recommend from the study.
"""
