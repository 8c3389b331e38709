"""`python -m calltap` runs the same CLI as the `calltap` console script."""

from calltap.cli import main

raise SystemExit(main())
