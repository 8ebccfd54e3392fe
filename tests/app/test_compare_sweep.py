"""End to end: every multirun ends with its comparison; ablations; bad cases; launchers."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
import yaml
from conftest import FIXTURE, ROOT, mini_overrides, run_app, run_in_process
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from support.synth_dataset import write_synthetic

from retrieval_bench.compare.build import compare_dirs
from retrieval_bench.config.compare import CompareConfig
from run.compare import main as compare_main


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    root = tmp_path_factory.mktemp("synth")
    return [*write_synthetic(root), f"cache_dir={root / 'cache'}"]


@pytest.fixture(scope="module")
def retriever_sweep(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path):
    tmp = tmp_path_factory.mktemp("sweep")
    sweep = tmp / "sweep"
    proc = run_app(
        [
            "-m",
            "retriever=bm25,dense,hybrid",
            *mini_overrides(tmp)[:-1],
            f"cache_dir={shared_cache}",
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    return sweep, proc.stdout


@pytest.mark.slow
def test_multirun_ends_with_the_per_type_verdict_table(retriever_sweep) -> None:
    sweep, stdout = retriever_sweep
    assert "== mini: 3 configurations" in stdout
    table = stdout[stdout.index("== mini") :]
    for label in ("retriever=bm25", "retriever=dense", "retriever=hybrid", "best"):
        assert label in table
    for qtype in ("entity_exact", "negation", "multi_hop", "all"):
        assert qtype in table
    for name in ("comparison.md", "comparison.json", "badcases.md", "badcases.json"):
        assert (sweep / name).is_file(), name
    record = json.loads((sweep / "comparison.json").read_text())
    ds = record["datasets"]["mini"]
    assert [c["label"] for c in ds["configurations"]] == [
        "retriever=bm25",
        "retriever=dense",
        "retriever=hybrid",
    ]
    assert ds["types"][-1] == "all"
    recall = ds["cells"]["recall@K"]
    # The fixture has 1-2 queries per type: nothing is declared, and the table says why.
    assert recall["entity_exact"]["n"] == 2
    assert recall["entity_exact"]["best"] is None
    assert "too few queries" in recall["entity_exact"]["note"]
    assert recall["all"]["n"] == 6
    assert "no_answer" in recall["no_answer"]["note"]
    md = (sweep / "comparison.md").read_text()
    assert "## Best configuration per type" in md and "p (Holm)" in md


@pytest.mark.slow
def test_compare_command_rebuilds_the_same_verdicts(
    retriever_sweep, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sweep, _ = retriever_sweep
    jobs = sorted(p for p in sweep.iterdir() if (p / "metrics.json").is_file())
    assert compare_main([*map(str, jobs), "--out", str(tmp_path)]) == 0
    assert "== mini: 3 configurations" in capsys.readouterr().out
    ours = json.loads((tmp_path / "comparison.json").read_text())["datasets"]["mini"]
    callback = json.loads((sweep / "comparison.json").read_text())["datasets"]["mini"]
    assert ours["cells"] == callback["cells"]


def test_compare_command_errors_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert compare_main([str(tmp_path / "nope")]) == 2
    assert "no such folder" in capsys.readouterr().err
    assert compare_main([str(tmp_path)]) == 2
    assert "holds no job folder" in capsys.readouterr().err


@pytest.mark.slow
def test_ablation_with_significance_and_bad_cases(synth: list[str], tmp_path: Path) -> None:
    sweep = tmp_path / "abl"
    proc = run_app(
        [
            "-m",
            "retriever=bm25",
            "top_k=1,3",
            "compare.baselines=[{top_k:1}]",
            *synth,
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert "Ablation against top_k=1" in proc.stdout
    ds = json.loads((sweep / "comparison.json").read_text())["datasets"]["synth"]
    # The `deep` passage sits at rank 2-3: top_k=3 finds it for every query, top_k=1 never.
    deep = ds["cells"]["recall@K"]["deep"]
    assert deep["verdicts"] == {"top_k=3": "win", "top_k=1": "lose"}  # two: no "second"
    assert ds["best"]["deep"]["recall@K"]["best"] == "top_k=3"
    group = ds["ablations"][0]["groups"][0]
    assert group["baseline"]["setting"] == "top_k=1"
    delta = group["deltas"]["recall@K"]["deep"][0]
    assert delta["setting"] == "top_k=3" and delta["diff"] == 1.0 and delta["significant"]
    assert delta["n"] == 10
    # Bad cases: each deep query flips (hit at top_k=3, none at top_k=1) and is listed first.
    bad = json.loads((sweep / "badcases.json").read_text())["synth"]
    deep_cases = [q for q in bad["queries"] if q["query_type"] == "deep"]
    assert len(deep_cases) == 10 and {q["kind"] for q in deep_cases} == {"flip"}
    item = deep_cases[0]["expected"][0]
    assert item["kind"] == "passage" and item["found_by"] == ["top_k=3"]
    ranks = item["ranks"]["top_k=1"]
    assert ranks["final"] is None and ranks["bm25"] in (2, 3)
    md = (sweep / "badcases.md").read_text()
    assert "## deep" in md and "[flip]" in md


@pytest.mark.slow
def test_topk_ablation_is_one_command(synth: list[str], tmp_path: Path) -> None:
    sweep = tmp_path / "topk"
    proc = run_app(
        ["-m", "experiment=topk_ablation", "retriever=bm25", *synth, f"hydra.sweep.dir={sweep}"]
    )
    assert proc.returncode == 0, proc.stderr
    ds = json.loads((sweep / "comparison.json").read_text())["datasets"]["synth"]
    assert [c["top_k"] for c in ds["configurations"]] == [6, 8]
    assert ds["ablations"][0]["baseline"] == {"top_k": "6"}
    group = ds["ablations"][0]["groups"][0]
    assert [s["setting"] for s in group["settings"]] == ["top_k=8"]
    assert set(group["deltas"]["recall@K"]) == {"deep", "pair", "all"}
    assert "recall@K (K = each job's top_k: 6, 8)" in proc.stdout


@pytest.mark.slow
def test_reused_sweep_folder_compares_only_the_new_sweep(synth: list[str], tmp_path: Path) -> None:
    sweep = tmp_path / "reuse"
    for values in ("top_k=1,3", "top_k=2,4"):
        proc = run_app(["-m", "retriever=bm25", values, *synth, f"hydra.sweep.dir={sweep}"])
        assert proc.returncode == 0, proc.stderr
    ds = json.loads((sweep / "comparison.json").read_text())["datasets"]["synth"]
    assert [c["label"] for c in ds["configurations"]] == ["top_k=2", "top_k=4"]


@pytest.mark.slow
def test_joblib_launcher_shares_the_embedding_cache(tmp_path: Path) -> None:
    """Two concurrent dense jobs, one fresh cache: the corpus is encoded exactly once."""
    sweep = tmp_path / "joblib"
    proc = run_app(
        [
            "-m",
            "retriever=dense,hybrid",
            "hydra/launcher=parallel",
            "hydra.launcher.n_jobs=2",
            *mini_overrides(tmp_path),
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    manifests = [json.loads(p.read_text()) for p in sweep.glob("*/manifest.json")]
    assert len(manifests) == 2
    passages = [m["embeddings"]["passages"] for m in manifests]
    assert sum(p["encoded"] for p in passages) == 12
    assert sum(p["cached"] for p in passages) == 12
    cache = tmp_path / "cache"
    assert not list(cache.rglob("*.tmp")), "a temp file was left behind"
    assert len(list(cache.rglob("*.npy"))) == len(list(cache.rglob("*.json"))) >= 2
    assert "== mini: 2 configurations" in proc.stdout


@pytest.mark.slow
def test_submitit_local_launcher_runs_a_sweep(synth: list[str], tmp_path: Path) -> None:
    sweep = tmp_path / "submitit"
    proc = run_app(
        [
            "-m",
            "retriever=bm25",
            "top_k=1,3",
            "hydra/launcher=local",
            *synth,
            f"hydra.sweep.dir={sweep}",
        ]
    )
    assert proc.returncode == 0, proc.stderr
    assert (sweep / ".submitit").is_dir()
    assert len(list(sweep.glob("*/metrics.json"))) == 2
    assert (sweep / "comparison.json").is_file()


@pytest.mark.parametrize(
    ("launcher", "target"),
    [("parallel", "JoblibLauncher"), ("local", "LocalLauncher"), ("slurm", "SlurmLauncher")],
)
def test_launcher_configs_compose(launcher: str, target: str) -> None:
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[f"hydra/launcher={launcher}"],
            return_hydra_config=True,
        )
    node = cfg.hydra.launcher
    assert node._target_.endswith(f".{target}")
    if launcher != "parallel":
        assert OmegaConf.to_container(node)["submitit_folder"] == (
            "${hydra.sweep.dir}/.submitit/%j"
        )


def _job(tmp_path: Path, name: str, *overrides: str, recorded: list[str] | None = None) -> Path:
    """A finished mini job in its own folder; `recorded`: the command-line overrides its
    `.hydra/overrides.yaml` says it was run with (what a sweep's labels are built from)."""
    overrides = (*mini_overrides(tmp_path / name), "retriever=bm25", *overrides)
    _, job = run_in_process(list(overrides), tmp_path / name)
    if recorded is not None:
        (job / ".hydra").mkdir(exist_ok=True)
        (job / ".hydra" / "overrides.yaml").write_text(yaml.safe_dump(recorded))
    return job


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_jobs_scored_in_different_units_labels_or_k_are_never_one_table(tmp_path: Path) -> None:
    _job(tmp_path, "passage")
    _job(tmp_path, "doc", "scoring.unit=doc")
    snapshot = tmp_path / "snapshot.jsonl"
    lines = (FIXTURE / "evalsets" / "mini.jsonl").read_text().splitlines()
    first = json.loads(lines[0])
    first["relevant_ids"] = [*first["relevant_ids"][:1], "m-extra"]  # another label snapshot
    snapshot.write_text("\n".join([json.dumps(first), *lines[1:]]) + "\n")
    _job(tmp_path, "relabelled", f"dataset.evalset={snapshot}")
    _job(tmp_path, "deeper", "top_k=5")
    out = tmp_path / "comparison"
    record = compare_dirs([tmp_path], CompareConfig(), out_dir=out).record
    groups = {n: [c["path"] for c in ds["configurations"]] for n, ds in record["datasets"].items()}
    assert len(groups) == 4  # each kind alone; no verdict mixes two kinds
    by_folder = {Path(p).parent.name: name for name, paths in groups.items() for p in paths}
    assert "unit=doc" in by_folder["doc"] and "unit=passage" in by_folder["passage"]
    assert "top_k=5" in by_folder["deeper"]
    assert by_folder["relabelled"] != by_folder["passage"]
    for ds in record["datasets"].values():
        assert ds["separated"].startswith("mini's jobs differ in what their values measure (")
    # The sweep's table: one system name for all four, told apart by its own columns.
    with (out / "results.csv").open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len({r["system"] for r in rows}) == 1
    kinds = {(r["unit"], r["labels"], r["top_k"]) for r in rows}
    assert len(kinds) == 4
    assert {unit for unit, _, _ in kinds} == {"passage", "doc"}
    assert len({labels for _, labels, _ in kinds}) == 2
    assert {k for _, _, k in kinds} == {"6", "5"}


@pytest.mark.slow  # whole jobs in process: the fast tier keeps one-function tests
def test_a_top_k_ablation_still_compares_its_ks_in_one_table(tmp_path: Path) -> None:
    _job(tmp_path, "k3", "top_k=3", recorded=["top_k=3"])
    _job(tmp_path, "k5", "top_k=5", recorded=["top_k=5"])
    record = compare_dirs([tmp_path], CompareConfig()).record
    [ds] = record["datasets"].values()
    assert [c["label"] for c in ds["configurations"]] == ["top_k=3", "top_k=5"]
    assert "separated" not in ds
