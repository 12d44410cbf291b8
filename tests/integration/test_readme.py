"""The documentation runs as written: every ```python block of README.md and docs/*.md, every `vecmem` command line
of their ```sh and ```bash blocks, and the several-workers shell example.

A block may be preceded by a marker, ``<!-- doctest: NAME -->`` on the line before its fence: NAME picks what the
block runs against (a scripted chat-completions server, the proxy, the HTTP API, ...) and what is checked after it
ran (``RUNNERS``); ``<!-- doctest: skip REASON -->`` skips it, saying why. An unmarked Python block runs in a
fresh VECMEM_HOME with the default model and must run to its end. Command lines run in this process against a
temporary store with the fake embedder (``cli`` in tests/conftest.py); the commands that serve until stopped
(serve, proxy, mcp) are checked to parse instead. Every command any block names must answer `--help`.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.S | re.M)
MARKER = re.compile(r"<!-- doctest: (.+?) -->\n\Z")
SERVING = {"serve", "proxy", "mcp"}  # run until stopped: parsed here; their own tests start them


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    language: str
    code: str
    marker: str | None

    @property
    def name(self) -> str:
        return f"{self.page.relative_to(REPO).as_posix()}:{self.line}"


def _blocks() -> list[Block]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            marked = MARKER.search(text[: match.start()])
            found.append(Block(page, text.count("\n", 0, match.start()) + 1, match.group(1), match.group(2),
                               marked.group(1) if marked else None))
    return found


BLOCKS = _blocks()
PYTHON = [block for block in BLOCKS if block.language == "python"]
SHELL = [block for block in BLOCKS if block.language in ("sh", "bash")]


def _marked(marker: str) -> Block:
    (block,) = [block for block in BLOCKS if block.marker == marker]
    return block


def _exec(block: Block, code: str | None = None) -> dict:
    """Run the block; every name its top level binds must be bound afterwards (it ran to its end)."""
    source = block.code if code is None else code
    namespace: dict = {"__name__": "__doc_example__"}
    exec(compile(source, block.name, "exec"), namespace)
    bound = {target.id for node in ast.parse(source).body if isinstance(node, (ast.Assign, ast.AnnAssign))
             for target in ([node.target] if isinstance(node, ast.AnnAssign) else node.targets)
             if isinstance(target, ast.Name)}
    assert bound <= namespace.keys(), f"{block.name} stopped before binding {sorted(bound - namespace.keys())}"
    return namespace


@dataclass
class Run:
    """What a runner gets: the block, pytest's helpers for this test, and the fixtures it may ask for."""

    block: Block
    request: pytest.FixtureRequest
    capsys: pytest.CaptureFixture
    monkeypatch: pytest.MonkeyPatch
    tmp_path: Path

    def printed(self) -> list[str]:
        return self.capsys.readouterr().out.splitlines()


def _plain(run: Run) -> None:
    _exec(run.block)


def _ten_lines(run: Run) -> None:
    namespace = _exec(run.block)
    first, second, last = run.printed()
    assert first.endswith("我住在杭州，在一家云计算公司工作")  # an English question finds the Chinese memory
    assert set(namespace["pack"].tokens) == {"system", "long_term", "short_term", "current"}
    assert "以后都用 pnpm" in namespace["pack"].long_term and "pnpm" in last


def _python_api(run: Run) -> None:
    namespace = _exec(run.block)
    assert any("concise coding style" in line for line in run.printed())
    pack = namespace["pack"]
    assert set(pack.tokens) == {"system", "long_term", "short_term", "current"}
    assert "after wake from sleep" in pack.long_term


def _memory_agent(run: Run) -> None:
    _exec(run.block)
    reasons, *long_term = run.printed()
    assert "request" in reasons  # the second message is not kept
    assert any("pnpm" in line and "[instruction]" in line for line in long_term)  # the first one is, and recalled


def _asyncio(run: Run) -> None:
    _exec(run.block)
    content, long_term_tokens = "\n".join(run.printed()).strip().rsplit(" ", 1)
    assert content == "The user is allergic to peanuts" and int(long_term_tokens) > 0


def _langgraph(run: Run) -> None:
    namespace = _exec(run.block)
    assert run.printed() == ["['I am allergic to peanuts']", "[('memories', 'alice')]"]
    (memory,) = namespace["store"].bank.list_memories(user_id="alice")
    assert (memory.content, memory.session_id) == ("I am allergic to peanuts", "memories")


def _langchain(run: Run) -> None:
    _exec(run.block)
    (line,) = run.printed()
    score, content = line.split("  ", 1)
    assert content == "The user deploys on Fridays after the team sync" and 0 < float(score) <= 1


def _chat_server(run: Run) -> None:
    """The agent loop against a scripted chat-completions server: learnt in turn one, recalled in turn two."""
    from tests.chat_server import Reply, ScriptedChatServer

    def responder(kind, body):
        messages = body["messages"]
        if messages[0]["content"].startswith("Reply with one short sentence"):
            said = messages[-1]["content"]
            return Reply("The user is allergic to peanuts." if "peanut" in said else "NONE")
        return Reply(json.dumps([m["content"] for m in messages]))  # the answer shows what the model was sent

    with ScriptedChatServer(responder) as server:
        run.monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        run.monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        namespace = _exec(run.block)
    second_call = json.loads(run.printed()[1].removeprefix("assistant: "))
    assert any("allergic to peanuts" in text for text in second_call)
    assert [r.content for r in namespace["bank"].list_memories()] == ["The user is allergic to peanuts."]


def _proxy(run: Run) -> None:
    """Against the proxy on this run's port in front of a scripted model server: the second request reaches the
    model with the memory the first one taught."""
    from tests.chat_server import ScriptedChatServer
    from tests.conftest import serving
    from tests.proxy_script import ANSWER, LEARNT, carries, remembering_upstream
    from vecmem import MemoryBank, Settings
    from vecmem.agent.llm import ChatCompletions
    from vecmem.interfaces.proxy.server import create_proxy_app

    embedder = run.request.getfixturevalue("real_embedder")
    with ScriptedChatServer(remembering_upstream) as server:
        bank = MemoryBank(Settings(home=run.tmp_path / "proxied", openai_base_url=server.base_url,
                                   openai_api_key="key", chat_model="scripted-model"), embedder=embedder)
        app = create_proxy_app(bank, ChatCompletions(base_url=server.base_url, api_key="key"))
        with serving(app, ready="/") as port:
            _exec(run.block, run.block.code.replace("8766", str(port)))
        answered = [body for kind, body in server.requests if kind == "answer"]
    assert run.printed() == [f"assistant: {ANSWER}"] * 2
    first, second = answered
    assert not carries(first) and carries(second)
    assert [m["role"] for m in second["messages"]] == ["system", "user", "assistant", "system", "user"]
    assert second["messages"][0]["content"] == "You are a friendly hiking guide." and second["user"] == "alice"
    assert [record.content for record in bank.list_memories(user_id="alice")] == [LEARNT]
    bank.close()


def _http_server(run: Run) -> None:
    """Against the HTTP API (`vecmem serve`'s app) on this run's port."""
    from tests.conftest import serving
    from vecmem import MemoryBank, Settings
    from vecmem.interfaces.http.app import create_app

    bank = MemoryBank(Settings(home=run.tmp_path / "served"), embedder=run.request.getfixturevalue("real_embedder"))
    with serving(create_app(bank)) as port:
        _exec(run.block, run.block.code.replace("8765", str(port)))
    (line,) = run.printed()
    assert line.startswith("added The user deploys on Fridays after the team sync ['deploy']"), line
    assert [record.content for record in bank.list_memories(user_id="alice")] == [
        "The user deploys on Fridays after the team sync"]
    bank.close()


RUNNERS: dict[str, Callable[[Run], None]] = {
    "plain": _plain, "ten-lines": _ten_lines, "python-api": _python_api, "memory-agent": _memory_agent,
    "asyncio": _asyncio, "langgraph": _langgraph, "langchain": _langchain, "chat-server": _chat_server,
    "proxy": _proxy, "http-server": _http_server,
}


@pytest.mark.parametrize("block", PYTHON, ids=[block.name for block in PYTHON])
def test_python_block_runs(block: Block, request, capsys, monkeypatch, tmp_path):
    if block.marker and block.marker.startswith("skip"):
        pytest.skip(f"{block.name}: {block.marker}")
    runner = RUNNERS.get(block.marker or "plain")
    assert runner is not None, f"{block.name}: no runner for <!-- doctest: {block.marker} -->"
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    runner(Run(block, request, capsys, monkeypatch, tmp_path))


def test_every_marker_names_a_runner_and_every_runner_a_block():
    markers = {block.marker for block in BLOCKS if block.marker and not block.marker.startswith("skip")}
    assert markers - set(RUNNERS) - {"workers"} == set(), "a marker without a runner"
    assert set(RUNNERS) - markers - {"plain"} == set(), "a runner whose block is gone"


# --- shell blocks ---------------------------------------------------------------------------------------------


def _command_lines(code: str) -> Iterator[list[str]]:
    """Each line's words, comments dropped, leading VAR=value assignments and a trailing `&` removed."""
    for line in code.replace("\\\n", " ").splitlines():
        words = shlex.split(line, comments=True)
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words = words[1:]
        if words and words[-1] == "&":
            words = words[:-1]
        if words:
            yield words


def _makefile_targets() -> set[str]:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    return {name for line in makefile.splitlines() for name in re.findall(r"^([a-z][\w-]*):", line)}


def _answers_help(*command: str) -> str:
    """`vecmem COMMAND --help`, in this process: argparse prints the help and exits 0."""
    from vecmem.interfaces.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([*command, "--help"])
    assert exited.value.code == 0, f"vecmem {' '.join(command)} --help exited {exited.value.code}"
    return out.getvalue()


def _check_line(words: list[str], cli) -> bool:
    """Run or check one command line of a shell block; False for a line of a program these docs do not own."""
    program, *arguments = words
    if program == "make":
        assert set(arguments) <= _makefile_targets(), f"make {' '.join(arguments)}: no such target"
    elif program == "python" and arguments[:2] == ["-m", "vecmem.chat"]:
        import importlib.util

        assert importlib.util.find_spec("vecmem.chat") is not None
    elif program == "vecmem" and arguments and arguments[0] in SERVING:
        assert arguments[0] in _answers_help(arguments[0]).split()[1:3]
    elif program == "vecmem":
        code, out, err = cli(*arguments)
        assert code == 0, f"`vecmem {' '.join(arguments)}` exited {code}: {err.strip()}"
    else:
        return False
    return True


@pytest.mark.parametrize("block", [b for b in SHELL if b.marker is None], ids=lambda block: block.name)
def test_shell_block_commands_run(block: Block, cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    checked = [words for words in _command_lines(block.code) if _check_line(words, cli)]
    assert checked, f"{block.name}: no line of this block is one these docs own (vecmem, make, python -m vecmem)"


def _named_commands() -> set[str]:
    """Every sub-command a block names: `vecmem NAME` at a line's start, and the `| NAME` alternatives of a
    synopsis line that are not an argument of its first command (`keys create | list | revoke`)."""
    names = set()
    for block in BLOCKS:
        for line in block.code.splitlines():
            match = re.match(r"\s*(?:[A-Z_]+=\S+\s+)*vecmem ([a-z][a-z-]*)(.*)", line)
            if match:
                first, rest = match.groups()
                alternatives = set(re.findall(r"\| ([a-z][a-z-]*)\b", rest.split("  ")[0]))
                names |= {first, *(alternatives - set(re.findall(r"[a-z-]+", _answers_help(first))))}
    return names


@pytest.mark.parametrize("command", sorted(_named_commands()))
def test_every_command_the_docs_name_answers_help(command):
    assert f"vecmem {command}" in _answers_help(command)


# --- several workers ------------------------------------------------------------------------------------------


def test_several_workers_example_runs(tmp_path, chroma_server, postgres_server, state_schema):
    """The several-workers shell block, with this run's Chroma server, PostgreSQL, ports and folders: the second
    worker finds what the first one stored. `vecmem` runs the code under test (`python -m vecmem`)."""
    from tests.conftest import VENV_BIN, _free_port

    block = _marked("workers")
    first, second = _free_port(), _free_port()
    script = (block.code.replace("http://127.0.0.1:8000", chroma_server)
              .replace("postgresql://vecmem@127.0.0.1:5432/vecmem", postgres_server)
              .replace("8001", str(first)).replace("8002", str(second)).replace("/srv/vecmem", str(tmp_path)))
    shim = tmp_path / "bin" / "vecmem"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m vecmem "$@"\n', encoding="utf-8")
    shim.chmod(0o755)
    environment = {key: value for key, value in os.environ.items() if not key.startswith("VECMEM_")}
    environment.update(PATH=f"{shim.parent}:{VENV_BIN}:{environment.get('PATH', '')}",
                       VECMEM_DATABASE_SCHEMA=state_schema, VECMEM_CHROMA_DATABASE=f"readme-{uuid.uuid4().hex[:12]}",
                       PYTHONPATH=os.pathsep.join(filter(None, [str(REPO), environment.get("PYTHONPATH")])))
    finished = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=300, env=environment)
    assert finished.returncode == 0, finished.stderr[-3000:]
    added, found = (json.loads(line) for line in finished.stdout.splitlines() if line.startswith(("{", "[")))
    assert added["content"] == "The user deploys on Fridays"
    assert [hit["id"] for hit in found] == [added["id"]]


# --- links ----------------------------------------------------------------------------------------------------


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
            for heading in re.findall(r"^#+ (.+)$", text, re.M)}


def test_links_between_pages_resolve():
    broken = []
    for page in PAGES:
        text = FENCE.sub("", page.read_text(encoding="utf-8"))
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue  # a web address
            path, _, anchor = target.partition("#")
            linked = (page.parent / path).resolve() if path else page
            if not linked.exists() or (anchor and linked.suffix == ".md" and anchor not in _anchors(linked)):
                broken.append(f"{page.relative_to(REPO)}: {target}")
    assert broken == []
