"""The simulation's table as Markdown (simulation.md) and JSON (simulation.json)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from retrieval_bench.active.files import SIMULATION_JSON, SIMULATION_MD
from retrieval_bench.active.simulate import DIFFERENCE, ONE_ROUND, UNIFORM, labels_needed
from retrieval_bench.io.atomic import atomic_write_json, atomic_write_text
from retrieval_bench.io.strict_json import strict_json


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def floor_bound(result: Mapping[str, Any], budget: int) -> float:
    """How many times uniform sampling's width a second round can have at most with the floor
    (`stats.sampling_design`): sqrt((M / (phi b) - 1) / (M / b - 1)), b the second round's
    budget, M the queries not labelled by the pilot (expected)."""
    s = result["settings"]
    second = (1 - s["first_share"]) * budget
    rest = result["queries"] - s["first_share"] * budget
    if second >= rest:
        return 1.0
    return float(((rest / (s["floor"] * second) - 1) / (rest / second - 1)) ** 0.5)


def simulation_markdown(result: Mapping[str, Any]) -> str:
    """Per budget, the paired difference's width / coverage / agreement for each strategy and
    estimator; then the queries each needs to reach uniform-without-judge's width; then each
    system's mean (width and coverage)."""
    a, b = result["systems"]
    s = result["settings"]
    judge = result.get("judge") or {}
    shuffled = " (shuffled over the pairs: no signal)" if judge.get("shuffled") else ""
    lines = [
        f"# Label plans simulated: {result['case']}",
        "",
        f"`{result['metric']}`, {result['queries']} queries, {result['pairs']} pooled pairs; "
        f"truth (every label): {a} - {b} = {result['truth'][DIFFERENCE]:+.4f}, full-label "
        f"verdict: {result['full_verdict']}. Judge: {judge.get('kind', '?')} "
        f"{judge.get('model', '')}{shuffled}. "
        f"{s['draws']} draws per cell ({s['first_rounds']} first rounds x "
        f"{s['draws'] // s['first_rounds']} second rounds), two rounds (first "
        f"{s['first_share']:.0%} of the budget), floor {s['floor']}, seed {s['seed']}, "
        f"intervals at {s['confidence']:.0%}. `people`: people's labels only; `ppi`: with the "
        "judge's prediction (inverse-probability-weighted). `labelled`: mean queries labelled.",
        "",
        "## The paired difference",
        "",
        "`vs uniform`: the width over uniform sampling's with the same estimator; the floor "
        "bounds it, for a fixed predictor, at `floor bound` (the second round's largest "
        "(1 - pi)/pi over uniform's, square-rooted): what a strategy whose weights carry no "
        "signal can cost at most.",
        "",
        "| budget | strategy | estimator | labelled | width | vs uniform | floor bound "
        "| coverage | agreement | bias |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    rows = [r for r in result["rows"] if r["quantity"] == DIFFERENCE]
    uniform = {(r["budget"], r["estimator"]): r["width"] for r in rows if r["strategy"] == UNIFORM}
    for r in rows:
        ratio = r["width"] / uniform[(r["budget"], r["estimator"])]
        lines.append(
            f"| {r['budget']} | {r['strategy']} | {r['estimator']} | {r['labelled']:.1f} | "
            f"{r['width']:.4f} | {ratio:.2f} | {floor_bound(result, r['budget']):.2f} | "
            f"{_pct(r['coverage'])} | {_pct(r.get('agreement'))} | {r['bias']:+.4f} |"
        )
    lines += [
        "",
        "## Queries needed for uniform-without-judge's width",
        "",
        f"The reference: `{ONE_ROUND}`, one round of uniform sampling estimated by people's "
        "labels alone (the sample mean), at each budget. Each curve of width against queries "
        "labelled, interpolated log-log between the simulated budgets (n/a: outside them); "
        "saving: 1 - needed / the reference's queries.",
        "",
        "| budget | reference width | strategy | estimator | queries needed | saving |",
        "|---|---|---|---|---|---|",
    ]
    for r in labels_needed(dict(result)):
        needed = "n/a" if r["needed"] is None else f"{r['needed']:.1f}"
        lines.append(
            f"| {r['budget']} | {r['reference_width']:.4f} | {r['strategy']} | {r['estimator']} "
            f"| {needed} | {_pct(r['saving'])} |"
        )
    lines += [
        "",
        "## Each system's mean",
        "",
        "| system | budget | strategy | estimator | width | coverage |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if r["quantity"] != DIFFERENCE:
            lines.append(
                f"| {r['quantity']} | {r['budget']} | {r['strategy']} | {r['estimator']} | "
                f"{r['width']:.4f} | {_pct(r['coverage'])} |"
            )
    return "\n".join(lines) + "\n"


def write_simulation(result: Mapping[str, Any], out: Path) -> list[Path]:
    record = dict(result) | {"labels_needed": labels_needed(dict(result))}
    atomic_write_json(out / SIMULATION_JSON, strict_json(record))
    atomic_write_text(out / SIMULATION_MD, simulation_markdown(result))
    return [out / SIMULATION_MD, out / SIMULATION_JSON]
