"""``stopping.run_loop``: the program's coroutine runs to its end, and the loop is closed with SIGINT and SIGTERM
held back, so a Ctrl-C landing as the program ends cannot leave the loop half closed; one that lands then is raised
just after the close, where the program's stop handling meets it."""

import asyncio
import signal

import pytest

from vecmem.interfaces.stopping import run_loop


def test_the_loop_closes_whole_with_stops_held_back_and_a_stop_meanwhile_comes_after(monkeypatch):
    seen: dict[str, object] = {}
    close = asyncio.Runner.close

    def closing(runner: asyncio.Runner) -> None:
        seen["held"] = signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the mask, unchanged
        seen["loop"] = runner.get_loop()
        signal.raise_signal(signal.SIGINT)  # Ctrl-C while the loop closes: pending until the close is done
        close(runner)

    monkeypatch.setattr(asyncio.Runner, "close", closing)

    async def main() -> None:
        seen["ran"] = True

    with pytest.raises(KeyboardInterrupt):
        run_loop(main)
    assert seen["ran"] is True
    assert {signal.SIGINT, signal.SIGTERM} <= set(seen["held"])  # type: ignore[arg-type]
    assert seen["loop"].is_closed()  # type: ignore[union-attr]
    assert signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # the mask is as it was
