"""`python -m rpp` is the same as the `rpp` console script."""

from rpp.cli import main

raise SystemExit(main())
