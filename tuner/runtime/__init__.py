"""What training code calls in its own process: ``apply_config``, ``load_config``,
``optimizer_step`` (apply.py), the config's Dynamo settings around each compiled call (dynamo.py),
loading a verified warm-start bundle (warmstart.py) and, where it was timed faster, the
precompiled forward inside it (precompiled.py). The
tuner's side needs none of it except inside a trial process.
"""
