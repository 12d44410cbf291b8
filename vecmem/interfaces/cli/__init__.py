"""The ``vecmem`` command line: the parser and dispatch (main, command) and each group of commands."""
