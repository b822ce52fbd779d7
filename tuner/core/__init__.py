"""The core: pure values and the rules about them. No torch at module level, no file touched.

The compile config (``config``), what a trial is asked to do and returns (``spec``), how a total
time is scored (``score``), dynamic shapes and lower precisions as values (``shapes``,
``precision``), which modules a config compiles (``targets``), durations and a run's phases
(``durations``), and the errors every layer raises (``errors``).
"""
