"""Inside a trial process: time steps, record memory, compare with eager, explain what the
compiler did. Started as ``python -m tuner.measure SPEC OUT`` (``__main__.py``); nothing on the
tuner's side imports this package except for pure formatting (``check.format_check``).
"""
