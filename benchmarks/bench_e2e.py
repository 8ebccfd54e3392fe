"""End to end: the whole job (load, tokenise, index, retrieve, score, write) at 100k and 1M.

    .venv/bin/python benchmarks/bench_e2e.py                  # 100k and 1M, BM25 and dense
    .venv/bin/python benchmarks/bench_e2e.py --quick          # 2k passages, 50 queries
    .venv/bin/python benchmarks/bench_e2e.py --sizes 1000000 --jobs bm25

Per size it writes a native dataset outside the repository (`--workdir`, default /tmp):
`corpus/<name>/passages.jsonl` (Chinese text from chinese_corpus.py: cmrc2018 chunks, then
synthetic passages drawn from cmrc2018's token statistics), `corpus/<name>/lexicon.jsonl` and
`evalsets/<name>.jsonl` with `--queries` labelled queries (each made of words of one passage,
which is its relevant passage), plus precomputed vectors for the dense job (dense_vectors.py:
passages around real-embedding anchors, each query near its relevant passage). A dataset
already written with the same settings is reused; generating it is not part of any job.

Each job is the app itself (`python -m run ...`, Hydra composition, `run_job`, `write_job`,
console summary) in a child process of its own, from an empty cache, so that its RSS is its
own. Inside the child the project's phases are metered as they happen: the job's own phase timer
(load, index, retrieve, score), the token cache's `tokenize_corpus` (tokenise, carved out of
the BM25 index phase) and `write_job` (write); "other" is the rest of the child's wall time
(interpreter and imports, Hydra, building the pipeline, the console summary). Memory is the
resident set (RSS, the process plus any worker processes it starts), sampled 20 times a second
while each phase runs, and `getrusage` maxrss (the process's exact high-water mark) at the end
of each phase. The job's progress lines (progress.py) are printed as the app prints them.

Jobs: `bm25` (retriever=bm25), and `dense` from precomputed vectors with an IVF index
(retriever=dense encoder=precomputed arms.dense.index=IVF<sqrt n>,Flat, recall against exact Flat in
the manifest). Where this checkout has no `encoder=precomputed`, the dense job is measured
through the project's DenseRetriever (the dense arm's FAISS code) on the same vectors: load,
index and retrieve only, and the output says so.

Printed per job and size: one `RESULT e2e` line per phase (`wall_s`, `peak_rss_mib`), a total,
the growth from the previous size per phase (`ratio` of wall time and of peak RSS), and for the
largest size the issue's targets (BM25: 10 minutes and 8 GB; dense: 5 minutes and IVF
recall@10 >= 0.95 against exact).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

ROOT = Path(__file__).resolve().parents[1]
PHASES = ("load", "tokenise", "index", "retrieve", "score", "write", "other")
# The job timer's phase names (experiment._Timer) as reported here.
JOB_PHASES = {"index_bm25": "index", "index_dense": "index"}
# bm25: the compiled cut (text.impl=fast, the default); bm25-jieba: the same job with
# text.impl=jieba, for the side-by-side figure. 1M targets, then those from 10M passages on.
TARGETS = {
    "bm25": {"wall_s": 150.0, "rss_gib": 8.0},
    "bm25-jieba": {"wall_s": 600.0, "rss_gib": 8.0},
    "dense": {"wall_s": 300.0, "recall": 0.95},
}
TARGETS_10M = {
    "bm25": {"wall_s": 2400.0, "rss_gib": 20.0},
    "bm25-jieba": {"wall_s": 2400.0, "rss_gib": 20.0},
    "dense": {"wall_s": 2400.0, "rss_gib": 16.0},
}
SAMPLE_S = 0.05
DATASET_FORMAT = 1


# --- the dataset ----------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetFiles:
    """Where one generated dataset lives (everything the app and the precomputed encoder read)."""

    root: Path
    name: str

    @property
    def corpus(self) -> Path:
        return self.root / "corpus" / self.name

    @property
    def evalset(self) -> Path:
        return self.root / "evalsets" / f"{self.name}.jsonl"

    @property
    def vectors(self) -> Path:
        return self.root / "vectors" / self.name

    @property
    def marker(self) -> Path:
        return self.root / f"{self.name}.done.json"


def _query_words(tokens: list[str], rng: np.random.Generator) -> list[str]:
    """5-9 words of the passage, in passage order: a keyword query for that passage."""
    words = [t for t in tokens if t.strip()]
    take = min(len(words), int(rng.integers(5, 10)))
    keep = np.sort(rng.choice(len(words), take, replace=False))
    return [words[i] for i in keep]


def _pid(i: int) -> str:
    return f"p{i:07d}"


def write_dataset(
    files: DatasetFiles, n: int, n_queries: int, dim: int, synthetic: bool, seed: int = 0
) -> dict[str, Any]:
    """Write the native dataset and its vectors (reused when already written with these
    settings); returns what was generated."""
    settings = {"format": DATASET_FORMAT, "n": n, "queries": n_queries, "dim": dim, "seed": seed}
    settings["synthetic"] = synthetic
    if files.marker.exists():
        done = json.loads(files.marker.read_text())
        if done.get("settings") == settings:
            return done
    from chinese_corpus import corpus_stream
    from dense_vectors import VectorSpace, sample_around

    start = time.perf_counter()
    # Streamed: the passages are written as they are generated; only the tokens the queries
    # and the lexicon are drawn from are kept (10M passages would not fit in memory at once).
    corpus = corpus_stream(n, 0, seed=seed, synthetic_only=synthetic)
    rng = np.random.default_rng(seed + 1)
    targets = rng.choice(n, n_queries, replace=False)
    keep = set(targets.tolist()) | set(range(min(n, 2000)))
    kept: dict[int, list[str]] = {}
    for path in (files.corpus, files.evalset.parent, files.vectors):
        path.mkdir(parents=True, exist_ok=True)
    with (files.corpus / "passages.jsonl").open("w", encoding="utf-8") as fh:
        i = 0
        for part in corpus.chunks():
            for tokens in part:
                text = json.dumps({"id": _pid(i), "text": "".join(tokens)}, ensure_ascii=False)
                fh.write(text + "\n")
                if i in keep:
                    kept[i] = tokens
                i += 1

    def tokens_of(i: int) -> list[str]:
        return kept[i] if i in kept else corpus.tokens(i)

    queries: list[dict[str, Any]] = []
    seen: set[str] = set()
    for qi, target in enumerate(targets.tolist()):
        text = "".join(_query_words(tokens_of(target), rng))
        while text in seen or not text:  # query texts are unique (the dense arm keys on them)
            target = int(rng.integers(0, n))
            targets[qi] = target
            text = "".join(_query_words(tokens_of(target), rng))
        seen.add(text)
        queries.append(
            {
                "query_id": f"q{qi:05d}",
                "query": text,
                "query_type": ("keywords", "phrase")[qi % 2],
                "label_status": "reviewed",
                "relevant_ids": [_pid(target)],
            }
        )
    # A lexicon of 100 two-character words of the corpus (entities the tokenizer keeps whole).
    vocabulary = sorted({t for i in range(min(n, 2000)) for t in kept[i] if len(t) >= 2})
    names = [vocabulary[i] for i in rng.choice(len(vocabulary), 100, replace=False)]
    with (files.corpus / "lexicon.jsonl").open("w", encoding="utf-8") as fh:
        for name in names:
            fh.write(json.dumps({"name": name, "type": "term"}, ensure_ascii=False) + "\n")
    with files.evalset.open("w", encoding="utf-8") as fh:
        for query in queries:
            fh.write(json.dumps(query, ensure_ascii=False) + "\n")
    n_tokens = corpus.n_tokens
    source = corpus.source
    kept.clear()
    space = VectorSpace.build(dim, seed)
    passages = sample_around(space.passages, n, 1.0, rng, space.basis)
    np.save(files.vectors / "passages.npy", passages)
    near = sample_around(passages, n_queries, 0.3, rng, space.basis, rows_of=targets)
    np.save(files.vectors / "queries.npy", near)
    del passages
    with (files.vectors / "passage_ids.txt").open("w") as fh:
        for lo in range(0, n, 100_000):
            fh.write("".join(_pid(i) + "\n" for i in range(lo, min(n, lo + 100_000))))
    qids = "\n".join(q["query_id"] for q in queries) + "\n"
    (files.vectors / "query_ids.txt").write_text(qids)
    done = {
        "settings": settings,
        "tokens": n_tokens,
        "source": source,
        "vectors": space.source,
        "seconds": round(time.perf_counter() - start, 1),
    }
    files.marker.write_text(json.dumps(done))
    return done


# --- the child: one job, metered -------------------------------------------------------------


def _rss_bytes(proc: Any) -> int:
    """The process's resident set plus its worker processes' (tokenising or encoding pools)."""
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        with contextlib.suppress(Exception):  # a worker may exit between listing and reading
            total += child.memory_info().rss
    return int(total)


def _maxrss_bytes() -> int:
    """getrusage's high-water mark (kilobytes on Linux) of this process and of its reaped
    children (the largest one)."""
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return int(max(own, children)) * 1024


class PhaseMeter:
    """Wall time (own time: a nested phase's time is its own) and peak RSS per named phase."""

    def __init__(self) -> None:
        import psutil

        self._proc = psutil.Process()
        self._stack: list[str] = []
        self._since = time.perf_counter()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.wall: dict[str, float] = {}
        self.peak: dict[str, int] = {}
        self.maxrss_at_end: dict[str, int] = {}
        self._thread = threading.Thread(target=self._sample_loop, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()
        with self._lock:
            self._credit()

    def _current(self) -> str:
        return self._stack[-1] if self._stack else "other"

    def _credit(self) -> None:  # caller holds the lock
        now = time.perf_counter()
        name = self._current()
        self.wall[name] = self.wall.get(name, 0.0) + now - self._since
        self._since = now

    def _sample(self) -> None:
        rss = _rss_bytes(self._proc)
        with self._lock:
            name = self._current()
            self.peak[name] = max(self.peak.get(name, 0), rss)

    def _sample_loop(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self._sample()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._sample()  # the memory this phase starts from belongs to the one before
        with self._lock:
            self._credit()
            self._stack.append(name)
        try:
            yield
        finally:
            self._sample()
            with self._lock:
                self._credit()
                self._stack.pop()
                self.maxrss_at_end[name] = _maxrss_bytes()


def _metered(meter: PhaseMeter, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with meter.phase(name):
            return fn(*args, **kwargs)

    return wrapper


def child_app(out: Path, overrides: list[str]) -> int:
    """Run the app (`python -m run OVERRIDES`) with its phases metered; write them to `out`."""
    import retrieval_bench.job.runner as experiment
    import retrieval_bench.text.token_cache as token_cache
    import run.__main__ as app

    meter = PhaseMeter()
    job_phase = experiment._Timer.phase

    @contextlib.contextmanager
    def phase(timer: Any, name: str) -> Iterator[None]:
        with meter.phase(JOB_PHASES.get(name, name)), job_phase(timer, name):
            yield

    experiment._Timer.phase = phase  # type: ignore[method-assign,assignment]
    # The BM25 arm reads token_cache.tokenize_corpus when it builds.
    token_cache.tokenize_corpus = _metered(meter, "tokenise", token_cache.tokenize_corpus)
    app.write_job = _metered(meter, "write", app.write_job)
    meter.start()
    sys.argv = ["run", *overrides]
    code = app.main()
    meter.stop()
    _write_meter(out, meter, code, {})
    return code


def prefill_token_cache(files: DatasetFiles, cache: Path, synthetic: bool, seed: int = 0) -> None:
    """`--tokens-from-generator`: put the generator's own token lists in the job's token cache
    under the key of the job's texts and tokenizer, so the job skips jieba (its tokenise phase
    becomes a cache read) and the other phases can be measured at a size where tokenising takes
    too long on a busy machine. The index is then built on the generator's tokens, which jieba
    would split a little differently; the printed results say so."""
    from chinese_corpus import build_corpus

    from retrieval_bench.config.text import TextConfig
    from retrieval_bench.data.passages import load_lexicon
    from retrieval_bench.text.token_cache import TokenizedCorpus, _write, token_cache_key
    from retrieval_bench.text.tokenizer import cached_tokenizer, lexicon_of

    with (files.corpus / "passages.jsonl").open(encoding="utf-8") as fh:
        texts = [json.loads(line)["text"] for line in fh]
    entities = load_lexicon(files.corpus / "lexicon.jsonl")
    identity = cached_tokenizer(TextConfig(), *lexicon_of(entities)).identity()
    key = token_cache_key(identity, texts)
    corpus = build_corpus(len(texts), 0, seed=seed, synthetic_only=synthetic)
    assert ["".join(tokens) for tokens in corpus.passages] == texts, "not this dataset's text"
    path = cache / "tokens" / key[:2] / f"{key}.npz"
    path.parent.mkdir(parents=True, exist_ok=True)
    _write(path, TokenizedCorpus.from_tokens(corpus.passages))


def child_index(out: Path, vectors: Path, index: str, nprobe: int, train_size: int) -> int:
    """Without `encoder=precomputed` in this checkout: the dense arm's own FAISS code on the
    same vectors (load, index, retrieve)."""
    from retrieval_bench.retrievers.dense import DenseRetriever
    from retrieval_bench.retrievers.dense_index import DenseIndexConfig

    meter = PhaseMeter()
    meter.start()
    with meter.phase("load"):
        passages = np.load(vectors / "passages.npy")
        ids = (vectors / "passage_ids.txt").read_text().split()
        queries = np.load(vectors / "queries.npy")
    config = DenseIndexConfig(index=index, nprobe=nprobe, train_size=train_size)
    with meter.phase("index"):
        retriever = DenseRetriever(ids, passages, lambda texts: queries, config, None)
    texts = [str(i) for i in range(len(queries))]
    with meter.phase("retrieve"):
        retriever.search(texts, 10, [None] * len(texts))
    meter.stop()
    _write_meter(out, meter, 0, {"dense_index": retriever.index_info()})
    return 0


def _write_meter(out: Path, meter: PhaseMeter, code: int, extra: dict[str, Any]) -> None:
    record = {
        "code": code,
        "wall": meter.wall,
        "peak": meter.peak,
        "maxrss_at_end": meter.maxrss_at_end,
        "maxrss": _maxrss_bytes(),
        **extra,
    }
    out.write_text(json.dumps(record))


# --- the parent: datasets, jobs, tables ------------------------------------------------------


def dataset_in_child(
    files: DatasetFiles, n: int, n_queries: int, dim: int, synthetic: bool
) -> dict[str, Any]:
    """write_dataset in a process of its own: generating 1M passages takes gigabytes, and a
    job started by a large process inherits that process's high-water mark as its own
    `getrusage` maxrss (Linux keeps it across exec), so this process stays small."""
    flag = "synthetic" if synthetic else "cmrc2018"
    args = [files.root, files.name, n, n_queries, dim, flag]
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child-dataset", *map(str, args)]
    subprocess.run(cmd, cwd=ROOT, check=True)
    return dict(json.loads(files.marker.read_text()))


def has_text_workers() -> bool:
    """Whether this checkout tokenises in parallel (`text.workers`)."""
    from dataclasses import fields

    from retrieval_bench.config.text import TextConfig

    return any(f.name == "workers" for f in fields(TextConfig))


def has_precomputed_encoder() -> bool:
    from retrieval_bench.config import encoder

    return hasattr(encoder, "PRECOMPUTED")


def ivf_settings(n: int) -> tuple[str, int, int]:
    """(factory, nprobe, train_size): nlist ~ sqrt(n), 64 training vectors per list (seconds
    of k-means at 1M), nprobe 64 (recall@10 ~0.96 against exact at 1M in bench_scale.py)."""
    nlist = max(16, int(math.sqrt(n)) // 16 * 16)
    return f"IVF{nlist},Flat", min(64, nlist), 64 * nlist


def job_command(
    kind: str, files: DatasetFiles, n: int, work: Path, out: Path, text_workers: int | None
) -> list[str]:
    me = [sys.executable, str(Path(__file__).resolve())]
    index, nprobe, train_size = ivf_settings(n)
    if kind == "dense" and not has_precomputed_encoder():
        return [*me, "--child-index", str(out), str(files.vectors), index, str(nprobe)]
    overrides = [
        f"dataset.name={files.name}",
        "dataset.format=native",
        f"dataset.corpus={files.corpus}",
        f"dataset.evalset={files.evalset}",
        f"cache_dir={work / 'cache'}",
        f"hydra.run.dir={work / 'job'}",
        "compare.enabled=false",
    ]
    if kind.startswith("bm25"):
        overrides.append("retriever=bm25")
        if text_workers is not None and has_text_workers():
            overrides.append(f"text.workers={text_workers}")
        if kind == "bm25-jieba":
            overrides.append("text.impl=jieba")
    else:
        overrides += [
            "retriever=dense",
            "encoder=precomputed",
            f"encoder.path={files.vectors / 'passages.npy'}",
            f"encoder.ids_path={files.vectors / 'passage_ids.txt'}",
            f"encoder.query_path={files.vectors / 'queries.npy'}",
            f"encoder.query_ids_path={files.vectors / 'query_ids.txt'}",
            f"arms.dense.index='{index}'",
            f"arms.dense.nprobe={nprobe}",
            f"arms.dense.train_size={train_size}",
        ]
    return [*me, "--child-app", str(out), "--", *overrides]


def run_job(
    kind: str,
    files: DatasetFiles,
    n: int,
    n_queries: int,
    text_workers: int | None,
    reuse: bool = False,
    tokens_from_generator: bool = False,
) -> dict[str, Any]:
    """One job in a child process, from an empty cache and job folder; with `reuse`, the
    record a previous run of this script saved for the same job on the same dataset."""
    work = files.root / "jobs" / f"{files.name}-{kind}"
    settings = json.loads(files.marker.read_text())["settings"]
    saved = work / "record.json"
    if reuse and saved.exists():
        record = json.loads(saved.read_text())
        same = record.get("settings") == settings and record.get("text_workers") == text_workers
        if same and record.get("tokens_from_generator", False) == tokens_from_generator:
            print(f"\n== {kind} job, {n:,} passages: measured earlier, from {saved}")
            return dict(record)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    if kind == "bm25" and tokens_from_generator:
        flag = "synthetic" if settings["synthetic"] else "cmrc2018"
        me = [sys.executable, str(Path(__file__).resolve())]
        args = [str(files.root), files.name, str(work / "cache"), flag]
        print(f"\n== filling the token cache with the generator's tokens ({n:,} passages)")
        subprocess.run([*me, "--child-prefill", *args], cwd=ROOT, check=True)
    out = work / "meter.json"
    cmd = job_command(kind, files, n, work, out, text_workers)
    if kind == "dense" and not has_precomputed_encoder():
        cmd.append(str(ivf_settings(n)[2]))
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    load_before = os.getloadavg()[0]
    print(f"\n== {kind} job, {n:,} passages: {' '.join(cmd[2:])}", flush=True)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, check=False)
    total = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"the {kind} job at {n:,} passages failed (exit {proc.returncode})")
    record = json.loads(out.read_text())
    record["total"] = total
    record["kind"] = kind
    record["n"] = n
    record["job_dir"] = str(work / "job")
    if (work / "job" / "metrics.json").exists():
        metrics = json.loads((work / "job" / "metrics.json").read_text())
        record["scored"] = metrics["stages"]["final"]["counts"]["scored"]
        manifest = json.loads((work / "job" / "manifest.json").read_text())
        record["dense_index"] = manifest.get("dense_index")
        if record["scored"] != n_queries:
            raise SystemExit(f"the {kind} job scored {record['scored']} of {n_queries} queries")
    load = os.getloadavg()
    record.update(settings=settings, text_workers=text_workers)
    if kind.startswith("bm25"):
        record.update(tokens_from_generator=tokens_from_generator)
    record.update(load_before=load_before, load_after=load[0])
    saved.write_text(json.dumps(record))
    return record


def phase_rows(record: dict[str, Any]) -> dict[str, tuple[float, float]]:
    """phase -> (wall s, peak RSS MiB); "other" is the child's wall time outside the phases."""
    rows = {}
    inside = 0.0
    for name in PHASES[:-1]:
        if name in record["wall"]:
            wall = record["wall"][name]
            inside += wall
            rows[name] = (wall, record["peak"].get(name, 0) / 2**20)
    rows["other"] = (record["total"] - inside, record["peak"].get("other", 0) / 2**20)
    return rows


def report(records: list[dict[str, Any]], n_queries: int) -> None:
    for kind in dict.fromkeys(r["kind"] for r in records):
        mine = [r for r in records if r["kind"] == kind]
        print(f"\n{kind}: wall s / peak RSS MiB per phase (RSS sampled every {SAMPLE_S}s)")
        header = f"{'passages':>10}" + "".join(f"{p:>17}" for p in PHASES) + f"{'total':>17}"
        print(header + f"{'maxrss MiB':>12}")
        print("-" * (len(header) + 12))
        for r in mine:
            rows = phase_rows(r)
            cells = "".join(
                f"{rows[p][0]:>9.1f} /{rows[p][1]:>6.0f}" if p in rows else f"{'-':>17}"
                for p in PHASES
            )
            peak = max(v[1] for v in rows.values())
            print(
                f"{r['n']:>10,}{cells}{r['total']:>9.1f} /{peak:>6.0f}{r['maxrss'] / 2**20:>12.0f}"
            )
        for r in mine:
            rows = phase_rows(r)
            for name, (wall, rss) in rows.items():
                print(
                    f"RESULT e2e job={kind} passages={r['n']} queries={n_queries} phase={name} "
                    f"wall_s={wall:.3f} peak_rss_mib={rss:.1f}"
                )
            peak = max(v[1] for v in rows.values())
            extra = f" scored={r['scored']}" if "scored" in r else ""
            if r.get("tokens_from_generator"):
                extra += " tokenise=token_cache_prefilled_by_generator"
            if "load_after" in r:
                extra += f" load_before={r['load_before']:.2f} load_after={r['load_after']:.2f}"
            recall = _recall(r)
            if recall is not None:
                extra += f" recall_vs_exact@10={recall:.4f}"
            print(
                f"RESULT e2e job={kind} passages={r['n']} queries={n_queries} phase=total "
                f"wall_s={r['total']:.3f} peak_rss_mib={peak:.1f} "
                f"maxrss_mib={r['maxrss'] / 2**20:.1f}{extra}"
            )
        for lo, hi in itertools.pairwise(mine):
            a, b = phase_rows(lo), phase_rows(hi)
            a["total"] = (lo["total"], max(v[1] for v in a.values()))
            b["total"] = (hi["total"], max(v[1] for v in b.values()))
            for name in b:
                if name in a and a[name][0] > 0 and a[name][1] > 0:
                    print(
                        f"RESULT e2e growth job={kind} from={lo['n']} to={hi['n']} phase={name} "
                        f"wall_ratio={b[name][0] / a[name][0]:.2f} "
                        f"rss_ratio={b[name][1] / a[name][1]:.2f}"
                    )
        _targets(mine[-1])


def _recall(record: dict[str, Any]) -> float | None:
    info = record.get("dense_index") or {}
    value = info.get("recall_vs_exact@10")
    return None if value is None else float(value)


def _targets(r: dict[str, Any]) -> None:
    target = {**TARGETS[r["kind"]], **(TARGETS_10M[r["kind"]] if r["n"] >= 10**7 else {})}
    peak_gib = max(v[1] for v in phase_rows(r).values()) / 1024
    checks = [r["total"] <= target["wall_s"]]
    line = (
        f"RESULT e2e target job={r['kind']} passages={r['n']} wall_s={r['total']:.1f} "
        f"limit_s={target['wall_s']:.0f} peak_rss_gib={peak_gib:.2f}"
    )
    if "rss_gib" in target:
        line += f" limit_gib={target['rss_gib']:.0f}"
        checks.append(peak_gib <= target["rss_gib"])
    if "recall" in target:
        recall = _recall(r)
        shown = "n/a" if recall is None else f"{recall:.4f}"
        line += f" recall_vs_exact@10={shown} min_recall=0.95"
        checks.append(recall is not None and recall >= target["recall"])
    print(f"{line} met={'yes' if all(checks) else 'no'}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--child-app"]:
        return child_app(Path(argv[1]), argv[3:] if argv[2:3] == ["--"] else argv[2:])
    if argv[:1] == ["--child-dataset"]:
        root, name, n, n_queries, dim, synthetic = argv[1:7]
        files = DatasetFiles(Path(root), name)
        write_dataset(files, int(n), int(n_queries), int(dim), synthetic == "synthetic")
        return 0
    if argv[:1] == ["--child-prefill"]:
        files = DatasetFiles(Path(argv[1]), argv[2])
        prefill_token_cache(files, Path(argv[3]), argv[4] == "synthetic")
        return 0
    if argv[:1] == ["--child-index"]:
        return child_index(Path(argv[1]), Path(argv[2]), argv[3], int(argv[4]), int(argv[5]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default=None, help="default 100000,1000000 (--quick: 2000)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument(
        "--jobs",
        default="bm25,dense",
        help="comma-separated: bm25 (text.impl=fast), bm25-jieba (text.impl=jieba), dense",
    )
    parser.add_argument("--dim", type=int, default=512)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp"))
    parser.add_argument(
        "--text-workers",
        type=int,
        default=0,
        help="text.workers for the BM25 job (0: one per core; -1: leave the config's), where "
        "this checkout tokenises in parallel",
    )
    parser.add_argument(
        "--reuse-finished",
        action="store_true",
        help="report jobs this script already ran on the same datasets instead of rerunning them",
    )
    parser.add_argument(
        "--tokens-from-generator",
        default="",
        help="sizes (comma-separated) whose BM25 job starts with the generator's tokens in its "
        "token cache instead of running jieba (see prefill_token_cache)",
    )
    parser.add_argument("--synthetic", action="store_true", help="skip cmrc2018 (smoke runs)")
    parser.add_argument(
        "--quick", action="store_true", help="2,000 passages (or --sizes), 50 queries, 64-d"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes = args.sizes or "2000"
        args.queries, args.dim, args.synthetic = 50, 64, True
    args.sizes = args.sizes or "100000,1000000"
    sizes = [int(s) for s in args.sizes.split(",")]
    kinds = [k.strip() for k in args.jobs.split(",") if k.strip()]
    args.tokens_from_generator = {int(x) for x in args.tokens_from_generator.split(",") if x}
    if args.text_workers < 0:
        args.text_workers = None
    root = args.workdir.resolve() / "retrieval-bench-e2e"
    load = os.getloadavg()
    print(
        f"machine: {os.cpu_count()} cores, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}"
        f"; workdir {root}"
    )
    if "dense" in kinds and not has_precomputed_encoder():
        print(
            "note: this checkout has no encoder=precomputed: the dense job is the dense arm's "
            "FAISS code on the same vectors (load, index, retrieve only)"
        )
    records = []
    for n in sizes:
        files = DatasetFiles(root, f"synth{n}")
        done = dataset_in_child(files, n, args.queries, args.dim, args.synthetic)
        print(
            f"dataset {files.name}: {n:,} passages, {done['tokens']:,} tokens ({done['source']}),"
            f" {args.queries:,} labelled queries, {args.dim}-d vectors around {done['vectors']}; "
            f"generated in {done['seconds']}s (not part of any job)"
        )
        for kind in kinds:
            records.append(
                run_job(
                    kind,
                    files,
                    n,
                    args.queries,
                    args.text_workers,
                    args.reuse_finished,
                    n in args.tokens_from_generator,
                )
            )
    report(sorted(records, key=lambda r: r["n"]), args.queries)
    load = os.getloadavg()
    print(f"load average at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
