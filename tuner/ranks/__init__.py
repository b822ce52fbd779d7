"""One home for a trial on many ranks (``--nproc``, ``--nnodes``), both of its sides.

In the tuner's process (layer 5, "starting a trial"): ``group`` starts the ranks through torch's
elastic launcher and merges their results into one trial's, ``board`` hosts the store that
ranks on other machines post to, and ``node`` is ``compile-tune node`` on those machines.
Inside the rank processes (layer 4, "inside a trial"): ``main`` is ``python -m tuner.ranks.main``
(the launcher and each rank), and ``rank`` is the one trial inside a rank's process group.

The tuner's side never imports the ranks' side: it starts it as a process, by module name, as
it starts ``tuner.measure``; this ``__init__`` imports neither, so loading one side never loads
the other.
"""
