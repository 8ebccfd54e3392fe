"""`python -m run.tokens parity [--corpus DIR ...] [--beir DIR ...] [--synthetic N]
[--hmm on|off|both] [--no-lexicon] [--workers N]`: prove the fast tokenizer's cut equal to
jieba's on whole corpora.

Every passage of each source is cut by jieba 0.42.1's own Python and by the compiled engine
(`text.impl=fast`) with the same settings and the same user dictionary (a native corpus's
`lexicon.jsonl`, added as a job adds it), and both the raw cut and the indexed tokens are
compared (`retrieval_bench.text.segment.parity`). `--corpus` is a native corpus folder
(`passages.jsonl`, optional `lexicon.jsonl`), `--beir` a BEIR folder, `--synthetic N` N
generated passages that exercise every branch of the cut (`segment.synthetic`, with the
lexicon of the last `--corpus` given, if any). `--workers N` compares in N processes (0: one
per core).

Exit 0: every passage identical (one line per source and setting); 4: a difference (the first
differing passage, its text and both token lists are printed); 2: bad input (a missing
folder, a malformed record, no compiled engine to compare); 3: internal error.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.passages import load_lexicon, load_passages
from retrieval_bench.errors import EXIT_OK, EXIT_TOKEN_DIFFERENCE, DataError
from retrieval_bench.records import passage_text
from run.exits import guarded


@dataclass
class Source:
    name: str
    ids: list[str]
    texts: list[str]
    words: tuple[str, ...] = ()
    canonical: tuple[tuple[str, str], ...] = ()


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits (2 bad input, 3 internal error) and 4
    for a difference."""
    return guarded(lambda: _main(argv))


def _native(folder: Path) -> Source:
    from retrieval_bench.text.tokenizer import lexicon_of

    if not (folder / "passages.jsonl").is_file():
        raise DataError(folder, "not a native corpus folder: no passages.jsonl")
    lexicon_path = folder / "lexicon.jsonl"
    entities = load_lexicon(lexicon_path) if lexicon_path.is_file() else ()
    passages = load_passages(folder / "passages.jsonl", {e.name for e in entities})
    words, canonical = lexicon_of(entities)
    return Source(
        str(folder),
        [p.id for p in passages],
        [passage_text(p) for p in passages],
        words,
        canonical,
    )


def _beir(folder: Path) -> Source:
    if not (folder / "corpus.jsonl").is_file():
        raise DataError(folder, "not a BEIR folder: no corpus.jsonl")
    passages = load_beir(folder).passages
    return Source(str(folder), [p.id for p in passages], [passage_text(p) for p in passages])


def _synthetic(count: int, like: Source | None) -> Source:
    from retrieval_bench.text.segment.synthetic import synthetic_passages
    from retrieval_bench.text.tokenizer import base_dictionary

    words = like.words if like else ()
    texts = synthetic_passages(count, base_dictionary()[0], words)
    name = f"synthetic {count:,}" + (f" (lexicon of {like.name})" if like else "")
    return Source(
        name, [f"synthetic-{i}" for i in range(count)], texts, words, like.canonical if like else ()
    )


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m run.tokens",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    parity = sub.add_parser("parity", help="compare the fast cut with jieba on whole corpora")
    parity.add_argument("--corpus", type=Path, action="append", default=[], help="native corpus")
    parity.add_argument("--beir", type=Path, action="append", default=[], help="BEIR folder")
    parity.add_argument("--synthetic", type=int, default=0, metavar="N", help="N passages")
    parity.add_argument("--hmm", choices=("on", "off", "both"), default="both")
    parity.add_argument("--no-lexicon", action="store_true", help="no user words")
    parity.add_argument("--workers", type=int, default=1, help="processes (0: one per core)")
    args = parser.parse_args(argv)
    if not (args.corpus or args.beir or args.synthetic):
        parser.error("give at least one --corpus DIR, --beir DIR or --synthetic N")
    if args.synthetic < 0:
        parser.error("--synthetic must be >= 0")
    native = [_native(folder) for folder in args.corpus]
    sources = native + [_beir(folder) for folder in args.beir]
    if args.synthetic:
        sources.append(_synthetic(args.synthetic, native[-1] if native else None))
    return check(sources, args.hmm, not args.no_lexicon, args.workers)


def check(sources: Sequence[Source], hmm: str, use_lexicon: bool, workers: int) -> int:
    """Each source under each HMM setting: one line per pair, the first difference printed."""
    from retrieval_bench.config.text import TextConfig
    from retrieval_bench.text.segment.engine import FAST_NAME
    from retrieval_bench.text.segment.parity import first_difference
    from retrieval_bench.text.tokenizer import Tokenizer

    for source in sources:
        for hmm_on in {"on": [True], "off": [False], "both": [True, False]}[hmm]:
            config = TextConfig(use_lexicon=use_lexicon, hmm=hmm_on, impl="fast_strict")
            config.workers = workers
            tokenizer = Tokenizer(config, source.words, source.canonical)
            assert tokenizer.impl == FAST_NAME  # fast_strict refused otherwise
            start = time.perf_counter()
            found = first_difference(
                tokenizer,
                source.texts,
                source.ids,
                config.resolved_workers(),
                f"parity {source.name}",
            )
            setting = f"hmm {'on' if hmm_on else 'off'}, {len(tokenizer.lexicon_words)} user words"
            if found is not None:
                print(f"DIFFERENT {source.name} ({setting}):\n{found.describe()}")
                return EXIT_TOKEN_DIFFERENCE
            chars = sum(map(len, source.texts))
            print(
                f"identical {source.name}: {len(source.texts):,} passages, {chars:,} characters "
                f"({setting}; {time.perf_counter() - start:.1f} s)"
            )
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
