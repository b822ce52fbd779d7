"""The bundled search spaces (``compile-tune --space NAME``), installed as ``tuner.search_spaces``.

The YAML files are package data: ``tuner.space_file`` finds them with ``importlib.resources``, so a
wheel carries them. Copy one anywhere and pass its path to ``--space`` to make your own.
"""
