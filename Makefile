# vecmem — every target installs what it needs itself, so a fresh clone needs only `make demo` / `make test`.

PYTHON ?= $(shell command -v python3.11 2>/dev/null || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp
# torch first and pinned: an unpinned torch (pulled in by the sentence-transformers extra, which the suite needs for
# its second model, all-MiniLM-L6-v2) would be a multi-GB CUDA build. `pip install vecmem` alone brings no torch.
TORCH  ?= torch==2.13.0

export PIP_DISABLE_PIP_VERSION_CHECK := 1
# The tokenizers library warns on every fork after it has run; the test suite forks subprocesses.
export TOKENIZERS_PARALLELISM ?= false

.PHONY: install seed demo chat check lint typecheck contracts fast test torture browser postgres eval eval-one bench bench-cli bench-second-view bench-targets bench-users bench-ann bench-reindex bench-writes bench-mem0 bench-long-query clean help

SHARED_DATA ?= ../shared/data

help:
	@echo "make demo   - install, then a walk-through of retrieval on the seed memories (no network, no API key)"
	@echo "make test   - install, then the whole test suite"
	@echo "make torture - add, import, supersede, forget_all and reindex SIGKILLed VECMEM_TORTURE_ROUNDS times (default 100), each kill checked"
	@echo "make check  - ruff, mypy --strict, the import-layer contract and the fast unit lane (in-memory store, < 1 min)"
	@echo "make seed   - load data/seed_memories.jsonl into the store (VECMEM_HOME, default ~/.vecmem)"
	@echo "make chat   - seed if needed, then chat (python -m vecmem.chat); set OPENAI_BASE_URL/OPENAI_API_KEY for a model"
	@echo "make eval   - recall on the native and paraphrase sets (and LoCoMo, MADial-Bench when $(SHARED_DATA) holds them) per model, and the default model with the second view (EVAL_SECOND_VIEW); the update dev set per write path"
	@echo "make bench  - speed, memory and token figures on 5,000 synthetic memories (BENCH_ARGS=\"--n 100000\" for more)"
	@echo "make bench-cli - vecmem search/add/--help from the shell on 1,000 memories, each a new process, beside python -c pass (BENCH_CLI_ARGS=\"--owner --linger 60\" adds them through vecmem serve and with VECMEM_OWNER_LINGER)"
	@echo "make bench-targets - the speed targets of the default model and all-MiniLM-L6-v2 (BENCH_TARGETS_ARGS)"
	@echo "make bench-users - many small users: ingest against the model, search, RSS, disk (BENCH_USERS_ARGS)"
	@echo "make bench-ann - recall@10/@40 and latency of a user's own collection's HNSW against the exact scan (BENCH_ANN_ARGS)"
	@echo "make bench-reindex - reindex of 100,000 memories between two fake models, rate and wall time (BENCH_REINDEX_ARGS)"
	@echo "make bench-writes - acknowledged writes/s through 1, 2 and 4 workers on PostgreSQL and a Chroma server (BENCH_WRITES_ARGS)"
	@echo "make bench-mem0 - mem0 beside vecmem on 1,000 memories (installs mem0ai into $(MEM0_VENV))"
	@echo "make bench-long-query - what the longest query costs: searches of 20, 500 and 2,000 characters, Chinese and English"
	@echo "make install - create $(VENV) with torch ($(TORCH)), vecmem, its test extras, the sentence-transformers models and the LangGraph/LangChain adapters' packages"

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "vecmem needs Python 3.11 or newer")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet "$(TORCH)"
	$(BIN)/python -m pip install --quiet -e '.[test,eval,dev,langchain,sentence-transformers]'
	@touch $@

install: $(STAMP)

seed: install
	$(BIN)/vecmem seed

demo: install
	$(BIN)/python scripts/demo.py

chat: seed
	$(BIN)/python -m vecmem.chat $(CHAT_ARGS)

# The memory panel's test drives Debian's chromium and chromium-driver (apt-get, as root or through sudo), and
# its Chinese screenshots need a CJK font: fonts-noto-cjk when fontconfig knows of none.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q chromium chromium-driver \
	  || echo "vecmem: could not install chromium; the panel test will be skipped"; fi
	@if command -v fc-list >/dev/null && [ -z "$$(fc-list :lang=zh)" ]; then \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q fonts-noto-cjk \
	  || echo "vecmem: could not install fonts-noto-cjk; Chinese shows as boxes in the panel's screenshots"; fi

# The tests of several workers start their own PostgreSQL server from Debian's postgresql package (the state
# workers share, VECMEM_DATABASE_URL); vecmem itself needs it only when that variable is set.
postgres:
	@if ! ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && ! command -v postgres >/dev/null; then \
	  $(SUDO) apt-get update -q && $(SUDO) apt-get install -y -q postgresql \
	  || echo "vecmem: could not install postgresql; the tests of several workers will be skipped"; fi

# The fast lane: unit tests on the in-memory store and the conformance suite's in-memory half; no real Chroma,
# no model, no server.
FAST_MARKERS ?= not slow
check: lint typecheck contracts fast

lint: install
	$(BIN)/ruff check vecmem scripts tests

typecheck: install
	$(BIN)/mypy

contracts: install
	$(BIN)/lint-imports

fast: install
	$(BIN)/python -m pytest tests/unit tests/conformance -q -m "$(FAST_MARKERS)"

test: install browser postgres
	$(BIN)/python -m pytest

# writers of every kind SIGKILLed 100 times in a row on one store, each kill checked (tests/integration/test_torture.py)
VECMEM_TORTURE_ROUNDS ?= 100
torture: install
	VECMEM_TORTURE_ROUNDS=$(VECMEM_TORTURE_ROUNDS) $(BIN)/python -m pytest tests/integration/test_torture.py -q -s

BENCH_ARGS ?= --n 5000 --queries 200
bench: install
	$(BIN)/python scripts/bench.py $(BENCH_ARGS)

# A command line that answers at once (scripts/bench_cli.py): `vecmem search` (an English and a Chinese query),
# `vecmem add` and `vecmem --help` from the shell, each a new process, on a store of 1,000 memories, medians of 5
# beside the bare interpreter's start measured in the same run; --owner times them through `vecmem serve` too,
# --linger 60 with VECMEM_OWNER_LINGER=60 (the first command starts an owner the next ones go through).
BENCH_CLI_ARGS ?= --n 1000 --runs 5
# What the second dense view costs beside e5 alone (scripts/bench_second_view.py): ingest, warm search, disk, RSS,
# a new process's first search
BENCH_SECOND_VIEW_ARGS ?= --n 1000 --queries 150 --starts 3
bench-cli: install
	$(BIN)/python scripts/bench_cli.py $(BENCH_CLI_ARGS)

bench-second-view: install
	$(BIN)/python scripts/bench_second_view.py --data $(SHARED_DATA)/locomo/locomo10.json $(BENCH_SECOND_VIEW_ARGS)

# The speed targets (scripts/bench_targets.py) of the default model and of all-MiniLM-L6-v2, one after the other
# so their figures share the machine's load: 100,000 memories of which 1,000 are embedded for real (the rest's
# vectors synthesized), a 20,000-memory user's first search in a new process, `vecmem search` on a seeded store.
BENCH_TARGETS_ARGS ?= --n 100000 --embed-sample 1000 --queries 100 --skip-baseline --skip-startup
bench-targets: install
	for model in multilingual-e5-small all-MiniLM-L6-v2; do \
	  $(BIN)/python scripts/bench.py --targets --model $$model $(BENCH_TARGETS_ARGS) || exit 1; done

# Many small users (an app's end-users): ingest against the model's own rate, search over random users, RSS,
# disk and a raw Chroma collection with a user filter. The issue's size: BENCH_USERS_ARGS="--users 10000
# --per-user 20 --queries 300" (hours with multilingual-e5-small on two cores; add --embed-sample 10000 to embed
# 10,000 for real and synthesize the rest's vectors: about 50 minutes on a loaded machine).
BENCH_USERS_ARGS ?= --users 1000 --per-user 20 --queries 200
bench-users: install
	$(BIN)/python scripts/bench.py $(BENCH_USERS_ARGS)

# HNSW against the exact cosine scan, on LoCoMo turns embedded by the default model (cached in the temp folder)
# and, past their 5,882, synthetic neighbours of them. The figures behind DEDICATED_HNSW (about 10 minutes on
# two cores): BENCH_ANN_ARGS="--sizes 1000,6000,20000,50000,100000 --builds 100x16,200x32 --ef-search 100,150,200,400"
# (and --sizes 20000,100000 --builds 100x32,200x16 --ef-search 100,150,200)
BENCH_ANN_ARGS ?= --sizes 1000,6000,20000
bench-ann: install
	HF_HUB_OFFLINE=1 $(BIN)/python scripts/bench_ann.py $(BENCH_ANN_ARGS)

# `vecmem reindex` of a big store between two fast fake models (so vecmem's and Chroma's part, not a model's):
# memories/s, wall time, and that every memory came through once. BENCH_REINDEX_ARGS="--kill-at 0.5" SIGKILLs
# the first reindex halfway and resumes it.
BENCH_REINDEX_ARGS ?= --n 100000
bench-reindex: install
	$(BIN)/python scripts/bench_reindex.py $(BENCH_REINDEX_ARGS)

# Writes through several `vecmem serve` workers of one store (PostgreSQL state, a `chroma run` server, both started
# on 127.0.0.1 and stopped afterwards), with the model-free hashed:384 embedder so the store's path is measured:
# writes/s, p50/p95 latency, lost, stale and 5xx per worker count. BENCH_WRITES_ARGS="--workers 1,2 --seconds 30
# --model multilingual-e5-small": each worker embeds with the default model, its own batched rate printed beside.
BENCH_WRITES_ARGS ?= --workers 1,2,4 --seconds 20
bench-writes: install postgres
	$(BIN)/python scripts/bench_writes.py $(BENCH_WRITES_ARGS)

# mem0 beside vecmem on the same 1,000 memories and queries. mem0 lives in a venv of its own: it needs a
# protobuf older than the one vecmem's venv has. Its embedder is all-MiniLM-L6-v2 through sentence-transformers,
# hence that extra.
MEM0_VENV := .venv-mem0
$(MEM0_VENV)/.installed-stamp: pyproject.toml
	$(PYTHON) -m venv $(MEM0_VENV)
	$(MEM0_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(MEM0_VENV)/bin/python -m pip install --quiet "$(TORCH)"
	$(MEM0_VENV)/bin/python -m pip install --quiet -e '.[sentence-transformers]' "mem0ai==2.2.1"
	@touch $@

bench-mem0: $(MEM0_VENV)/.installed-stamp
	$(MEM0_VENV)/bin/python scripts/bench.py --n 1000 --queries 200 --mem0 1000 --skip-startup

# What the longest query costs (scripts/bench_long_query.py): a search reads at most 2,000 characters and embeds
# one pass of the model of each text, so its time is bounded whatever the text.
bench-long-query: install
	$(BIN)/python scripts/bench_long_query.py

# Each benchmark in dense, keyword and hybrid, with the default weights (0.6/0.2/0.2) and, as the papers report,
# similarity alone (1/0/0), both over one index, beside plain BM25 and plain cosine on the same data (--baselines).
EVAL := $(BIN)/python scripts/eval_hit_rate.py --mode dense keyword hybrid --baselines --quiet
# every benchmark with each model, the default first (EVAL_MODELS="multilingual-e5-small" for one), under the
# specified blend and the gated one (VECMEM_GATED_PRIORS), and similarity alone as the papers report
BLENDS := --weights 0.6 0.2 0.2 --gated-weights 0.6 0.2 0.2
EVAL_MODELS ?= multilingual-e5-small all-MiniLM-L6-v2
# and the default model again with the second dense view (VECMEM_SECOND_VIEW=use: e5 and USE fused), so both
# figures come from one run (EVAL_SECOND_VIEW= to leave it out)
EVAL_SECOND_VIEW ?= use
eval: install
	@for model in $(EVAL_MODELS); do echo "=== model: $$model"; \
	  $(MAKE) --no-print-directory eval-one VECMEM_EMBED_MODEL=$$model || exit 1; done
	@for view in $(EVAL_SECOND_VIEW); do echo "=== model: $(firstword $(EVAL_MODELS)), second view: $$view"; \
	  $(MAKE) --no-print-directory eval-one VECMEM_EMBED_MODEL=$(firstword $(EVAL_MODELS)) VECMEM_SECOND_VIEW=$$view \
	  || exit 1; done

eval-one:
	$(EVAL) --format vecmem --data data/eval/native_en.json $(BLENDS)
	$(EVAL) --format vecmem --data data/eval/native_zh.json $(BLENDS)
	$(EVAL) --format vecmem --data data/eval/paraphrase.json --weights 1 0 0 $(BLENDS)
	$(BIN)/python scripts/eval_updates.py --data data/eval/updates.json
	@if [ -f $(SHARED_DATA)/locomo/locomo10.json ]; then \
	  $(EVAL) --format locomo --data $(SHARED_DATA)/locomo/locomo10.json --weights 1 0 0 $(BLENDS); \
	else echo "LoCoMo not found in $(SHARED_DATA): skipped"; fi
	@if [ -d $(SHARED_DATA)/madial_bench ]; then \
	  for lang in zh en; do $(EVAL) --format madial --data $(SHARED_DATA)/madial_bench --lang $$lang \
	    --weights 1 0 0 $(BLENDS) || exit 1; done; \
	else echo "MADial-Bench not found in $(SHARED_DATA): skipped"; fi

clean:
	rm -rf $(VENV) $(MEM0_VENV) .pytest_cache build dist *.egg-info
