"""The user's side that is not the runtime: loading and checking the workload file
(``workload``) and explaining what the compiler did in plain words (``diagnose``). Both run in
the user's process as well as ours, so they stay below everything that starts or decides trials."""
