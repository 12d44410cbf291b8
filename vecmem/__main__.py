"""`python -m vecmem` is the `vecmem` command."""

import sys

from .cli import main

sys.exit(main())
