"""`python -m vecmem.chat`: the chat REPL, kept at this name for the command people already type.

The chat itself lives in ``vecmem.interfaces.chat``.
"""

import sys

from vecmem.interfaces.chat import main

if __name__ == "__main__":
    sys.exit(main())
