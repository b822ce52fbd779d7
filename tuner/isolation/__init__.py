"""Starting one trial in a process of its own (``isolated``), forked from a pre-imported launcher
where one is up (``forkserver``): a trial that crashes, hangs or leaks memory costs only itself,
and each compile starts from nothing. Knows the trial only by its command line."""
