"""`python -m transformer ...`: see transformer/cli.py."""

from .cli import main

raise SystemExit(main())
