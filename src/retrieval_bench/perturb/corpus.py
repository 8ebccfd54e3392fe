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
    returns the files written. The source is validated by its loader first."""
    convert = converter(config, "--corpus-opencc").convert
    if out_dir.resolve() == source.resolve():
        raise DataError(out_dir, "the converted corpus must go to another folder")
    written: list[Path] = []
    if fmt == "beir":
        load_beir(source)  # refuses a malformed folder with its file and line
        atomic_write_text(
            out_dir / "corpus.jsonl",
            jsonl_text(_converted(source / "corpus.jsonl", convert, ("title", "text"))),
        )
        written.append(out_dir / "corpus.jsonl")
        for name in [
            "queries.jsonl",
            *(f"qrels/{p.name}" for p in (source / "qrels").glob("*.tsv")),
        ]:
            atomic_write_text(out_dir / name, (source / name).read_text(encoding="utf-8"))
            written.append(out_dir / name)
        return written
    lexicon = source / "lexicon.jsonl"
    names = {e.name for e in load_lexicon(lexicon)} if lexicon.is_file() else set()
    load_passages(source / "passages.jsonl", names)
    atomic_write_text(
        out_dir / "passages.jsonl",
        jsonl_text(_converted(source / "passages.jsonl", convert, ("title", "text"))),
    )
    written.append(out_dir / "passages.jsonl")
    if lexicon.is_file():
        atomic_write_text(out_dir / "lexicon.jsonl", jsonl_text(_lexicon(lexicon, convert)))
        written.append(out_dir / "lexicon.jsonl")
        load_lexicon(out_dir / "lexicon.jsonl")  # a converted alias two entities claim: refused
    return written
