"""The router's tables: its rules, the confusion matrix, and routed vs each single retriever per
labelled type. Every number comes from `metrics.json["router"]` (and the stages it copies)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from retrieval_bench.reports.tables import fmt, markdown_table, text_table
from retrieval_bench.router_config import describe_when
from retrieval_bench.scoring.routing import ROUTED


def _delta(a: float | None, b: float | None) -> str:
    return "undef" if a is None or b is None else f"{a - b:+.3f}"


def _best(values: dict[str, float | None]) -> str:
    known = {name: v for name, v in values.items() if v is not None}
    if not known:
        return "undef"
    top = max(known.values())
    return " = ".join(name for name, v in known.items() if abs(v - top) < 1e-12)


def comparison_rows(router: dict[str, Any], metric: str, with_recall: bool) -> list[list[Any]]:
    """type, n, routing accuracy, metric per system, delta vs hybrid, best [, recall per system]."""
    cmp = router["comparison"]
    systems: list[str] = cmp["systems"]
    recall = cmp["metrics"][0]
    accuracy = router["accuracy"]["by_type"]
    rows = []
    for qtype, entry in [*cmp["by_type"].items(), ("all", cmp["overall"])]:
        acc = (
            router["accuracy"]["overall"]
            if qtype == "all"
            else accuracy.get(qtype, {}).get("accuracy")
        )
        values = {s: entry[s][metric] for s in systems}
        row = [qtype, entry["n"], acc, *values.values()]
        row.append(_delta(values[ROUTED], values.get("hybrid")) if "hybrid" in values else "-")
        row.append(_best(values))
        if with_recall:
            row += [entry[s][recall] for s in systems]
        rows.append(row)
    return rows


def comparison_header(router: dict[str, Any], metric: str, with_recall: bool) -> list[str]:
    systems = router["comparison"]["systems"]
    recall = router["comparison"]["metrics"][0]
    header = ["type", "n", "route acc", *(f"{metric} {s}" for s in systems)]
    header += ["Δ routed−hybrid", f"best {metric}"]
    if with_recall:
        header += [f"{recall} {s}" for s in systems]
    return header


def confusion_table(router: dict[str, Any]) -> str:
    routes: list[str] = list(router["serves"])
    confusion = router["confusion"]
    acc = router["accuracy"]
    rows = []
    for qtype, cells in confusion.items():
        by_type = acc["by_type"][qtype]
        rows.append([qtype, *(cells.get(r, 0) for r in routes), by_type["n"], by_type["accuracy"]])
    totals = [sum(confusion[t].get(r, 0) for t in confusion) for r in routes]
    rows.append(["all", *totals, acc["n"], acc["overall"]])
    precision = [acc["by_route"].get(r, {}).get("precision") for r in routes]
    rows.append(["precision", *precision, "", ""])
    return markdown_table(["labelled \\ routed", *routes, "n", "accuracy"], rows)


def rules_table(router: dict[str, Any]) -> str:
    routes = router["routes"]

    def describe(route: str) -> list[Any]:
        r = routes[route]
        return [route, r["strategy"], "+".join(r["arms"]), r["combine"], r["exclude"]]

    rows = [
        [i, describe_when(rule["when"]), *describe(rule["route"])]
        for i, rule in enumerate(router["rules"])
    ]
    rows.append(["-", "otherwise (default)", *describe(router["default_route"])])
    return markdown_table(["#", "when", "route", "strategy", "arms", "combine", "exclude"], rows)


def leak_rows(router: dict[str, Any], systems: Sequence[str]) -> list[list[Any]]:
    leak = router["negative_leak"]
    return [
        [s, leak[s]["rate"], ", ".join(leak[s]["queries"]) or "-"] for s in systems if s in leak
    ]


def router_section(router: dict[str, Any], k: int) -> list[str]:
    """report.md lines for a routed job."""
    counts = router["counts"]
    acc = router["accuracy"]
    metric = f"ndcg@{k}"
    systems = router["comparison"]["systems"]
    exclusions = router["exclusions"]
    leak = router["negative_leak"]
    return [
        "## Router",
        "",
        f"Rules from `{router['source']}`, tested in order; the first that holds picks the "
        "route. A route serves the labelled types listed in `serves` (metrics.json); the "
        "default route also serves every type no other route serves.",
        "",
        rules_table(router),
        "",
        f"Routing accuracy {fmt(acc['overall'])} ({acc['correct']}/{acc['n']} queries routed to "
        f"a route that serves their labelled type). Default route taken by {counts['default']} "
        f"queries, {counts['default_no_signal']} of them with no entity and no negation cue.",
        "",
        "### Confusion matrix (rows: labelled `query_type`, columns: routed)",
        "",
        confusion_table(router),
        "",
        f"### Did routing help? Routed vs each single retriever, top {k}",
        "",
        f"`{ROUTED}` is this job's `final` stage. "
        + ", ".join(f"`{s}`" for s in systems if s != ROUTED)
        + " are each single retriever run in this same job on every query, filtered as a job "
        "without a router filters (cities, permissions; no exclusions) and cut to top_k "
        "(`baselines` in rankings.jsonl and metrics.json, `trec/baselines/`). Rows are labelled "
        "types; n = scored queries; `route acc` counts every query of the type, scored or not.",
        "",
        markdown_table(
            comparison_header(router, metric, True), comparison_rows(router, metric, True)
        ),
        "",
        "### Exclusions",
        "",
        f"{exclusions['queries']} queries had their parsed excluded entities filtered out before "
        f"ranking; passages of an excluded entity found in any of their stages: "
        f"{len(exclusions['violations'])}.",
        "",
        f"Queries with labelled `negative_entities` ({leak['n']}): share whose top {k} holds a "
        "passage about a negative entity.",
        "",
        markdown_table(["system", f"leak@{k}", "queries"], leak_rows(router, systems)),
        "",
    ]


def router_summary(router: dict[str, Any], k: int) -> str:
    """Terminal lines: accuracy, default count, and the per-type ndcg comparison."""
    acc = router["accuracy"]
    counts = router["counts"]
    metric = f"ndcg@{k}"
    table = text_table(
        comparison_header(router, metric, False), comparison_rows(router, metric, False)
    )
    return (
        f"router: accuracy {fmt(acc['overall'])} ({acc['correct']}/{acc['n']}); default route "
        f"{counts['default']} ({counts['default_no_signal']} with no entity and no cue); "
        f"exclusion violations {len(router['exclusions']['violations'])}\n{table}\n"
    )
