"""The AOTInductor ``.pt2`` package, in one place, each module named for its part and its side:

- the user's side (layer 3, no torch needed to import): ``load`` (``tuner.load_package``),
  ``record`` (what a package says about itself: written, sealed, read and checked), ``machine``
  (the CPU's ISA level and flags, a GPU's capability) and ``toolchain`` (the C++ compiler, and the
  glibc and libstdc++ a shared object needs);
- inside the build's trial process (layer 4, ``python -m tuner.measure`` in ``package`` and
  ``package_check`` mode): ``build`` (export, compile, seal; and the check in a fresh process),
  ``build_target`` (the ISA level the C++ is held to), ``attempts`` (the configs tried, nearest
  first) and ``bounds`` (the input dimensions that vary, and the probes outside them);
- the tuner's side (layer 9): ``command`` (``compile-tune package RESULTS``: both processes
  started, their figures into the study).

This ``__init__`` imports nothing, so importing one part never imports another's layer.
"""
