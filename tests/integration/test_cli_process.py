"""The installed `vecmem` command in real subprocesses, with the real model."""

import json
import subprocess
import sys

from tests.integration.conftest import cli_env, run_cli


def test_help_does_not_import_torch_or_chroma(tmp_path):
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "vecmem", "--help"],
        env=cli_env(tmp_path), capture_output=True, text=True, check=True,
    )
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert "torch" not in imported and "sentence_transformers" not in imported and "chromadb" not in imported
    assert "reindex" in result.stdout


def test_version_imports_neither_the_model_nor_chroma_nor_the_adapters(tmp_path):
    import vecmem

    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "vecmem", "--version"],
                            env=cli_env(tmp_path), capture_output=True, text=True, check=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    assert not {"torch", "sentence_transformers", "chromadb", "numpy", "langgraph", "langchain_core"} & imported
    assert result.stdout == f"vecmem {vecmem.__version__}\n"


def _search_imports(env: dict[str, str], query: str) -> tuple[list[str], set[str]]:
    """The contents a `vecmem search --json` finds, and the top-level packages its process imported."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "vecmem", "search", query, "--k", "2", "--json"],
                            env=env, capture_output=True, text=True, check=True)
    imported = {line.split("|")[-1].strip().split(".")[0] for line in result.stderr.splitlines() if "|" in line}
    return [hit["content"] for hit in json.loads(result.stdout)], imported


def test_a_search_after_a_command_saved_the_users_replica_does_not_import_chroma(tmp_path):
    env = cli_env(tmp_path / "home")
    assert run_cli("add", "The user's favourite fruit is the mango", env=env).returncode == 0
    found, imported = _search_imports(env, "favourite fruit")
    assert found[0] == "The user's favourite fruit is the mango" and "chromadb" not in imported
    assert run_cli("add", "The user keeps bees on the roof", env=env).returncode == 0  # saved again as it closes
    found, imported = _search_imports(env, "bees")
    assert found[0] == "The user keeps bees on the roof" and "chromadb" not in imported


def test_seed_twice_then_search(tmp_path):
    env = cli_env(tmp_path / "home")
    first = run_cli("seed", env=env)
    assert first.returncode == 0, first.stderr
    count = json.loads(run_cli("stats", "--json", env=env).stdout)["count"]
    assert count >= 30
    assert run_cli("seed", env=env).returncode == 0
    assert json.loads(run_cli("stats", "--json", env=env).stdout)["count"] == count

    result = run_cli("search", "write me a sleep function", "--k", "3", env=env)
    assert result.returncode == 0, result.stderr
    assert "concise coding style" in result.stdout
    hits = json.loads(run_cli("search", "write me a sleep function", "--k", "3", "--json", env=env).stdout)
    assert "seed-en-code-style" in [hit["id"] for hit in hits]


def test_another_model_is_one_error_line_and_reindex_fixes_it(tmp_path, other_model_dir):
    env = cli_env(tmp_path / "home")
    assert run_cli("add", "The user's favourite fruit is the mango", env=env).returncode == 0
    other = {**env, "VECMEM_EMBED_MODEL": str(other_model_dir)}
    refused = run_cli("search", "favourite fruit", env=other)
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "Traceback" not in refused.stderr
    assert "multilingual-e5-small-q4" in refused.stderr and str(other_model_dir) in refused.stderr  # the default
    assert "vecmem reindex" in refused.stderr

    fixed = run_cli("reindex", env=other)
    assert fixed.returncode == 0, fixed.stderr
    hits = json.loads(run_cli("search", "favourite fruit", "--json", env=other).stdout)
    assert hits[0]["content"] == "The user's favourite fruit is the mango"
    assert json.loads(run_cli("stats", "--json", env=other).stdout)["embed_dim"] == 128
    # with no model configured the store's own model is used, and one line says how to move to the default
    unconfigured = run_cli("search", "favourite fruit", env=env)
    assert unconfigured.returncode == 0 and unconfigured.stderr.count("vecmem reindex") == 1
    pinned = run_cli("search", "favourite fruit", env={**env, "VECMEM_EMBED_MODEL": "multilingual-e5-small"})
    assert pinned.returncode == 2  # a model named explicitly is still refused


def test_serve_answers_over_real_http_and_refuses_the_network_without_a_token(tmp_path):
    import socket
    import time
    import urllib.request

    env = cli_env(tmp_path / "home")
    refused = run_cli("serve", "--host", "0.0.0.0", env=env)
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "token" in refused.stderr

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    from tests.integration.conftest import VENV_BIN

    server = subprocess.Popen([str(VENV_BIN / "vecmem"), "serve", "--port", str(port)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def call(path, body=None):
        request = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json", "X-Vecmem-Request": "1"})
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                call("/openapi.json")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, server.stderr.read()
                time.sleep(0.2)
        made = call("/memories", {"content": "The user's favourite fruit is the mango", "type": "preference"})
        (hit,) = call("/search", {"query": "which fruit do I like best?", "k": 1})
        assert hit["id"] == made["id"] and hit["dense"] > 0.3
    finally:
        server.terminate()
        server.wait(30)


def test_with_a_linger_the_first_command_starts_an_owner_the_next_ones_use_and_it_stops_when_quiet(tmp_path):
    import os
    import time

    home = tmp_path / "home"
    env = cli_env(home, VECMEM_OWNER_LINGER="4")
    first = run_cli("add", "The user's favourite fruit is the mango", env=env)
    assert first.returncode == 0, first.stderr
    assert first.stderr.count("\n") == 1 and "started an owner of the store" in first.stderr
    owner = json.loads((home / "owner.json").read_text())
    assert owner["program"] == "python -m vecmem.interfaces.owner.lingering"

    hits = run_cli("search", "favourite fruit", "--json", env=env)
    assert hits.returncode == 0 and hits.stderr == "", hits.stderr  # no second owner, nothing said
    assert json.loads(hits.stdout)[0]["content"] == "The user's favourite fruit is the mango"
    assert json.loads((home / "owner.json").read_text())["pid"] == owner["pid"]

    def running(pid: int) -> bool:  # a zombie (its parent, the command, is gone) has stopped too
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as stat:
                return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
        except (ProcessLookupError, FileNotFoundError):
            return False

    deadline = time.monotonic() + 60  # quiet for 4 s: it stops, owner.json first, then the process
    while running(owner["pid"]) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not running(owner["pid"]), "the lingering owner did not stop"
    assert not (home / "owner.json").exists()
    alone = run_cli("search", "favourite fruit", "--json", env=cli_env(home))  # the store is free again
    assert alone.returncode == 0 and json.loads(alone.stdout)[0]["content"] == "The user's favourite fruit is the mango"
