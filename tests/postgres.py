"""A throw-away PostgreSQL server for the tests: Debian's binaries, a data folder of its own, a free loopback port.

``running_postgres()`` initialises a cluster in a new temporary folder, starts ``postgres`` on 127.0.0.1 and
yields its URL (user ``vecmem``, trust authentication, database ``postgres``); the server is stopped (a fast
shutdown) and the folder removed afterwards. PostgreSQL refuses to run as root, so under root the server runs
as the ``postgres`` user Debian's package creates, in a folder that user owns. Durability is switched off
(fsync, synchronous_commit): the data lives as long as the test session.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def postgres_bin() -> Path | None:
    """The newest installed PostgreSQL's bin folder (Debian: /usr/lib/postgresql/<version>/bin), or None."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"), key=lambda p: int(Path(p).parts[4]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("postgres")
    return Path(on_path).parent if on_path else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def running_postgres(max_connections: int = 300) -> Iterator[str]:
    binaries = postgres_bin()
    if binaries is None:
        raise FileNotFoundError("PostgreSQL is not installed (Debian: apt-get install postgresql; `make test` does)")
    folder = Path(tempfile.mkdtemp(prefix="vecmem-pg-"))
    run_as: dict[str, object] = {}
    if os.geteuid() == 0:  # initdb and postgres refuse root
        account = pwd.getpwnam("postgres")
        os.chown(folder, account.pw_uid, account.pw_gid)
        run_as = {"user": account.pw_uid, "group": account.pw_gid}
    data, log = folder / "data", folder / "server.log"
    subprocess.run([str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "vecmem", "-E", "UTF8",
                    "--locale=C", "--no-sync"], check=True, capture_output=True, cwd=folder, **run_as)  # type: ignore[arg-type]
    port = _free_port()
    with open(log, "wb") as handle:
        server = subprocess.Popen(
            [str(binaries / "postgres"), "-D", str(data), "-p", str(port), "-k", str(folder),
             "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
             "-c", "full_page_writes=off", "-c", f"max_connections={max_connections}"],
            stdout=handle, stderr=subprocess.STDOUT, cwd=folder, **run_as)  # type: ignore[arg-type]
    url = f"postgresql://vecmem@127.0.0.1:{port}/postgres"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    pass
                import psycopg

                psycopg.connect(url, connect_timeout=2).close()
                break
            except (OSError, ImportError) as exc:  # psycopg.OperationalError is neither: caught below
                last: BaseException = exc
            except Exception as exc:  # starting up: "the database system is starting up"
                last = exc
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"postgres did not start ({last}): {log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.1)
        yield url
    finally:
        server.send_signal(signal.SIGINT)  # a fast shutdown: connections closed, no waiting for clients
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(folder, ignore_errors=True)
