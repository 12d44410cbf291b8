"""The Python example in the README runs as written."""

import re

from tests.conftest import REPO


def test_readme_python_example_runs(tmp_path, monkeypatch, capsys):
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (example,) = [block for block in re.findall(r"```python\n(.*?)```", readme, re.S) if "MemoryBank()" in block]
    monkeypatch.setenv("VECMEM_HOME", str(tmp_path / "home"))
    namespace: dict = {}
    exec(compile(example, "README.md", "exec"), namespace)
    printed = capsys.readouterr().out
    assert "concise coding style" in printed
    pack = namespace["pack"]
    assert set(pack.tokens) == {"system", "long_term", "short_term", "current"}
    assert "after wake from sleep" in pack.long_term
