"""An owner for the shell: with ``VECMEM_OWNER_LINGER`` set, the first `vecmem` command that finds no owner of the
embedded store starts one, and it and the commands after it go through that owner, which stops by itself once no
call has come for that many seconds.

Why: a command that opens the store itself imports Chroma and loads the model every time (about a second, most
of it importing chromadb); through an owner it costs the interpreter's start and one call (docs/benchmarks.md,
*A command from the shell*). People script memory from shells, editor hooks and git hooks, where a second is
long. Off by default: while an owner holds an embedded store, a Python program's ``MemoryBank()`` on it is refused
(``StoreInUseError``; ``vecmem.connect()`` goes through the owner), as beside the chat or `vecmem serve`, and that
should not surprise anyone who did not ask for an owner.

The owner is this module run as a program, in a session of its own, so neither the command's end, the shell's
Ctrl-C nor a closed terminal stops it; its input and output go nowhere. It takes the store as any process does
(opening.py): when another process holds it, it leaves, and the command goes through that one or opens the store
itself, as it would without this. It serves like the chat's or `vecmem serve`'s owner (endpoint.py; owner.json
names it, and their clients take the store over when it goes: handover.py), and stops on SIGTERM or once quiet
(owner.json goes first). A command asks the owner's ``hello`` first (opening.py), which counts as a call, so an
owner never stops between a command finding it and the command's call, unless the linger is shorter than that.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable

from vecmem.config import Settings
from vecmem.errors import StoreInUseError, VecmemError
from vecmem.interfaces.owner.opening import choose_bank, find_owner
from vecmem.interfaces.owner.remote import RemoteBank

__all__ = ["PROGRAM", "START_WAIT", "main", "serve_until_quiet", "through_lingering_owner"]

_MODULE = "vecmem.interfaces.owner.lingering"  # this module, run as the owner (its __name__ is then __main__)
PROGRAM = f"python -m {_MODULE}"  # how owner.json and the messages name it
START_WAIT = 30.0  # seconds a command waits for the owner it started: it imports Chroma and opens the store first
_POLL = 0.05


def through_lingering_owner(settings: Settings, say: Callable[[str], None]) -> RemoteBank | None:
    """A client of the store's owner: the one serving it now, else one started here (``say`` is told in one line).
    None when none serves it within ``START_WAIT`` or the one started here left (another process holds the store,
    or it could not open it): the command then opens the store itself and meets what the owner met."""
    remote = find_owner(settings)
    if remote is not None:
        return remote
    owner = subprocess.Popen([sys.executable, "-m", _MODULE], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + START_WAIT
    while time.monotonic() < deadline:
        remote = find_owner(settings)
        if remote is not None:
            if remote.owner.pid == owner.pid:
                say(f"vecmem: started an owner of the store (pid {owner.pid}); the next commands go through it, and it "
                    f"stops after {settings.owner_linger:g} s without one (VECMEM_OWNER_LINGER)")
            return remote
        if owner.poll() is not None:
            return None
        time.sleep(_POLL)
    return None


def serve_until_quiet(quiet_for: Callable[[], float], linger: float) -> None:
    """Return once ``quiet_for()`` (seconds since the last call) reaches ``linger``."""
    while (quiet := quiet_for()) < linger:
        time.sleep(max(linger - quiet, _POLL))


def main() -> int:
    """The owner: take the store and serve it until quiet for ``VECMEM_OWNER_LINGER`` seconds, or stopped."""
    from vecmem.interfaces.owner.endpoint import OwnerEndpoint  # the server side, only in the owner's process
    from vecmem.interfaces.stopping import serve_until_stopped, stops_cleanly

    settings = Settings.from_env()
    if settings.owner_linger <= 0 or settings.chroma_url:
        return 0  # nothing to linger for: a Chroma server is shared by every process as it is
    with stops_cleanly():
        try:
            bank, owned = choose_bank(settings, True, None)
        except StoreInUseError:
            return 0  # another process holds the store: the command goes through it or waits for it
        except VecmemError:
            return 1  # the command, opening the store itself, says what is wrong
        try:
            if not owned:  # another owner serves it already
                return 0
            endpoint = OwnerEndpoint(bank, settings.home, program=PROGRAM).start()
            try:
                serve_until_stopped(lambda: serve_until_quiet(endpoint.quiet_for, settings.owner_linger))
            finally:
                endpoint.stop()  # owner.json first: a command that finds the store free then opens it itself
        finally:
            bank.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
