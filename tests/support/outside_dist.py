"""A real distribution from outside the package, `rb-outside`, that offers one plug-in of each
kind by name through entry points: the outside arm, combiner, stage and encoder of
tests/fixtures/outside_* as modules of its package `rb_outside`, and a measures module.

`write_project` writes its source tree (a pyproject.toml with `[project.entry-points.*]`, as a
plug-in author writes it) for pip to build and install; `write_installed` writes what an
installation leaves in site-packages (the package and its `*.dist-info` with METADATA and
entry_points.txt), which `importlib.metadata` finds on `sys.path` like any installed
distribution, without pip's minutes of start-up in the fast tier."""

from __future__ import annotations

import shutil
from pathlib import Path

from conftest import ROOT

NAME = "rb-outside"
VERSION = "0.3"
PACKAGE = "rb_outside"
FIXTURES = ROOT / "tests" / "fixtures"
# kind -> {entry-point name: object}, as its pyproject declares them.
ENTRY_POINTS: dict[str, dict[str, str]] = {
    "arms": {"char_bigram": f"{PACKAGE}.char_bigram_arm:CharBigramSpec"},
    "combiners": {"borda": f"{PACKAGE}.borda_fusion:BordaFusion"},
    "stages": {"doc_dedupe": f"{PACKAGE}.doc_dedupe_stage:DocDedupeSpec"},
    "encoders": {"hashed_ngrams": f"{PACKAGE}.hashed_ngrams:HashedNgramEncoder"},
    "measures": {"rb_outside_metrics": f"{PACKAGE}.metrics"},
}
# The measure its measures module registers.
MEASURE = "rr_cubed"
_METRICS = f'''"""A measure from outside: mrr cubed."""

from retrieval_bench.scoring.metrics import mrr
from retrieval_bench.scoring.registry import register_measure


def rr_cubed(rg):
    return mrr(rg) ** 3


register_measure("{MEASURE}", rr_cubed, description="mrr cubed")
'''
_MODULES = {
    "char_bigram_arm.py": FIXTURES / "outside_arm" / "char_bigram_arm.py",
    "borda_fusion.py": FIXTURES / "outside_combiner" / "borda_fusion.py",
    "doc_dedupe_stage.py": FIXTURES / "outside_stage" / "doc_dedupe_stage.py",
    "hashed_ngrams.py": FIXTURES / "outside_encoder" / "hashed_ngrams.py",
}


def _package(folder: Path) -> None:
    package = folder / PACKAGE
    package.mkdir(parents=True)
    (package / "__init__.py").write_text('"""Outside plug-ins."""\n', encoding="utf-8")
    for name, source in _MODULES.items():
        shutil.copyfile(source, package / name)
    (package / "metrics.py").write_text(_METRICS, encoding="utf-8")


def _entry_points_txt() -> str:
    return "".join(
        f"[retrieval_bench.{kind}]\n" + "".join(f"{n} = {v}\n" for n, v in points.items()) + "\n"
        for kind, points in ENTRY_POINTS.items()
    )


def write_project(root: Path) -> Path:
    """The distribution's source tree under `root` (pyproject.toml, setuptools backend)."""
    root.mkdir(parents=True, exist_ok=True)
    _package(root)
    tables = "".join(
        f'\n[project.entry-points."retrieval_bench.{kind}"]\n'
        + "".join(f'{n} = "{v}"\n' for n, v in points.items())
        for kind, points in ENTRY_POINTS.items()
    )
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
        f'[project]\nname = "{NAME}"\nversion = "{VERSION}"\ndependencies = []\n'
        f'\n[tool.setuptools]\npackages = ["{PACKAGE}"]\n{tables}',
        encoding="utf-8",
    )
    return root


def write_installed(site: Path, name: str = NAME, points: str | None = None) -> Path:
    """`site` as pip would leave it after installing the distribution: the package and
    `<name>-<version>.dist-info/{METADATA,entry_points.txt}`. `points`: another
    entry_points.txt (a second distribution offering the same names)."""
    site.mkdir(parents=True, exist_ok=True)
    if not (site / PACKAGE).exists():
        _package(site)
    info = site / f"{name.replace('-', '_')}-{VERSION}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {name}\nVersion: {VERSION}\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(points or _entry_points_txt(), encoding="utf-8")
    return site
