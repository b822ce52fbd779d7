"""The system: processes, signals, storage, caches and the heap.

How a Python process of ours is started (``launch``), Ctrl-C (``interrupts``), study storage
URLs (``storage``), how many trials run at once and on which cores (``lanes``), the inductor
caches kept for confirmation (``caches``), glibc malloc's thresholds (``heap``), torch's default
thread count in a process of the user's (``thread_count``), and the names
and defaults of inductor's and Dynamo's options, read once from torch (``config_defaults``).
"""
