"""How the programs that stay (`vecmem mcp`, `vecmem serve`, `vecmem proxy`, the chat) stop: the same way, exit
status 0, at the end of their input (the chat, MCP's stdio), on SIGTERM and on Ctrl-C (SIGINT).

``stops_cleanly()`` wraps a program's whole life: inside it SIGTERM does what Ctrl-C does (raises
``KeyboardInterrupt`` in the main thread, or whatever the running loop made of SIGINT: asyncio cancels its main
task, uvicorn shuts down gracefully and then raises the signal again), and a ``KeyboardInterrupt`` that reaches it
is a stop, not an error. ``serve_until_stopped(serve)`` runs the serving part: a stop ends it as the end of input
does, and from then on both signals are ignored until the block of ``stops_cleanly`` is left, so what follows
(joining the background threads, closing the bank: access statistics, the state database, Chroma, the store
lock, owner.json) runs to its end, whoever presses Ctrl-C twice. Outside the main thread (a test calling a
program's ``main``) signals are left alone.

Why the order matters: a thread still inside native code (ONNX Runtime loading a model, Chroma searching) when the
interpreter shuts down is ended by ``pthread_exit`` as it tries to take the GIL back, and the unwinding that
starts aborts the process ("terminate called without an active exception", exit 134) or crashes it. So every
program joins its threads before it closes the bank, and closes the bank before it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from collections.abc import Callable, Coroutine, Iterator
from types import FrameType
from typing import Any

__all__ = ["run_loop", "serve_until_stopped", "start_before_any_stop", "stops_cleanly"]

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _as_interrupt(_signum: int, _frame: FrameType | None) -> None:
    signal.raise_signal(signal.SIGINT)  # whatever Ctrl-C does now (the default, asyncio's, uvicorn's)


@contextlib.contextmanager
def stops_cleanly() -> Iterator[None]:
    """SIGTERM as Ctrl-C inside the block; a ``KeyboardInterrupt`` ends the block quietly (the program then
    returns its exit status 0). The handlers before it are back afterwards."""
    if not _in_main_thread():
        yield
        return
    before = {number: signal.getsignal(number) for number in _SIGNALS}
    signal.signal(signal.SIGTERM, _as_interrupt)
    try:
        yield
    except KeyboardInterrupt:
        pass  # stopped before serving (while opening the store): what was opened is closed already
    finally:
        for number, handler in before.items():
            signal.signal(number, handler)


def serve_until_stopped(serve: Callable[[], int | None]) -> int:
    """``serve()``'s exit status (0 when it returns None), or 0 when SIGTERM or Ctrl-C stopped it; then both
    signals are ignored (inside ``stops_cleanly``, which restores them), so the closing that follows is whole."""
    try:
        return serve() or 0
    except KeyboardInterrupt:
        return 0
    finally:
        if _in_main_thread():
            for number in _SIGNALS:
                signal.signal(number, signal.SIG_IGN)


def start_before_any_stop(thread: threading.Thread) -> None:
    """Start ``thread`` with SIGINT and SIGTERM held back until it runs: a stop that arrives meanwhile is raised
    just after, so a thread is either not started (its ``ident`` is None) or started whole, never half-way, and
    the joining that follows a stop knows which."""
    if not _in_main_thread():
        thread.start()
        return
    held = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS)
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def run_loop(main: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """``asyncio.run(main())``, except that the loop is closed with SIGINT and SIGTERM held back (a stop that
    arrives meanwhile is raised just after). A program that stays ends its loop when its input ends, and a Ctrl-C
    landing then, inside ``loop.close()``, left the loop half closed (its self-pipe closed, the loop not marked so):
    at exit Python printed "Exception ignored in: BaseEventLoop.__del__ … Invalid file descriptor: -1"
    (`vecmem mcp`, its input closed and SIGINT sent at once, about one stop in a hundred)."""
    runner = asyncio.Runner()
    try:
        runner.run(main())
    finally:
        held = signal.pthread_sigmask(signal.SIG_BLOCK, _SIGNALS) if _in_main_thread() else None
        try:
            runner.close()
        finally:
            if held is not None:
                signal.pthread_sigmask(signal.SIG_SETMASK, held)
