"""The corpus side of `traditional` / `simplified`: a copy of a dataset whose passages are
converted by OpenCC too, as a separate dataset (a traditional-script corpus to run the original
queries, or their variants, against).

Only what is read as text is converted: passage titles and texts. Ids, metadata (cities, ACLs,
entity names) and labels stay as they are, so filters and labels still apply; a native lexicon
keeps its entities and gains the converted spelling of each name and alias as another alias, so
the tokenizer and the parser still know a converted mention."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.jsonl import read_jsonl
from retrieval_bench.data.passages import load_lexicon, load_passages
from retrieval_bench.errors import DataError
from retrieval_bench.io.atomic import atomic_write_text
from retrieval_bench.io.folders import holds_other_content
from retrieval_bench.io.strict_json import jsonl_text
from retrieval_bench.perturb.script import converter
from retrieval_bench.progress import progress


def _converted(path: Path, convert: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    records = [record for _, record in read_jsonl(path)]
    out = []
    for record in progress(f"converting {path.name}", len(records), "record", records):
        out.append(
            {k: convert(v) if k in fields and isinstance(v, str) else v for k, v in record.items()}
        )
    return out


def _lexicon(path: Path, convert: Any) -> list[dict[str, Any]]:
    """Each entity with the converted spellings of its name and aliases added as aliases."""
    out = []
    for _, record in read_jsonl(path):
        surfaces = [record["name"], *record.get("aliases", [])]
        extra = [convert(s) for s in surfaces if convert(s) not in surfaces]
        out.append({**record, "aliases": [*record.get("aliases", []), *dict.fromkeys(extra)]})
    return out


def convert_corpus(source: Path, fmt: str, out_dir: Path, config: str) -> list[Path]:
    """Write the converted dataset to `out_dir` (BEIR: corpus.jsonl converted, queries and
    qrels copied; native: passages.jsonl converted, lexicon.jsonl with converted aliases);
    returns the files written. The source is validated by its loader first; a file of
    `out_dir` that holds other content is refused before anything is written, not replaced."""
    convert = converter(config, "--corpus-opencc").convert
    if out_dir.resolve() == source.resolve():
        raise DataError(out_dir, "the converted corpus must go to another folder")
    texts: dict[str, str] = {}
    if fmt == "beir":
        load_beir(source)  # refuses a malformed folder with its file and line
        texts["corpus.jsonl"] = jsonl_text(
            _converted(source / "corpus.jsonl", convert, ("title", "text"))
        )
        for name in [
            "queries.jsonl",
            *(f"qrels/{p.name}" for p in (source / "qrels").glob("*.tsv")),
        ]:
            texts[name] = (source / name).read_text(encoding="utf-8")
    else:
        lexicon = source / "lexicon.jsonl"
        names = {e.name for e in load_lexicon(lexicon)} if lexicon.is_file() else set()
        load_passages(source / "passages.jsonl", names)
        texts["passages.jsonl"] = jsonl_text(
            _converted(source / "passages.jsonl", convert, ("title", "text"))
        )
        if lexicon.is_file():
            texts["lexicon.jsonl"] = jsonl_text(_lexicon(lexicon, convert))
    for name, text in texts.items():
        if holds_other_content(out_dir / name, text):
            raise DataError(
                out_dir / name,
                "exists with other content, which a converted corpus never replaces: pass "
                "another --corpus-out, or move the old folder away",
            )
    written = []
    for name, text in texts.items():
        atomic_write_text(out_dir / name, text)
        written.append(out_dir / name)
    if "lexicon.jsonl" in texts:
        load_lexicon(out_dir / "lexicon.jsonl")  # a converted alias two entities claim: refused
    return written
