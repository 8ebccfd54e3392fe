"""A docs page that names a config key or a command-line flag that does not exist, or an old
spelling of a renamed key, fails the build naming the page, the line and the nearest name
(docs/hooks/names_check.py); every page of docs/ passes."""

from __future__ import annotations

import sys

from conftest import ROOT

sys.path.insert(0, str(ROOT / "docs" / "hooks"))

import names_check

PAGE = """# A page

Set `arms.bm25.k1=1.2`, or `dense.nprobe`; `scoring.units` is a module, `tune.json` a file.
A typo in prose: `retriever.pool_sise=20`, an old key: `bm25.k1`.

```bash
python -m run retriever=bm25 arms.bm25.b=0.5 +arms.mine._target_=my.Spec hydra.run.dir=x
python -m run retriever=bm25 arms.bm25.k2=1 \\
  retriever.rrf_k=30
python -m run.pool outputs/multirun/x --depth 10 --outt pool.jsonl
python -m run.nothing --x
python -m run.tokens parity --corpus corpus/travel
```

<!-- docs-check: shows a mistake -->
```bash
python -m run retriever.poolsize=5
```
"""


def test_unknown_and_renamed_names_are_named_with_page_line_and_nearest() -> None:
    assert names_check.problems("how-to/x.md", PAGE) == [
        "docs/how-to/x.md:3: 'dense.nprobe' is an old spelling: write 'arms.dense.nprobe'",
        "docs/how-to/x.md:4: unknown config key 'retriever.pool_sise'; "
        "did you mean 'retriever.pool_size'?",
        "docs/how-to/x.md:4: 'bm25.k1' is an old spelling: write 'arms.bm25.k1'",
        "docs/how-to/x.md:8: unknown config key 'arms.bm25.k2'; did you mean 'k1'? "
        "(under arms.bm25)",
        "docs/how-to/x.md:8: 'retriever.rrf_k' is an old spelling: write 'combiners.rrf.k'",
        "docs/how-to/x.md:10: run.pool has no flag '--outt'; did you mean '--out'?",
        "docs/how-to/x.md:11: unknown tool 'python -m run.nothing'; did you mean 'run.tune'?",
    ]


def test_every_docs_page_names_only_known_keys_and_flags() -> None:
    docs = ROOT / "docs"
    found = [
        problem
        for page in sorted(docs.rglob("*.md"))
        if "hooks" not in page.relative_to(docs).parts
        for problem in names_check.problems(
            page.relative_to(docs).as_posix(), page.read_text(encoding="utf-8")
        )
    ]
    assert not found, "\n".join(found)
