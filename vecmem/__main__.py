"""`python -m vecmem` is the `vecmem` command."""

import sys

from vecmem.interfaces.cli import main

sys.exit(main())
