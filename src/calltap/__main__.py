"""`python -m calltap` runs the same CLI as the `calltap` console script."""

from calltap.cli import entry

entry()
