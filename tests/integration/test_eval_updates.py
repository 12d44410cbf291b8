"""scripts/eval_updates.py on a few cases of its dev set, with the model-free embedder: it runs both write paths
and counts a case that fails as failing."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("eval_updates", REPO / "scripts" / "eval_updates.py")
assert spec is not None and spec.loader is not None
eval_updates = importlib.util.module_from_spec(spec)
spec.loader.exec_module(eval_updates)


def test_the_dev_set_is_scored_per_path_and_outcome(tmp_path, monkeypatch, capsys):
    cases = json.loads((REPO / "data" / "eval" / "updates.json").read_text(encoding="utf-8"))["cases"]
    picked = [next(c for c in cases if c["expect"] == expect) for expect in ("replace", "keep", "same")]
    wrong = dict(picked[1], id="wrong", expect="same")  # a keep case scored as "same" must fail
    data = tmp_path / "updates.json"
    data.write_text(json.dumps({"name": "few", "cases": [*picked, wrong]}, ensure_ascii=False), encoding="utf-8")
    monkeypatch.setenv("VECMEM_EMBED_MODEL", "hashed:384")
    assert eval_updates.main(["--data", str(data), "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "add_messages  replace" in out and "add           keep" in out
    assert "2 failing of 8" in out and "wrong" in out
