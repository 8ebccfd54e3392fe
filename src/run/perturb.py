"""`python -m run.perturb EVALSET --kinds K1,K2 --out FILE`: a perturbed evaluation set.

Every query of EVALSET (a native `.jsonl` evaluation set, or a BEIR folder) gets one variant
per kind that can change it, written to FILE as a native evaluation set whose every record links
to its original (`meta.perturbed_from`, `meta.perturbation`: the kind, the library and what
changed) and carries its labels. Run it beside the originals with
`python -m run robustness.sets=[FILE]` (the dataset's own queries). The work is
`retrieval_bench.perturb`'s; a kind that changed no query is named with its count, and the rest
is written (exit 0); an unknown kind or a rate outside (0, 1] exits 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.config.robustness import ENTITY_MODES, KINDS, check_kinds, check_rate
from retrieval_bench.data.beir import load_beir
from retrieval_bench.data.evalset import load_evalset
from retrieval_bench.data.passages import load_lexicon
from retrieval_bench.errors import ConfigError, DataError
from retrieval_bench.io.folders import check_output_dir
from retrieval_bench.records import Entity, EvalQuery
from run.exits import guarded


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits for whatever escapes it."""
    return guarded(lambda: _main(argv))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m run.perturb",
        description="Write an evaluation set of perturbed variants of EVALSET's queries.",
    )
    parser.add_argument(
        "evalset", type=Path, help="a native evaluation set (.jsonl) or a BEIR folder"
    )
    parser.add_argument("--kinds", required=True, help=f"comma-separated, of: {', '.join(KINDS)}")
    parser.add_argument("--out", type=Path, required=True, help="the perturbed set to write")
    parser.add_argument(
        "--rate", type=float, default=0.2, help="homophone: share of characters replaced, in (0, 1]"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--entities",
        choices=ENTITY_MODES,
        default="protect",
        help="too: perturb inside lexicon entities",
    )
    parser.add_argument("--truncate-chars", type=int, default=6, help="truncate: characters kept")
    parser.add_argument(
        "--corpus",
        type=Path,
        help="native: the corpus folder (its lexicon.jsonl names the entities)",
    )
    parser.add_argument("--split", default="test", help="BEIR: the qrels split (default test)")
    parser.add_argument(
        "--opencc-traditional", default="s2t", help="OpenCC configuration of `traditional`"
    )
    parser.add_argument(
        "--opencc-simplified", default="t2s", help="OpenCC configuration of `simplified`"
    )
    parser.add_argument(
        "--corpus-out",
        type=Path,
        help="also write the corpus converted by OpenCC (--corpus-opencc) to this folder, "
        "as a separate dataset",
    )
    parser.add_argument(
        "--corpus-opencc", default="s2t", help="OpenCC configuration of --corpus-out"
    )
    return parser


def _check_paths(args: argparse.Namespace) -> None:
    """Before any work: the input is never the output, `--out` can be a file, and a `--corpus`
    that is not a folder is refused (ignored, it would leave every entity unprotected)."""
    out, source = args.out, args.evalset
    inputs = [source, *([source / "queries.jsonl"] if source.is_dir() else [])]
    if any(out.exists() and path.exists() and out.samefile(path) for path in inputs):
        raise ConfigError(
            "--out",
            f"{out} is the evaluation set being perturbed; write the variants to another file",
        )
    if out.is_dir():
        raise ConfigError("--out", f"{out} is a folder; name the file to write")
    check_output_dir(out.parent, "--out")
    if args.corpus is not None and not args.corpus.is_dir():
        raise ConfigError(
            "--corpus",
            f"{args.corpus} is not a folder (the corpus whose lexicon.jsonl names the "
            "entities kept out of perturbation)",
        )
    if args.corpus_out is not None:
        check_output_dir(args.corpus_out, "--corpus-out")


def _read(args: argparse.Namespace) -> tuple[str, Path, list[EvalQuery], tuple[Entity, ...]]:
    """(format, corpus source, queries, lexicon entities) of the input."""
    if args.evalset.is_dir():
        dataset = load_beir(args.evalset, split=args.split)
        return "beir", args.evalset, list(dataset.queries), dataset.entities
    queries = load_evalset(args.evalset)
    entities: tuple[Entity, ...] = ()
    if args.corpus is not None:
        lexicon = args.corpus / "lexicon.jsonl"
        entities = load_lexicon(lexicon) if lexicon.is_file() else ()
        if not entities:
            print(f"warning: {lexicon} names no entity: none is kept out", file=sys.stderr)
    elif args.corpus_out is not None:
        raise ConfigError("--corpus-out", "a native evaluation set needs --corpus DIR to convert")
    return "native", args.corpus or Path(), queries, entities


def _main(argv: Sequence[str] | None) -> int:
    args = _parser().parse_args(argv)
    kinds = [k.strip() for k in args.kinds.split(",") if k.strip()]
    if not kinds:
        raise ConfigError("--kinds", f"names no kind; of: {', '.join(KINDS)}")
    check_kinds(kinds, "--kinds")
    check_rate(args.rate, "--rate")
    if args.truncate_chars < 1:
        raise ConfigError(
            "--truncate-chars", f"must be a positive integer, got {args.truncate_chars}"
        )
    _check_paths(args)
    fmt, source, queries, entities = _read(args)
    if not queries:
        raise DataError(args.evalset, "holds no query to perturb")
    from retrieval_bench.config.robustness import RobustnessConfig
    from retrieval_bench.perturb.dataset import settings_of
    from retrieval_bench.perturb.evalset import perturb_queries, write_perturbed
    from retrieval_bench.perturb.kinds import build_kinds

    node = RobustnessConfig(
        kinds=kinds,
        rate=args.rate,
        seed=args.seed,
        entities=args.entities,
        truncate_chars=args.truncate_chars,
        opencc_traditional=args.opencc_traditional,
        opencc_simplified=args.opencc_simplified,
    )
    settings = settings_of(node, entities, "--")
    variants, reports = perturb_queries(queries, build_kinds(kinds, settings, "--kinds"), args.seed)
    for report in reports:
        print(report.line(), flush=True)
        if not report.variants:
            print(f"warning: kind {report.kind} changed no query", file=sys.stderr)
    if not variants:
        raise DataError(args.evalset, "no kind changed any query: nothing to write")
    write_perturbed(args.out, variants)
    print(f"wrote {len(variants)} variants of {len(queries)} queries to {args.out}", flush=True)
    if args.corpus_out is not None:
        from retrieval_bench.perturb.corpus import convert_corpus

        files = convert_corpus(source, fmt, args.corpus_out, args.corpus_opencc)
        print(
            f"wrote the corpus converted by OpenCC ({args.corpus_opencc}): "
            f"{', '.join(str(f) for f in files)}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
