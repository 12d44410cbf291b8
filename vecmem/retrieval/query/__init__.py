"""A query read once: its terms (tokenize), its parts (question), the time it names (timeframe,
timewindow), the speakers it addresses and the spelling variants of its names."""
