"""Counts the robustness tests keep (operations run, kills survived, inputs fuzzed, memories lost or leaked),
printed at the end of the test run by conftest.py, so their figures come from the suite itself."""

from collections import Counter

TALLY: Counter[str] = Counter()


def count(name: str, amount: int = 1) -> None:
    TALLY[name] += amount
