"""The learned router's part of report.md and of the console summary, from
`metrics.json["learned_router"]` (routing.learned_metrics): the held-out table per labelled
type against plain RRF, the best single candidate, the rules router, the CV-fixed choice per
type and the oracle, with `captured`; the paired tests; what it learned (feature importances,
the routing confusion, departures from the rules) and the fallback."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from retrieval_bench.reports.tables import fmt, markdown_table, text_table

IMPORTANCES_SHOWN = 12


def _signed(value: Any) -> str:
    return "undef" if value is None else f"{value:+.3f}"


def _p(value: Any) -> str:
    return "<0.001" if isinstance(value, float) and value < 0.001 else fmt(value)


def _verdict(test: Mapping[str, Any] | None) -> str:
    if not test:
        return "-"
    mark = "significant" if test["significant"] else (test.get("note") or "not significant")
    return f"{_signed(test['diff'])} (p adj. {_p(test['p_adjusted'])}; {mark})"


def estimate_line(learned: Mapping[str, Any]) -> str:
    """What the learned router's numbers are: held out, or a saved router applied."""
    if learned["estimate"] == "applied":
        seen = learned.get("seen")
        seen_text = (
            "which says nothing of the queries it was trained on"
            if seen is None
            else f"{seen} of this job's labelled queries were in its training set "
            "(their values are in-sample)"
            if seen
            else "none of this job's labelled queries was in its training set (held out)"
        )
        return f"A saved router (`{learned['applied']}`) routed every query; {seen_text}."
    folds = learned["folds"]
    return (
        f"Held out: each of the {len(folds)} folds (stratified by type, the ceiling's folds) "
        "was routed by a router whose model family, setting and margin were chosen by "
        "cross-validation inside the other folds, then fitted on them; no query's route was "
        "learned from its own label."
    )


def table_rows(learned: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    table = learned["table"]
    with_rules = any(row.get("rules") is not None for row in table["by_type"].values())
    header = ["type", "n", "learned", "rrf", *(["rules"] if with_rules else [])]
    header += ["best single", "cv-fixed", "oracle", "captured"]
    rows = []
    for qtype, row in [*table["by_type"].items(), ("all", table["overall"])]:
        cells = [qtype, row["n"], row["learned"], row["rrf"]]
        if with_rules:
            cells.append(row["rules"])
        best = f"{fmt(row['best_single'])} ({row['best_single_name']})"
        cells += [best, row["cv_fixed"], row["oracle"], row["captured"]]
        rows.append(cells)
    return header, rows


def test_rows(learned: Mapping[str, Any]) -> tuple[list[str], list[list[Any]]]:
    tests = learned["tests"]
    against = [k for k in ("rrf", "rules", "best_single") if k in tests]
    types = list(tests[against[0]]) if against else []
    header = ["type", *(f"learned − {k.replace('_', ' ')}" for k in against)]
    rows = [[t, *(_verdict(tests[k].get(t)) for k in against)] for t in types]
    return header, rows


def _render(
    learned: Mapping[str, Any], table: Callable[[Sequence[str], Sequence[Sequence[Any]]], str]
) -> list[str]:
    metric = learned["metric"]
    overall = learned["table"]["overall"]
    lines = [
        f"{learned['mode']} routing among {len(learned['candidates'])} candidates "
        f"({', '.join(learned['candidates'])}), learned on {metric}. {estimate_line(learned)}",
        "",
        table(*table_rows(learned)),
        "",
        "`learned` is this job's final stage; `rrf` plain RRF of every arm; `best single` the "
        "candidate best on all queries; `cv-fixed` the best candidate per labelled type chosen "
        "on the other folds (it knows each query's type); `oracle` the best candidate per "
        "query; captured = (learned − best single) / (oracle − best single).",
        "",
        f"Paired sign-flip tests on {metric}, {learned['tests']['correction']}-adjusted over "
        f"{learned['tests']['family']}:",
        "",
        table(*test_rows(learned)),
        "",
    ]
    goal = overall.get("captured")
    rrf_test = learned["tests"].get("rrf", {}).get("all") or {}
    reached = (
        goal is not None and goal >= 0.25 and rrf_test.get("significant") and rrf_test["diff"] > 0
    )
    lines += [
        f"Goal (>= 25% of the gap captured and a significant gain over RRF overall): "
        f"{'reached' if reached else 'not reached'} (captured {fmt(goal)}, "
        f"vs RRF {_verdict(rrf_test)}).",
        "",
    ]
    return lines


def learned_markdown(learned: Mapping[str, Any]) -> list[str]:
    """report.md's `## Learned router` section."""
    lines = ["## Learned router", "", *_render(learned, markdown_table)]
    model = learned.get("model")
    if model:
        trained = model["trained_on"]
        lines += [
            "### What it learned",
            "",
            f"The router saved with this job (`router.json`) was fitted on "
            f"{trained.get('queries')} labelled queries of {trained.get('dataset')}: "
            f"{_choice(model['choice'])}, reference `{model['reference']}` (the candidate "
            f"best on them), inner cross-validated {learned['metric']} "
            f"{fmt(model['inner_score'])} (scikit-learn {model['sklearn']}).",
            "",
        ]
        shown = list(learned["importances"].items())[:IMPORTANCES_SHOWN]
        kind = (
            "mean |standardised coefficient|"
            if model["choice"]["estimator"] == "ridge"
            else ("mean decrease in impurity")
        )
        lines += [
            f"Feature importances ({kind}, share of the total; the top {len(shown)}):",
            "",
            markdown_table(["feature", "importance"], shown),
            "",
        ]
    choices = learned["choices"]
    candidates = [c for c in learned["candidates"] if c in choices["overall"]]
    extra = [c for c in choices["overall"] if c not in candidates]
    columns = [*candidates, *extra]
    rows = [[t, *(counts.get(c, 0) for c in columns)] for t, counts in choices["by_type"].items()]
    rows.append(["all", *(choices["overall"].get(c, 0) for c in columns)])
    lines += [
        "Routing confusion (rows: labelled type, columns: the strategy each query took):",
        "",
        markdown_table(["labelled \\ chosen", *columns], rows),
        "",
    ]
    departures = learned["departures"]
    if departures["n"]:
        lines += [
            f"Departures from the rules router: on {departures['n']} labelled queries the "
            "learned choice ranked otherwise than the rules router's; better on "
            f"{departures['better']}, worse on "
            f"{departures['worse']}, the same on {departures['same']} (mean "
            f"{_signed(departures['mean_diff'])}). The largest:",
            "",
            markdown_table(
                ["query", "type", "rules", "learned", "rules value", "learned value"],
                [
                    [
                        q["query_id"],
                        q["query_type"],
                        q["rules"],
                        q["learned"],
                        q["rules_value"],
                        q["learned_value"],
                    ]
                    for q in departures["queries"]
                ],
            ),
            "",
        ]
    fallback = learned["fallback"]
    lines += [
        f"Fallback: {fallback['n']} queries whose features could not be computed (an arm "
        f"returned nothing) took `{learned['fallback_strategy']}`"
        + (
            ": " + ", ".join(f"{q} (no {m[0]})" for q, m in list(fallback["queries"].items())[:10])
            if fallback["n"]
            else "."
        ),
        "",
    ]
    seconds = learned.get("seconds") or {}
    if seconds:
        lines += [
            f"Cost: features {fmt(seconds.get('features_per_query_ms'))} ms a query "
            f"({fmt(seconds.get('features'))} s in all; term statistics "
            f"{fmt(seconds.get('term_statistics'))} s once), routing (cross-validation and "
            f"fitting) {fmt(seconds.get('routing'))} s ({fmt(seconds.get('routing_cpu'))} s "
            "CPU).",
            "",
        ]
    return lines


def _choice(choice: Mapping[str, Any]) -> str:
    setting = {k: v for k, v in choice.items() if k not in ("estimator", "margin")}
    text = ", ".join(f"{k} {fmt(v)}" for k, v in setting.items())
    return f"{choice['estimator']} ({text}), margin {fmt(choice['margin'])}"


def learned_text(learned: Mapping[str, Any]) -> str:
    """The console's lines."""
    return "\n".join(["learned router:", *_render(learned, text_table)]).rstrip()
