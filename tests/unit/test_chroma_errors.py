"""The table from chromadb's and httpx's exceptions to vecmem's (``vecmem/storage/chroma/client.py``): real
chromadb failures provoked on an embedded store where that is cheap, constructed exceptions otherwise; and what
is not theirs (vecmem's own errors and bugs) passes through untouched."""

import socket

import httpx
import numpy as np
import pytest
from chromadb import errors as chroma

from vecmem.errors import EmbeddingMismatchError, InvalidInputError, StoreError
from vecmem.storage.chroma.client import (
    DIMENSION_HINT,
    chroma_errors,
    create_or_existing,
    found_or_none,
    open_client,
    store_error,
)
from vecmem.storage.chroma.layout import ChromaCollections
from vecmem.storage.chroma.store import ChromaStore


def _raised(exc: BaseException, **options) -> StoreError:
    with pytest.raises(StoreError) as caught, chroma_errors("testing", **options):
        raise exc
    assert caught.value.__cause__ is exc
    return caught.value


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ------------------------------------------------------------------------------------ the table, constructed


@pytest.mark.parametrize("exc", [
    chroma.NotFoundError("Collection [x] does not exist"),
    chroma.InternalError("error returned from database: (code: 26) file is not a database"),
    chroma.InvalidArgumentError("Validation error: name"),
    chroma.DuplicateIDError("Expected IDs to be unique"),
    chroma.ChromaError("Collection [x] already exists"),
    chroma.ChromaAuthError(),
    chroma.AuthorizationError("no"),
    chroma.RateLimitError("slow down"),
    chroma.VersionMismatchError("old client"),
    httpx.ConnectError("[Errno 111] Connection refused"),
    httpx.ReadTimeout("timed out"),
    httpx.RemoteProtocolError("peer closed connection"),
    Exception("<html>502 Bad Gateway</html>"),  # what chromadb raises for an error response it cannot read
], ids=lambda exc: type(exc).__name__)
def test_every_sdk_exception_becomes_a_store_error_naming_the_action(exc):
    error = _raised(exc)
    assert str(error).startswith("testing failed: ")


def test_the_meaning_of_a_transport_failure_is_said():
    assert "cannot reach the Chroma server" in str(_raised(httpx.ConnectError("refused")))
    assert "did not answer in time" in str(_raised(httpx.ReadTimeout("timed out")))
    assert "refused the credentials" in str(_raised(chroma.ChromaAuthError()))


def test_a_dimension_error_keeps_the_reindex_hint_by_type():
    assert DIMENSION_HINT in str(_raised(chroma.InvalidDimensionException("got 8")))
    # chromadb 1.5 raises a plain InvalidArgumentError for it: the hint goes on calls that send vectors only
    assert DIMENSION_HINT in str(_raised(chroma.InvalidArgumentError("expecting 4, got 8"), sends_vectors=True))
    assert DIMENSION_HINT not in str(_raised(chroma.InvalidArgumentError("Validation error: name")))
    assert DIMENSION_HINT not in str(_raised(chroma.NotFoundError("gone"), sends_vectors=True))


@pytest.mark.parametrize("exc", [
    TypeError("unhashable type"), KeyError("ids"), AttributeError("no attribute 'get'"),
    ValueError("Expected where operand value to be a non-empty list"), RuntimeError("disk full"),
    EmbeddingMismatchError("a", 4, "b"), InvalidInputError("user_id", "not yours"),
], ids=lambda exc: type(exc).__name__)
def test_what_is_not_the_sdks_passes_through_untouched(exc):
    assert store_error(exc, "testing") is None
    with pytest.raises(type(exc)) as caught, chroma_errors("testing", sends_vectors=True, connecting=True):
        raise exc
    assert caught.value is exc


def test_a_client_that_cannot_connect_is_known_by_the_error_it_was_raised_from():
    def chromadb_style(context: BaseException) -> ValueError:
        try:
            raise context
        except BaseException:
            try:
                raise ValueError("Could not connect to a Chroma server. Are you sure it is running?")
            except ValueError as exc:
                return exc

    refused = chromadb_style(httpx.ConnectError("refused"))
    assert "cannot reach the Chroma server" in str(_raised(refused, connecting=True))
    assert store_error(refused, "testing") is None  # only opening a client wraps failures so
    assert store_error(chromadb_style(KeyError("bug")), "testing", connecting=True) is None
    assert store_error(ValueError("a bad setting"), "testing", connecting=True) is None


# ------------------------------------------------------------------------------------ real chromadb


@pytest.fixture
def client(tmp_path):
    return open_client(path=tmp_path / "chroma")


@pytest.mark.chroma
def test_a_missing_collection_is_none_and_a_failed_lookup_an_error(client):
    assert found_or_none(lambda: client.get_collection("vecmem-missing", embedding_function=None), "reading") is None

    def locked():
        raise chroma.InternalError("database is locked")

    with pytest.raises(StoreError, match="reading failed") as caught:
        found_or_none(locked, "reading")
    assert isinstance(caught.value.__cause__, chroma.InternalError)


@pytest.mark.chroma
def test_creating_what_another_client_just_created_returns_it(client):
    layout = ChromaCollections(client, "model", None)
    first = layout.create("vecmem-race", {"k": 1})
    assert layout.create("vecmem-race", {"k": 2}).id == first.id  # chromadb raised InternalError: a lost race
    with pytest.raises(chroma.InternalError):  # what the table's generic types stand for, embedded
        client.create_collection("vecmem-race", embedding_function=None)


@pytest.mark.chroma
def test_a_creation_that_fails_for_another_reason_is_a_store_error(client):
    with pytest.raises(StoreError, match="creating failed") as caught:
        create_or_existing(lambda: client.create_collection("a b!", embedding_function=None),
                           lambda: client.get_collection("a b!", embedding_function=None), "creating")
    assert isinstance(caught.value.__cause__, chroma.InvalidArgumentError)


@pytest.mark.chroma
def test_a_vector_of_another_dimension_says_to_reindex(client):
    collection = client.create_collection("vecmem-dims", embedding_function=None)
    collection.add(ids=["a"], embeddings=np.ones((1, 4), dtype=np.float32))
    with pytest.raises(StoreError, match="run `vecmem reindex`") as caught, \
            chroma_errors("writing memories", sends_vectors=True):
        collection.upsert(ids=["b"], embeddings=np.ones((1, 8), dtype=np.float32))
    assert isinstance(caught.value.__cause__, chroma.InvalidArgumentError)


@pytest.mark.chroma
def test_a_malformed_argument_is_vecmems_bug_and_not_mapped(client):
    collection = client.create_collection("vecmem-bug", embedding_function=None)
    with pytest.raises(ValueError, match="non-empty list"), chroma_errors("reading"):
        collection.get(where={"scope": {"$in": []}})


@pytest.mark.chroma
def test_a_server_that_is_not_there_is_a_store_error():
    url = f"http://127.0.0.1:{_closed_port()}"
    with pytest.raises(StoreError, match="cannot reach the Chroma server"):
        open_client(url=url)
    with pytest.raises(StoreError, match="cannot reach the Chroma server"):
        open_client(url=url, database="another")  # the database lookup fails first


def test_a_store_needs_exactly_one_place(tmp_path):
    with pytest.raises(InvalidInputError, match="exactly one"):
        ChromaStore(model_name="m")
    with pytest.raises(InvalidInputError, match="exactly one"):
        ChromaStore(model_name="m", path=tmp_path, url="http://127.0.0.1:1")
