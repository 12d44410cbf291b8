"""`python -m vecmem` is the `vecmem` command."""

import sys

from vecmem.interfaces.cli.main import main

sys.exit(main())
