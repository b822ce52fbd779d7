"""One run of one workload: its options (``options``), how it is prepared (``pipeline``), the
Run object whose methods are its phases (``phases``), and its clock and budget (``budget``);
beside them what a run does around its trials: its files (``outputs``), its ``--workers``
processes (``workers``), the thread check (``thread_check``) and the progress bar (``progress``)."""
