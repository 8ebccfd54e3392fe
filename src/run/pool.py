"""`python -m run.pool DIR --depth K`: the judgment pool of finished jobs, for annotators.

DIR is a sweep folder, any folder above job folders, or one job folder (one dataset's jobs).
Writes `pool.jsonl` and `pool.csv` to `--out` (default DIR): per query, every passage in the
top K of any job's recorded stage (router baselines included) that carries no label, with the
query, the passage text, which job:stage ranked it where, and an empty `grade`.

`python -m run.pool --import FILLED --evalset EVALSET --corpus CORPUS_DIR [--grades 0,1]`
checks the filled pool (JSONL or CSV) and writes a new label snapshot beside EVALSET,
`<name>.<hash>.jsonl`, for `python -m run dataset.evalset=<snapshot>`; EVALSET stays as it is.

Exit 0 ok, 2 bad input (the message names file:line), 3 internal error. The work is done by
the library (`retrieval_bench.labels.pool`, `retrieval_bench.data.judgments`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from retrieval_bench.data.judgments import (
    DEFAULT_GRADES,
    corpus_ids,
    import_judgements,
)
from retrieval_bench.errors import EXIT_OK
from retrieval_bench.io.folders import check_output_dir
from retrieval_bench.labels.pool import pool_folders, write_pool
from run.exits import guarded
from run.options import grades_option


def main(argv: Sequence[str] | None = None) -> int:
    """The command, with the exit codes of run.exits (2 bad input, 3 internal error)."""
    return guarded(lambda: _main(argv))


def _main(argv: Sequence[str] | None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m run.pool",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("dir", nargs="?", type=Path, help="sweep, job folder, or folder above")
    parser.add_argument("--depth", type=int, help="pool the top K of every ranking")
    parser.add_argument(
        "--evalset", type=Path, help="labels to pool against / to import into (a native .jsonl)"
    )
    parser.add_argument("--out", type=Path, help="pool: output folder; import: snapshot path")
    parser.add_argument("--import", dest="filled", type=Path, help="a filled pool to import")
    parser.add_argument("--corpus", type=Path, help="import: the corpus folder of the evalset")
    parser.add_argument(
        "--grades",
        type=grades_option,
        default=DEFAULT_GRADES,
        help="import: the grade scale, e.g. 0,1,2 (default 0,1; > 0 is relevant)",
    )
    args = parser.parse_args(argv)
    if (args.dir is None) == (args.filled is None):
        parser.error("give either DIR --depth K (pool) or --import FILLED (import)")
    if args.filled is not None:
        if args.evalset is None or args.corpus is None:
            parser.error("--import needs --evalset EVALSET and --corpus CORPUS_DIR")
        if args.out is not None:  # the snapshot's path: its folder must be one
            check_output_dir(args.out.parent, "--out")
        result = import_judgements(
            args.filled, args.evalset, corpus_ids(args.corpus), args.grades, args.out
        )
        print(result.summary())
        return EXIT_OK
    if args.depth is None:
        parser.error("pooling needs --depth K")
    if args.out is not None:
        check_output_dir(args.out, "--out")
    pool = pool_folders(args.dir, args.depth, args.evalset)
    files = write_pool(pool, args.out or args.dir)
    print(pool.summary())
    print("wrote " + ", ".join(map(str, files)))
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
