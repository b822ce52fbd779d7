"""The package list, the one setting pyproject.toml cannot express: found, plus one mapped folder.

pyproject.toml takes either a fixed list or a `find` directive, and `find` cannot see
tuner.search_spaces, which lives at the repository root (see [tool.setuptools.package-dir]).
A fixed list would silently drop a new subpackage of tuner from the wheel; every folder under
tuner/ counts, with or without an __init__.py (tests/test_packaging.py checks the wheel).
"""
from setuptools import find_namespace_packages, setup

found = find_namespace_packages(include=["tuner", "tuner.*"], exclude=["*.__pycache__"])
setup(packages=found + ["tuner.search_spaces"])
