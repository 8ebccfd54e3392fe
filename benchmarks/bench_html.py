"""The HTML report's budget: a 3-job sweep over 1,000 queries gives a comparison.html under 5 MB
that opens in under 2 s.

    .venv/bin/python benchmarks/bench_html.py            # 1,000 queries, 20,000 passages
    .venv/bin/python benchmarks/bench_html.py --quick    # 60 queries, 600 passages

The sweep is the app's own (`python -m run -m retriever=bm25,dense,hybrid`) over the end-to-end
benchmark's generated Chinese dataset (bench_e2e.write_dataset: cmrc2018-like passages, one
labelled passage per query, precomputed vectors for the dense arm), written under `--workdir`.
Measured: the size of comparison.html and of the hybrid job's report.html (and how much of it is
passage text), the seconds to build comparison.html from the finished job folders (in process,
`compare.html.write_comparison_html`), and the load time in headless Chromium: from navigation
start until the page's script has parsed the data and drawn every table and the query list
(`window.explorerReadyMs`), median and max over `--repeat` fresh loads. Without Chromium the
load time is left out and the RESULT line says so. Also printed: where the embedded JSON's bytes
go (`bytes:`) and the page's note on the passage texts it cut (`text note:`).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests"))

from bench_e2e import DatasetFiles, write_dataset  # noqa: E402
from bench_sweep import run_app  # noqa: E402
from chinese_corpus import CMRC  # noqa: E402

SIZE_BUDGET_MB = 5.0
LOAD_BUDGET_S = 2.0


def run_sweep(files: DatasetFiles, work: Path) -> Path:
    sweep = work / "sweep"
    vectors = files.vectors
    overrides = [
        "-m",
        "retriever=bm25,dense,hybrid",
        f"dataset.name={files.name}",
        "dataset.format=native",
        f"dataset.corpus={files.corpus}",
        f"dataset.evalset={files.evalset}",
        "encoder=precomputed",
        f"encoder.path={vectors / 'passages.npy'}",
        f"encoder.ids_path={vectors / 'passage_ids.txt'}",
        f"encoder.query_path={vectors / 'queries.npy'}",
        f"encoder.query_ids_path={vectors / 'query_ids.txt'}",
        f"cache_dir={work / 'cache'}",
        f"hydra.sweep.dir={sweep}",
    ]
    run_app(overrides)
    return sweep


def json_mb(value: object) -> float:
    """MB of `value` as the page embeds it (compact JSON, UTF-8)."""
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")) / 1e6


def where_the_bytes_go(payload: dict, hybrid: str) -> str:
    """The embedded JSON's size by part, and the hybrid system's by field."""
    parts = ("passages", "systems", "queries", "comparison")
    [system] = [s for s in payload["systems"] if s["label"].endswith(hybrid)]
    fields = ("scores", "rankings", "values", "loss", "plots")
    return (
        f"embedded JSON {json_mb(payload):.2f} MB: "
        + ", ".join(f"{part} {json_mb(payload[part]):.2f}" for part in parts)
        + f"; the {hybrid} system's: "
        + ", ".join(f"{f} {json_mb(system[f]):.2f}" for f in fields)
    )


def build_seconds(sweep: Path) -> float:
    """Seconds to write comparison.html again from the finished folders (comparison.json's
    record as it is)."""
    from retrieval_bench.compare.html import write_comparison_html
    from retrieval_bench.jobdir.job_sets import assign_labels, group_by_dataset
    from retrieval_bench.jobdir.read import scan_jobs

    record = json.loads((sweep / "comparison.json").read_text(encoding="utf-8"))
    scan = scan_jobs([sweep])
    groups = group_by_dataset(scan.jobs)
    for group in groups.values():
        assign_labels(group)
    start = time.perf_counter()
    write_comparison_html(sweep, record["datasets"], groups, record["settings"], scan.skipped)
    return time.perf_counter() - start


def load_seconds(html: Path, repeat: int) -> tuple[list[float], list[str]] | None:
    from support.chromium import chromium, find_chromium

    if find_chromium() is None:
        return None
    times: list[float] = []
    errors: list[str] = []
    for _ in range(repeat):
        with chromium() as browser:  # a fresh browser each time: no warm cache
            times.append(browser.open(html))
            errors += browser.errors
    return times, errors


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--passages", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp"))
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    if args.quick:
        args.queries, args.passages, args.repeat = 60, 600, 1
    synthetic = not (CMRC / "corpus.jsonl").exists()
    name = f"html{args.passages}q{args.queries}"
    work = args.workdir / f"rb-bench-html-{name}"
    files = DatasetFiles(work / "data", name)
    write_dataset(files, args.passages, args.queries, 64, synthetic)
    start = time.perf_counter()
    sweep = run_sweep(files, work)
    sweep_s = time.perf_counter() - start
    html = sweep / "comparison.html"
    size_mb = html.stat().st_size / 1e6
    data = html.read_text(encoding="utf-8")
    marker = '<script type="application/json" id="explorer-data">'
    end = data.rindex("</script>\n<script>")
    payload = json.loads(data[data.index(marker) + len(marker) : end])
    text_mb = sum(len((t or "").encode("utf-8")) for t in payload["passages"]["text"]) / 1e6
    cut = sum(1 for n in payload["passages"]["full_chars"] if n)
    [job] = [d for d in sweep.iterdir() if d.name.endswith("retriever=hybrid")]
    job_mb = (job / "report.html").stat().st_size / 1e6
    build_s = build_seconds(sweep)
    print(
        f"sweep: 3 jobs, {args.queries} queries, {args.passages} passages "
        f"({'synthetic' if synthetic else 'cmrc2018-based'} text), {sweep_s:.0f} s in all"
    )
    print(
        f"comparison.html: {size_mb:.2f} MB, of which passage text {text_mb:.2f} MB "
        f"({len(payload['passages']['ids'])} passages, {cut} cut); built in {build_s:.2f} s; "
        f"hybrid job's report.html {job_mb:.2f} MB"
    )
    print(f"bytes: {where_the_bytes_go(payload, 'retriever=hybrid')}")
    print(f"text note: {payload['meta']['text_note'] or '(no text cut)'}")
    loads = load_seconds(html, args.repeat)
    if loads is None:
        load = "load not measured (no Chromium)"
    else:
        times, errors = loads
        load = (
            f"ready median {statistics.median(times):.2f} s, max {max(times):.2f} s over "
            f"{len(times)} loads (budget {LOAD_BUDGET_S:g} s), console errors {len(errors)}"
        )
        print("loads (s): " + ", ".join(f"{t:.3f}" for t in times))
    print(
        f"RESULT html: {args.queries} queries x 3 jobs: comparison.html {size_mb:.2f} MB "
        f"(budget {SIZE_BUDGET_MB:g} MB), {load}"
    )


if __name__ == "__main__":
    main()
