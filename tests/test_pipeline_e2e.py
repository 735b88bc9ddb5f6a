"""End-to-end: the whole DVC pipeline, and every command of the README, in a scratch copy of
the project.

A copy of the project (code, params.yaml, dvc.yaml, DVC config) goes into a temporary git
repository; params select CAD-Net on Cora and PubMed, the variants rw and gat_rw (PubMed's
gat_rw at 0 seeds) and the baseline gcn on Cora, 2 runs of 5 epochs. Then:
`dvc repro` -> outputs exist, `dvc status` is clean -> bad values stop at the check stage -> a
change to another dataset's row changes no cell's spec, a change to Cora's row Cora's cells
only, not download / preprocess -> a docstring, a comment and a moved function rerun no cell ->
a corrupted committed result is refused by stats and remade by `dvc repro` -> a baseline's chunk
size reruns its cell alone -> the README's experiments, cluster, mirror, plan and figure commands,
verbatim -> an interrupted train stage retrains only the missing seed -> the README's quick look.

The tests below share one project (module-scoped fixture) and run in file order. They need
no dataset files: the fixture writes small graphs in the planetoid layout as "cora",
"citeseer" and "pubmed" into a mirror of its own, with their checksums in the copy's
pipeline/checksums.tsv.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from conftest import PROJECT_ROOT, readme_commands, vmapped, with_variants_in_selection, write_tiny_planetoid_mirror
from pipeline import stats

RUNS = 2
FIGURES = ("accuracy", "gamma")
STAGES_BEFORE_TRAIN = ("download@cora", "preprocess@cora")


def _env(tmp: Path, mirror: Path) -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update({
        "CADNET_MIRROR": str(mirror.resolve()),
        "DVC_NO_ANALYTICS": "1",
        "DVC_STUDIO_OFFLINE": "1",
        "DVC_SITE_CACHE_DIR": str(tmp / "dvc-site-cache"),
        "DVC_GLOBAL_CONFIG_DIR": str(tmp / "dvc-global"),
        "GIT_AUTHOR_NAME": "e2e", "GIT_AUTHOR_EMAIL": "e2e@example.invalid",
        "GIT_COMMITTER_NAME": "e2e", "GIT_COMMITTER_EMAIL": "e2e@example.invalid",
        "GIT_CONFIG_NOSYSTEM": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    })
    env.pop("PYTHONPATH", None)  # the stages must import the copy's pipeline/, from the cwd
    env.pop("DVC_EXP_NAME", None)
    return env


class Project:
    def __init__(self, root: Path, env: dict):
        self.root, self.env = root, env

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        # no time limit: a loaded machine only makes a stage slower, and a failing one exits
        proc = subprocess.run(list(args), cwd=self.root, env=self.env, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(args)} exited {proc.returncode}\n"
                                 f"--- stdout\n{proc.stdout[-4000:]}\n--- stderr\n{proc.stderr[-4000:]}")
        return proc

    def dvc(self, *args: str, **kw) -> subprocess.CompletedProcess:
        return self.run(sys.executable, "-m", "dvc", *args, **kw)

    def git(self, *args: str) -> subprocess.CompletedProcess:
        return self.run("git", *args)

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)

    @property
    def params(self) -> dict:
        return yaml.safe_load((self.root / "params.yaml").read_text())

    def set_params(self, params: dict) -> None:
        (self.root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    def metrics(self) -> dict:
        return json.loads((self.root / "reports/metrics.json").read_text())

    def seed_files(self) -> list[Path]:
        return sorted((self.root / "data/runs/cora/cadnet/main").glob("seed_*.pt"))


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Project:
    """The copied project after one `dvc repro`, committed."""
    tmp = tmp_path_factory.mktemp("e2e")
    root = tmp / "proj"
    root.mkdir()
    shutil.copytree(PROJECT_ROOT / "pipeline", root / "pipeline",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("params.yaml", "dvc.yaml", ".dvcignore", ".gitignore", "pyproject.toml"):
        shutil.copy(PROJECT_ROOT / name, root / name)
    (root / ".dvc").mkdir()
    for name in ("config", ".gitignore"):
        shutil.copy(PROJECT_ROOT / ".dvc" / name, root / ".dvc" / name)

    mirror = tmp / "mirror"
    # a small CiteSeer for the README's quick look (CiteSeer and Cora), and a small PubMed for its
    # experiments on a Table 3 cell of PubMed
    rows = (write_tiny_planetoid_mirror(mirror, "cora") + write_tiny_planetoid_mirror(mirror, "citeseer", classes=6, per_class=150)
            + write_tiny_planetoid_mirror(mirror, "pubmed", classes=3, per_class=250))
    table = root / "pipeline" / "checksums.tsv"
    kept = [line for line in table.read_text().splitlines() if not line.startswith(("cora\t", "citeseer\t", "pubmed\t"))]
    table.write_text("\n".join(kept + rows) + "\n")

    params = with_variants_in_selection(
        yaml.safe_load((root / "params.yaml").read_text()), datasets=["cora", "pubmed"], methods=["cadnet"], runs=RUNS,
        epochs=5, device="cpu",
        variants={"datasets": ["cora", "pubmed"], "methods": ["rw", "gat_rw"], "runs": {"pubmed": {"gat_rw": 0, "rw": RUNS}}},
        baselines={"datasets": ["cora"], "methods": ["gcn"], "runs": {}, "protocol": {}})
    params["studies"]["main"]["datasets"] = ["citeseer", "cora", "pubmed"]  # CiteSeer: the quick look's
    params["method_hparams"]["gcn"]["epochs"] = 5
    vmapped(params, "gcn")  # the engine whose seeds depend on their chunk (a test below changes it)
    (root / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))

    proj = Project(root, _env(tmp, mirror))
    # the stages must run the copy's code, not the editable install in the repository
    where = proj.run(sys.executable, "-c", "import pipeline; print(pipeline.__file__)").stdout.strip()
    assert Path(where).resolve() == (root / "pipeline" / "__init__.py").resolve(), where

    proj.git("init", "-q")
    proj.commit("scratch copy")
    start = time.perf_counter()
    proj.repro = proj.dvc("repro")
    proj.repro_seconds = time.perf_counter() - start
    proj.commit("first repro")
    return proj


def test_repro_writes_every_output(project):
    out = project.repro.stdout
    # exactly the selected matrix entries run: a family per dataset and method (PubMed's gat_rw
    # at 0 seeds is in the matrix, unrun; PubMed's gcn holds no cell: no study trains it there)
    assert set(re.findall(r"Running stage '([^']+)'", out)) == {
        "check", "download@cora", "preprocess@cora", "download@pubmed", "preprocess@pubmed", "stats", "plot", "curves",
        *(f"{stage}@{dataset}-{method}" for stage in ("train", "evaluate") for dataset in ("cora", "pubmed")
          for method in ("cadnet", "rw", "gat_rw", "gcn")),
    }, out[-3000:]
    assert json.loads((project.root / "reports/eval/pubmed/gcn.json").read_text()) == {}

    # the stages' logs off a terminal: the plan first, then plain lines, no bar redraws
    log = project.repro.stdout + project.repro.stderr
    assert "\r" not in log and "\x1b[" not in log, log[-2000:]
    assert len(log) < 20_000, len(log)
    assert f"ind.cora.x: copied from {project.env['CADNET_MIRROR']}" in log, log[-3000:]  # CADNET_MIRROR's files
    assert "`dvc repro` trains 6 cells on cpu now" in log, log[-3000:]  # and one at 0 seeds
    assert "  cora/cadnet/main: 2 seeds, " in log and "; new cell\n" in log, log[-3000:]
    assert "the whole selection, for reference: 6 cells, " in log, log[-3000:]
    assert f"train cora/cadnet/main: {RUNS} seeds, 0 reused, {RUNS} to train" in log, log[-3000:]
    assert f"train cora/cadnet/main: {RUNS}/{RUNS} seeds (100%)" in log, log[-3000:]

    metrics = json.loads((project.root / "reports/cells.json").read_text())  # each cell's whole summary
    assert project.metrics() == stats.headline(metrics)  # DVC's metrics: the headline of each
    assert list(metrics) == ["cora", "pubmed"] and list(metrics["cora"]) == ["cadnet", "rw", "gat_rw", "gcn"]
    assert list(metrics["pubmed"]) == ["cadnet", "rw"]
    assert metrics["cora"]["gcn"]["paper"] == {"mean": 81.3, "std": 0.7}  # its Table 2 row
    acc = metrics["cora"]["cadnet"]["test_acc"]
    assert metrics["cora"]["cadnet"]["runs"] == RUNS
    assert 10.0 < acc["mean"] <= 100.0  # 7 classes: chance is ~14 %
    assert acc["ci95_low"] <= acc["mean"] <= acc["ci95_high"]
    assert metrics["cora"]["cadnet"]["paper"] == {"mean": 84.3, "std": 0.5}
    assert metrics["cora"]["rw"]["paper"] == {"mean": 82.4, "std": 0.5}  # its own row of Table 3

    results = (project.root / "reports/results.md").read_text()
    assert f"| cora | cadnet | {RUNS} | {acc['mean']:.2f} ± {acc['std']:.2f} |" in results
    # the stand-in graph is checked against the paper's Cora statistics, and does not match
    assert re.search(r"\| cora \| 700 \| \d+ \| 30 \| 7 \| no \(paper: \[2708, 5278, 1433, 7\]\) \|", results), results
    assert "## Table 3" in results and "| GAT+RW |" in results
    assert "## Table 2" in results and "## Table B.6" in results and "## The paper's claims, checked" in results
    assert (project.root / "reports/timing.md").exists()

    for png in [project.root / "reports/figures" / f"cora_{name}.png" for name in (*FIGURES, "table2", "table3")] + [
            project.root / "reports/curves/cora_loss.png"]:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000, png

    seeds = project.seed_files()
    assert [p.name for p in seeds] == [f"seed_{s:03d}.pt" for s in range(RUNS)]
    records = [torch.load(p, weights_only=False) for p in seeds]
    assert len({r["fingerprint"] for r in records}) == 1
    assert all(r["epochs_run"] <= 5 for r in records)
    summary = json.loads((project.root / "reports/eval/cora/cadnet.json").read_text())["main"]
    assert summary["test_acc"]["mean"] == pytest.approx(100 * sum(r["test_acc"] for r in records) / RUNS, abs=1e-3)


def test_status_clean_after_repro(project):
    out = project.dvc("status").stdout
    assert "Data and pipelines are up to date." in out, out
    # `dvc metrics show` sees the nested metrics file
    shown = project.dvc("metrics", "show", "--json").stdout
    assert "test_acc" in shown and "cora" in shown


KEPT_OUTPUTS = ("data/processed/cora/graph.pt", "reports/data/cora.json", "reports/metrics.json",
                "reports/results.md", "data/runs/cora/cadnet/main/seed_000.pt", "reports/eval/cora/cadnet/main.csv")


DELETED = object()


def _edit(params: dict, where: str, value) -> dict:
    edited = yaml.safe_load(yaml.safe_dump(params))
    *path, key = where.split(".")
    node = edited
    for part in path:
        node = node[part]
    if value is DELETED:
        del node[key]
    else:
        node[key] = value
    return edited


@pytest.mark.parametrize("where, value, named", [
    ("hparams.cora.self_loops", "maybe", "hparams.cora.self_loops"),
    ("betta", 0.9, "betta"),  # a top-level typo no stage lists
    ("hparams.cora.normalize_features", 1, "hparams.cora.normalize_features"),  # DVC: 1 == True
    ("datasets", [], "datasets"),
    ("hparams.cora.epochs", "abc", "hparams.cora.epochs"),  # checked although `epochs` overrides it
    # keys a stage lists under params: DVC alone would fail only after deleting its outputs
    # (every such key: tests/test_dvc_yaml.py)
    ("self_loops", DELETED, "self_loops"),
    ("method_hparams.gcn", DELETED, "method_hparams.gcn"),
    ("studies.main.runs", -1, "studies.main.runs"),
    ("studies.beta", {"datasets": ["cora"], "methods": ["cadnet"], "grid": {"beta": [2]}}, "studies.beta.grid.beta"),
])
def test_a_bad_value_stops_repro_before_any_output_is_lost(project, where, value, named):
    before = {name: (project.root / name).read_bytes() for name in KEPT_OUTPUTS}
    try:
        project.set_params(_edit(project.params, where, value))
        proc = project.dvc("repro", check=False)
        assert proc.returncode != 0
        errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error: ")]
        assert len(errors) == 1 and named in errors[0], proc.stderr[-2000:]
        assert "Running stage 'check'" in proc.stdout and "Running stage 'train" not in proc.stdout
        assert {name: (project.root / name).read_bytes() for name in KEPT_OUTPUTS} == before
    finally:
        project.run(*readme_command("git checkout params.yaml"))
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


def stale_stages(status: str) -> set[str]:
    return {line[:-1] for line in status.splitlines() if line.endswith(":") and not line[0].isspace()}


def test_param_dependencies_are_per_cell(project):
    """A value reaches a cell's stages through the cell's spec, which the check stage writes:
    after `python -m pipeline.check`, `dvc status` lists exactly the cells whose spec moved."""
    original = project.params

    def stale_after_check(edited: dict) -> set[str]:
        project.git("checkout", "--", "data/specs")  # the committed specs, whatever the edit before wrote
        project.git("clean", "-fdq", "data/specs")
        project.set_params(edited)
        before = stale_stages(project.dvc("status").stdout)  # every edit is checked first; no cell is judged yet
        assert "check" in before and not {s for s in before if s.startswith(("train", "evaluate"))}, before
        project.run(*readme_command("python -m pipeline.check"))
        return stale_stages(project.dvc("status").stdout)

    try:
        # another dataset's row: no cell of Cora's or PubMed's moves
        edited = yaml.safe_load(yaml.safe_dump(original))
        edited["hparams"]["citeseer"]["beta"] = 0.5
        assert stale_after_check(edited) == {"check"}

        # Cora's row: Cora's CAD-Net-family cells retrain, nothing before training, nothing else
        edited["hparams"]["cora"]["beta"] = 0.95
        stale = stale_after_check(edited)
        assert {s for s in stale if s.startswith("train")} == {"train@cora-cadnet", "train@cora-rw", "train@cora-gat_rw"}, stale
        assert not set(STAGES_BEFORE_TRAIN) & stale, stale
        dry = project.dvc("repro", "--dry").stdout
        assert "Running stage 'train@cora-cadnet'" in dry and "Running stage 'train@pubmed-cadnet'" not in dry, dry
        for stage in STAGES_BEFORE_TRAIN:
            assert f"Running stage '{stage}'" not in dry, dry

        # one method's own key: only that method's cells
        edited = yaml.safe_load(yaml.safe_dump(original))
        edited["method_hparams"]["gat_rw"]["attention_slope"] = 0.1
        stale = stale_after_check(edited)
        assert {s for s in stale if s.startswith("train")} == {"train@cora-gat_rw", "train@pubmed-gat_rw"}

        # the baselines' protocol on Cora: the baseline's cell sees it
        edited = yaml.safe_load(yaml.safe_dump(original))
        edited["baseline_protocol"] = {"cora": {"epochs": 7}}
        assert {s for s in stale_after_check(edited) if s.startswith("train")} == {"train@cora-gcn"}

        # a new study: the families it adds cells to, and no other
        edited = yaml.safe_load(yaml.safe_dump(original))
        edited["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 1, "grid": {"beta": [0.5]}}
        assert {s for s in stale_after_check(edited) if s.startswith(("train", "evaluate"))} == {
            "train@cora-cadnet", "evaluate@cora-cadnet"}
    finally:
        project.git("checkout", "--", "params.yaml", "data/specs")
        project.git("clean", "-fdq", "data/specs")
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


def test_an_edit_that_moves_no_number_reruns_no_cell(project):
    """A docstring, a comment and a function moved to another module: the specs stay as they were
    (code identity is a version), so no cell's stage reruns; the check stage, which reads the
    code, reruns and finds the same specs."""
    model, loop = project.root / "pipeline/models/adacad.py", project.root / "pipeline/engine/loop.py"
    splits = project.root / "pipeline/engine/splits.py"
    try:
        model.write_text(model.read_text().replace('"""', '"""Reworded. ', 1))
        source = loop.read_text()
        start, end = source.index("def should_stop_early("), source.index("def train_chunk(")
        kept = (source[:start] + source[end:]).replace("from pipeline.engine.splits import split_masks",
                                                      "from pipeline.engine.splits import should_stop_early, split_masks")
        loop.write_text("# a comment\n" + kept)
        splits.write_text(splits.read_text() + "\n\n" + source[start:end].rstrip() + "\n")
        proc = project.run(*readme_command("dvc repro"))
        assert not {s for s in stages_run(proc) if s.startswith(("train", "evaluate"))}, proc.stdout[-3000:]
        assert cells_trained(proc) == {}
    finally:
        project.git("checkout", "--", "pipeline")
    project.dvc("repro")
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


@pytest.mark.parametrize("damage", ["summary cut short", "a number in the table changed"])
def test_a_corrupted_committed_result_is_refused_by_stats_and_remade_by_repro(project, damage):
    """stats alone refuses the damaged file with one line naming it; `dvc repro` sees the output
    of the stage that wrote it changed and writes it again (the table from the seed files)."""
    table, summary = project.root / "reports/eval/cora/cadnet/main.csv", project.root / "reports/eval/cora/cadnet.json"
    accuracies = pd.read_csv(table)["test_acc"].tolist()
    if damage == "summary cut short":
        summary.write_text(summary.read_text()[:30])
    else:
        table.write_text(table.read_text().replace(",0.", ",0.9", 1))
    proc = project.dvc("repro", "-s", "stats", check=False)
    errors = [line for line in (proc.stdout + proc.stderr).splitlines() if line.startswith("error: ")]
    assert proc.returncode != 0 and len(errors) == 1 and "reports/eval/cora/cadnet" in errors[0], proc.stderr[-2000:]
    log = project.dvc("repro")
    remade_by = "evaluate" if damage == "summary cut short" else "train"  # the table: train, from the seeds
    assert f"Running stage '{remade_by}@cora-cadnet'" in log.stdout, log.stdout[-2000:]
    assert pd.read_csv(table)["test_acc"].tolist() == accuracies
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


def test_a_baselines_chunk_size_reruns_its_cell_and_going_back_trains_nothing(project):
    """A baseline's seeds depend on their chunk: `seed_chunk` reaches its stages through its cell
    file, so DVC retrains it (and only the cells whose seeds depend on it); back at the old
    size, its seeds come back from the stash."""
    project.git("checkout", "--", "params.yaml")
    project.dvc("repro")  # the committed settings, whatever the tests before left
    try:
        project.set_params(dict(project.params, seed_chunk=1))
        out = project.dvc("repro").stdout
        ran = set(re.findall(r"Running stage '([^']+)'", out))
        assert {"train@cora-gcn", "evaluate@cora-gcn"} <= ran, out
        assert not {"train@cora-cadnet", "train@cora-rw"} & ran, out
        assert set(pd.read_csv(project.root / "reports/eval/cora/gcn/baselines.csv")["engine"]) == {"batched (chunk of 1)"}
    finally:
        project.git("checkout", "--", "params.yaml")
    log = project.dvc("repro").stderr
    assert f"train cora/gcn/baselines: {RUNS} seeds, {RUNS} reused, 0 to train" in log, log[-3000:]
    assert "Data and pipelines are up to date." in project.dvc("status").stdout



def stages_run(proc: subprocess.CompletedProcess) -> set[str]:
    return set(re.findall(r"Running stage '([^']+)'", proc.stdout))


def cells_trained(proc: subprocess.CompletedProcess) -> dict[str, int]:
    """The cells a `dvc repro` or `dvc exp run` trained seeds of, and how many."""
    found = re.findall(r"train (\S+): \d+ seeds, \d+ reused, (\d+) to train", proc.stdout + proc.stderr)
    return {cell: int(n) for cell, n in found if int(n)}


def test_the_readmes_experiments_rerun_what_they_change_and_going_back_trains_nothing(project):
    """The README's experiments table, command by command and verbatim, each retraining exactly
    the cells it says; then the README's way back, which trains nothing and gives back the
    committed per-seed tables."""
    committed = {p: p.read_bytes() for p in (project.root / "reports/eval").rglob("*.csv")}
    before = {p.name: torch.load(p, weights_only=False) for p in project.seed_files()}

    # Cora only: Cora's CAD-Net-family cells retrain, nothing else, nothing before training
    proc = project.run(*readme_command("dvc exp run -S hparams.cora.beta=0.9"))
    assert cells_trained(proc) == {"cora/cadnet/main": RUNS, "cora/rw/variants": RUNS, "cora/gat_rw/variants": RUNS}, \
        proc.stderr[-3000:]
    trains = {stage for stage in stages_run(proc) if stage.startswith("train")}
    assert trains and all("@cora-" in stage for stage in trains), trains  # GCN's stage reads Cora's row, trains none
    for stage in STAGES_BEFORE_TRAIN:
        assert f"Running stage '{stage}'" not in proc.stdout, proc.stdout[-3000:]

    # everywhere: Cora's seeds are those of the run before (the same settings); PubMed's train
    proc = project.run(*readme_command("dvc exp run -S beta=0.9"))
    assert cells_trained(proc) == {"pubmed/cadnet/main": RUNS, "pubmed/rw/variants": RUNS}, proc.stderr[-3000:]  # GCN reads no beta
    assert project.params["beta"] == 0.9  # -S wrote the override into params.yaml
    after = {p.name: torch.load(p, weights_only=False) for p in project.seed_files()}
    assert sorted(after) == sorted(before)
    for name in after:  # every seed retrained under the new fingerprint ...
        assert after[name]["fingerprint"] != before[name]["fingerprint"]
        # ... and the override reached the model: gamma = beta + (1 - beta) c >= beta
        assert float(after[name]["gamma"].min()) >= 0.9 - 1e-6
    gamma_hist = (project.root / "reports/eval/cora/cadnet/main_gamma.csv").read_text().splitlines()
    assert float(gamma_hist[1].split(",")[0]) >= 0.9 - 1e-4
    assert project.metrics()["cora"]["cadnet"]["test_acc"]["mean"] == pytest.approx(
        100 * sum(r["test_acc"] for r in after.values()) / RUNS, abs=1e-3)

    # what moved: the README's `dvc metrics diff` lists the metrics that changed
    diff = json.loads(project.dvc("metrics", "diff", "--json").stdout).get("reports/metrics.json", {})
    assert any(key.startswith("pubmed.") for key in diff), diff
    shown = project.run(*readme_command("dvc metrics diff")).stdout
    assert all(key in shown for key in diff), shown
    # the data plots: `dvc plots diff` overlays the committed run and the experiment
    plots = json.loads(project.dvc("plots", "diff", "HEAD", "--json").stdout)["data"]
    assert set(plots["reports/plots/accuracy/cora_cadnet.csv"][0]["revisions"]) == {"HEAD", "workspace"}
    assert "reports/plots/loss/cora_rw.csv" in plots

    proc = project.run(*readme_command("dvc exp run -S studies.variants.runs.pubmed.rw=100"))
    assert cells_trained(proc) == {"pubmed/rw/variants": 100 - RUNS}, proc.stderr[-3000:]  # its seeds are reused
    # one cell's seed count reruns that cell's stages and the aggregates, not every cell's
    assert stages_run(proc) == {"check", "train@pubmed-rw", "evaluate@pubmed-rw", "stats", "plot",
                                "curves"}, proc.stdout[-3000:]
    assert project.metrics()["pubmed"]["rw"]["runs"] == 100
    proc = project.run(*readme_command("dvc exp run -S 'studies.variants.methods=[]'"))
    assert cells_trained(proc) == {}, proc.stdout[-3000:]
    assert not list((project.root / "reports/eval/cora/rw").glob("*.csv"))  # its family holds no cell now
    assert list(project.metrics()["cora"]) == ["cadnet", "gcn"]

    # back to the paper's settings: every seed comes back from the stash, none retrains
    project.run(*readme_command("git checkout params.yaml reports/"))
    proc = project.run(*readme_command("dvc repro"))
    assert cells_trained(proc) == {}, proc.stderr[-3000:]
    assert {p: p.read_bytes() for p in (project.root / "reports/eval").rglob("*.csv")} == committed
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


def test_a_new_study_and_a_new_grid_value_train_their_cells_only(project):
    """A study is one block of params.yaml: `dvc repro` trains its cells in the families they
    join and no other cell (the families' other cells are kept); a grid value more trains that
    value's cell only; the study's numbers sit in the metrics beside Table 2's cell."""
    project.git("checkout", "--", "params.yaml")
    project.dvc("repro")  # the committed settings, whatever the tests before left
    try:
        params = project.params
        params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 1, "grid": {"beta": [0.5]}}
        project.set_params(params)
        proc = project.dvc("repro")
        assert cells_trained(proc) == {"cora/cadnet/beta-beta=0.5": 1}, proc.stderr[-3000:]
        assert stages_run(proc) == {"check", "train@cora-cadnet", "evaluate@cora-cadnet", "stats", "plot", "curves"}
        params["studies"]["beta"]["grid"]["beta"] = [0.5, 0.95]
        project.set_params(params)
        proc = project.dvc("repro")
        assert cells_trained(proc) == {"cora/cadnet/beta-beta=0.95": 1}, proc.stderr[-3000:]
        assert "2 of its 3 cells' tables were written under their spec already; kept" in proc.stderr
        metrics = project.metrics()["cora"]
        assert {"cadnet", "cadnet@beta-beta=0.5", "cadnet@beta-beta=0.95"} <= set(metrics), metrics
        assert "## Beta (Figure B.4)" in (project.root / "reports/results.md").read_text()
    finally:
        project.git("checkout", "--", "params.yaml")
    proc = project.dvc("repro")
    assert cells_trained(proc) == {}, proc.stderr[-3000:]
    assert not (project.root / "reports/eval/cora/cadnet/beta-beta=0.5.csv").exists()
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


CLUSTER_FAMILIES = (("cora", "cadnet"), ("cora", "gcn"), ("pubmed", "rw"))


def _drop_seeds_and_tables(project: Project, families) -> dict[Path, dict]:
    """The seed files (read first) of the families' cells now in params.yaml, and their tables'
    record, gone, as if never trained (seed files of cells that earlier tests left stay)."""
    kept = {}
    for dataset, method in families:
        tables = project.root / "reports/eval" / dataset / method
        cells = [p.stem for p in tables.glob("*.csv") if not p.stem.endswith(("_gamma", "_epochs"))]
        for path in sorted(p for cell in cells for p in (project.root / "data/runs" / dataset / method / cell).glob("seed_*.pt")):
            kept[path] = torch.load(path, weights_only=False)
            path.unlink()
        forget_tables(project, dataset, method)
    assert kept
    return kept


def _same_seeds(before: dict[Path, dict]) -> list[str]:
    """The seed files whose records differ from ``before``'s, bit for bit (history, selection,
    the adaptive weights); a missing file differs."""
    differ = []
    for path, old in before.items():
        new = torch.load(path, weights_only=False) if path.exists() else None
        if new is None or any(new[k] != old[k] for k in ("history", "test_acc", "selected_epoch", "fingerprint")) \
                or not torch.equal(new["gamma"], old["gamma"]):
            differ.append(path.name)
    return differ


def _serve(project: Project, command: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(readme_command(command), cwd=project.root, env=env or project.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _wait_for_file(path: Path, *processes: subprocess.Popen) -> None:
    """Until ``path`` exists; a process that ends first fails the test with its stderr."""
    while not path.exists():
        for process in processes:
            if process.poll() is not None:
                raise AssertionError(f"{process.args} exited {process.returncode}: {process.stderr.read()[-3000:]}")
        time.sleep(0.1)


def _wait_for_workers(address: str, count: int, *processes: subprocess.Popen) -> None:
    """Until ``count`` workers have joined the scheduler at ``address``, however slow the machine;
    a process that ends first fails the test with its stderr."""
    from distributed import Client

    with Client(address) as client:
        while len(client.scheduler_info()["workers"]) < count:
            for process in processes:
                if process.poll() is not None:
                    said = process.stderr.read()[-3000:] if process.stderr else ""
                    raise AssertionError(f"{process.args} exited {process.returncode}: {said}")
            time.sleep(0.1)


def test_the_readmes_local_cluster_trains_the_seeds_a_local_run_trains(project):
    """The README's cluster, verbatim: `python -m pipeline.cluster local --workers 2` (two Dask
    workers here), then `export CADNET_CLUSTER=...` and `dvc repro`: the three families whose
    seeds and tables were removed train on the cluster (CAD-Net batched, a vmapped baseline's
    fixed chunks, a variant) and give the local run's seeds bit for bit; `dvc status` is clean
    after. Ctrl-C stops the cluster and removes its file."""
    before = _drop_seeds_and_tables(project, CLUSTER_FAMILIES)
    scheduler_file = project.root / "cluster.json"
    cluster = _serve(project, "python -m pipeline.cluster local --workers 2")
    try:
        _wait_for_file(scheduler_file, cluster)
        script = "\n".join(readme_command(c) and c for c in ('export CADNET_CLUSTER="$PWD/cluster.json"', "dvc repro"))
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=project.root, env=project.env, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-4000:]
    finally:
        cluster.send_signal(signal.SIGINT)
        cluster.wait()
    assert "the Dask cluster at" in proc.stderr, proc.stderr[-3000:]
    assert set(cells_trained(proc)) == {"cora/cadnet/main", "cora/gcn/baselines", "pubmed/rw/variants"}, proc.stderr[-3000:]
    assert not _same_seeds(before)
    assert not scheduler_file.exists()
    assert "Data and pipelines are up to date." in project.dvc("status").stdout


def test_the_readmes_cluster_by_hand_serves_the_train_stage(project):
    """`dask scheduler` and `dask worker` as the README writes them, the workers in this
    project's environment: a train stage pointed at them trains PubMed's RW cell there, the
    local run's seeds bit for bit."""
    before = _drop_seeds_and_tables(project, [("pubmed", "rw")])
    scheduler_file = project.root / "cluster.json"
    env = dict(project.env, PYTHONPATH=str(project.root))  # the workers import this copy's code
    scheduler = _serve(project, "dask scheduler --scheduler-file cluster.json", env)
    workers = None
    try:
        _wait_for_file(scheduler_file, scheduler)
        workers = _serve(project, "dask worker --scheduler-file cluster.json --nthreads 1 --nworkers 2", env)
        _wait_for_workers(json.loads(scheduler_file.read_text())["address"], 2, workers, scheduler)
        proc = subprocess.run([sys.executable, "-m", "pipeline.train", "pubmed", "rw"], cwd=project.root,
                              env=dict(project.env, CADNET_CLUSTER=str(scheduler_file)), capture_output=True, text=True)
    finally:
        for process in (workers, scheduler):
            if process is not None:
                process.send_signal(signal.SIGINT)
                process.wait()
        scheduler_file.unlink(missing_ok=True)
    assert proc.returncode == 0 and "the Dask cluster at" in proc.stderr, proc.stderr[-3000:]
    assert not _same_seeds(before)


def test_the_readmes_batch_system_cluster_submits_jobs_whose_workers_join(project, tmp_path):
    """The README's SLURM command, verbatim, with a stand-in for SLURM on the PATH (`sbatch`
    keeps the job script it is given, `scancel` and `squeue` answer): four jobs, each asking for
    16 cores, 64 GB and 4 hours and starting 16 one-thread workers of this environment at the
    scheduler. One job's script, run here with one worker instead of 16, joins the scheduler."""
    bin_dir, jobs = tmp_path / "slurm-bin", tmp_path / "jobs"
    bin_dir.mkdir()
    jobs.mkdir()
    # dask-jobqueue submits the jobs side by side: each keeps a file of its own
    (bin_dir / "sbatch").write_text(f'#!/bin/bash\njob=$(mktemp {jobs}/XXXXXX)\ncp "$1" "$job"\n'
                                    'echo "Submitted batch job $$"\n')
    for tool in ("scancel", "squeue"):
        (bin_dir / tool).write_text("#!/bin/bash\nexit 0\n")
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    scheduler_file = project.root / "cluster.json"
    env = dict(project.env, PATH=f"{bin_dir}{os.pathsep}{project.env['PATH']}")
    cluster = _serve(project, "python -m pipeline.cluster slurm --workers 4 --cores 16 --memory 64GB --walltime 04:00:00", env)
    worker = None
    try:
        _wait_for_file(scheduler_file, cluster)
        while len(list(jobs.iterdir())) < 4:
            assert cluster.poll() is None, cluster.stderr.read()[-3000:]
            time.sleep(0.1)
        script = next(jobs.iterdir()).read_text()
        address = json.loads(scheduler_file.read_text())["address"]
        assert "#SBATCH --cpus-per-task=16" in script and "#SBATCH --mem=60G" in script and "#SBATCH -t 04:00:00" in script
        worker_line = next(line for line in script.splitlines() if "-m distributed.cli.dask_worker" in line)
        interpreter, rest = worker_line.split(" -m distributed.cli.dask_worker ", 1)
        assert Path(interpreter).resolve() == Path(sys.executable).resolve(), script  # this environment's python
        assert rest.startswith(address), script
        assert "--nthreads 1" in script and "--nworkers 16" in script, script
        worker = subprocess.Popen(["bash", "-c", script.replace("--nworkers 16", "--nworkers 1")], cwd=project.root,
                                  env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        _wait_for_workers(address, 1, worker, cluster)
    finally:
        if worker is not None:
            os.killpg(worker.pid, signal.SIGTERM)
            worker.wait()
        cluster.send_signal(signal.SIGINT)
        cluster.wait()
    assert not scheduler_file.exists()


def test_the_readmes_queue_plans_then_trains_the_short_cells_and_packs_their_seeds(project):
    """The README's queue, verbatim: the dry run trains nothing; the run brings every cell to 100
    seeds, writes no table, and packs the seed files; a second dry run has nothing left. The
    seeds it added are removed after. Its deadline is kept with figures measured by this
    project's own runs, which a machine loaded unevenly can make several times too high (PubMed's
    gat_rw, never run, borrows one scaled by its peers' ratio): where a run stops at the deadline,
    the README's answer, running it again, must go on from there and finish."""
    runs = project.root / "data/runs"
    before = set(runs.rglob("seed_*.pt"))
    tracked = {p: p.read_bytes() for p in (project.root / "reports").rglob("*") if p.is_file()}
    try:
        dry = project.run(*readme_command("python -m pipeline.queue --runs 100 --deadline 9m --dry-run")).stderr
        assert "Tables 2-3: cora/cadnet/main: 2 -> 100 seeds, ~" in dry, dry[-3000:]
        assert set(runs.rglob("seed_*.pt")) == before
        packed = set()  # each run packs the seed files of the cells it planned
        for attempt in range(3):
            had = len(set(runs.rglob("seed_*.pt")))
            proc = project.run(*readme_command("python -m pipeline.queue --runs 100 --deadline 9m --pack seeds.tar"))
            assert len(set(runs.rglob("seed_*.pt"))) > had, proc.stderr[-3000:]  # each run goes on
            with tarfile.open(project.root / "seeds.tar") as tar:
                packed |= set(tar.getnames())
            if "deadline reached" not in proc.stderr:
                break
        else:
            raise AssertionError(f"three runs of the queue stopped at the deadline:\n{proc.stderr[-3000:]}")
        assert len(list((runs / "cora/cadnet/main").glob("seed_*.pt"))) == 100
        assert "data/runs/pubmed/gat_rw/variants/seed_099.pt" in packed
        assert {p: p.read_bytes() for p in tracked} == tracked
        again = project.run(*readme_command("python -m pipeline.queue --runs 100 --deadline 9m --dry-run")).stderr
        assert "cells short of 100 seeds" in again and "queue on cpu: 0 cells" in again, again[-3000:]
    finally:
        for path in set(runs.rglob("seed_*.pt")) - before:
            path.unlink()
        (project.root / "seeds.tar").unlink(missing_ok=True)


def test_the_readmes_mirror_and_plan_commands(project, tmp_path):
    """`export CADNET_MIRROR=...` then `dvc repro`, as the README writes them (its ~/datasets/cadnet
    is the test's mirror here): the absolute path reaches the stages (the fixture's own `dvc repro`
    downloaded every file from this mirror); the plan prints."""
    home = tmp_path / "home"
    (home / "datasets").mkdir(parents=True)
    (home / "datasets/cadnet").symlink_to(project.env["CADNET_MIRROR"])
    script = "\n".join(c for c in README_COMMANDS if c.startswith("export CADNET_MIRROR")) + "\n" + "dvc repro\n"
    script += 'python -c "import os; print(os.environ[\'CADNET_MIRROR\'])"\n'
    env = {k: v for k, v in project.env.items() if k != "CADNET_MIRROR"}
    proc = subprocess.run(["bash", "-e", "-c", script], cwd=project.root, env=dict(env, HOME=str(home)),
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines()[-1] == project.env["CADNET_MIRROR"], proc.stdout[-2000:]
    assert cells_trained(proc) == {}
    checked = project.run(*readme_command("python -m pipeline.check"))
    plan = checked.stdout + checked.stderr
    assert "`dvc repro` trains nothing now" in plan and "the whole selection, for reference" in plan, plan


def test_the_readmes_figure_commands_redraw_and_show_the_figures_offline(project):
    figures = sorted((project.root / "reports/figures").glob("*.png"))
    drawn = {p: p.stat().st_mtime_ns for p in figures}
    proc = project.run(*readme_command("dvc repro -f -s plot"))
    assert stages_run(proc) == {"plot"}, proc.stdout[-2000:]
    assert all(p.stat().st_mtime_ns != drawn[p] for p in figures)
    project.run(*readme_command("dvc plots show reports/figures"))
    page = (project.root / "dvc_plots/index.html").read_text()
    assert "<img" in page and "<script" not in page and "https://" not in page, page[:2000]  # nothing to fetch
    assert all(p.name in page for p in figures), page[:2000]


def forget_tables(project: Project, dataset: str = "cora", method: str = "cadnet") -> None:
    """As if train had stopped before writing the family's tables: it judges each cell by its
    seeds again (tables written under their cell's spec are otherwise kept as they are)."""
    (project.root / f"reports/eval/{dataset}/{method}/_written.json").unlink()


def test_interrupted_train_retrains_only_missing_seed(project):
    seeds = project.seed_files()
    assert len(seeds) == RUNS
    keep, lost = seeds[0], seeds[1]
    kept_record = torch.load(keep, weights_only=False)
    lost_record = torch.load(lost, weights_only=False)
    keep_mtime = keep.stat().st_mtime_ns
    lost.unlink()
    forget_tables(project)
    time.sleep(0.05)

    proc = project.run(sys.executable, "-m", "pipeline.train", "cora", "cadnet")
    assert f"{RUNS} seeds, {RUNS - 1} reused, 1 to train" in proc.stderr, proc.stderr[-2000:]
    assert lost.exists()
    assert keep.stat().st_mtime_ns == keep_mtime  # untouched
    retrained = torch.load(lost, weights_only=False)
    assert retrained["seed"] == lost_record["seed"]
    assert retrained["fingerprint"] == kept_record["fingerprint"] == lost_record["fingerprint"]
    assert not list(lost.parent.glob(".*.tmp"))
    project.resumed = (lost_record, retrained)

    # a stale file (other fingerprint) is set aside in the stash and retrained; the good one is not
    stale = dict(kept_record, fingerprint="stale")
    torch.save(stale, keep)
    forget_tables(project)
    lost_mtime = lost.stat().st_mtime_ns
    project.run(sys.executable, "-m", "pipeline.train", "cora", "cadnet")
    assert torch.load(keep, weights_only=False)["fingerprint"] == kept_record["fingerprint"]
    assert lost.stat().st_mtime_ns == lost_mtime
    assert torch.load(project.root / "data/stash/cora/cadnet/stale" / keep.name, weights_only=False)["fingerprint"] == "stale"


def test_resumed_seed_matches_uninterrupted_run(project):
    """A seed retrained after an interruption carries the same fingerprint as the lost file, so
    it must be the same run: same selected test accuracy and the same loss curve."""
    if not hasattr(project, "resumed"):
        pytest.skip("needs test_interrupted_train_retrains_only_missing_seed")
    lost, retrained = project.resumed
    same = (retrained["test_acc"] == pytest.approx(lost["test_acc"], abs=1e-6)
            and retrained["history"]["val_loss"] == pytest.approx(lost["history"]["val_loss"], abs=1e-5))
    assert same, (lost["test_acc"], retrained["test_acc"], lost.get("engine"), retrained.get("engine"))



# The README's DVC remote: the seed files added and pushed on one machine, pulled on another.
REMOTE_COMMANDS = (
    'dvc remote add -d store "$HOME/dvc-store"',
    "dvc add data/runs",
    'git add .dvc/config data/runs.dvc && git commit -q -m "the seed files, on the DVC remote"',
    "dvc push",
    "dvc pull",
)
# Every command the README gives to run (tests/test_readme.py holds this list equal to the
# README's). The first two are .ci/run's (tests/test_readme.py holds them to it); the tests of
# this file run every other one, verbatim, through readme_command.
README_COMMANDS = (
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && dvc repro",
    "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' && pytest",
    "dvc repro",
    'export CADNET_MIRROR="$(realpath ~/datasets/cadnet)"',
    "python -m pipeline.check",
    "dvc exp run --temp -S runs=10 -S 'datasets=[citeseer,cora]' -S 'methods=[cadnet]'",
    r"dvc exp show --md --drop '.*' --keep 'Experiment|^runs$|.*\.cadnet\.test_acc\.mean'",
    "python -m pipeline.cluster local --workers 2",
    'export CADNET_CLUSTER="$PWD/cluster.json"',
    "dask scheduler --scheduler-file cluster.json",
    "dask worker --scheduler-file cluster.json --nthreads 1 --nworkers 2",
    "python -m pipeline.cluster slurm --workers 4 --cores 16 --memory 64GB --walltime 04:00:00",
    "python -m pipeline.queue --runs 100 --deadline 9m --dry-run",
    "python -m pipeline.queue --runs 100 --deadline 9m --pack seeds.tar",
    "dvc repro -f -s plot",
    "dvc plots show reports/figures",
    "dvc exp run -S beta=0.9",
    "dvc exp run -S hparams.cora.beta=0.9",
    "dvc exp run -S studies.variants.runs.pubmed.rw=100",
    "dvc exp run -S 'studies.variants.methods=[]'",
    "dvc metrics diff",
    "git checkout params.yaml reports/",
    "git checkout params.yaml",
    "dvc repro --dry --allow-missing",
    *REMOTE_COMMANDS,
)


def readme_command(command: str) -> list[str]:
    """``command`` as argv, once it is known to stand in the README as written here."""
    assert command in README_COMMANDS and command in readme_commands(), command
    return shlex.split(command)  # `dvc` and `python`: the test's environment's, first on its PATH


def test_the_readmes_quick_look_runs_and_leaves_the_committed_results_alone(project):
    """The README's quick look, verbatim (this project's settings train 5 epochs on small graphs):
    it runs in a temporary copy, and the working tree, its results and its seed files stay as
    they were; the README's `dvc exp show` then shows it, with its metric columns."""
    tracked = {path: path.read_bytes() for path in [project.root / "params.yaml", *(project.root / "reports").rglob("*")]
               if path.is_file()}
    seeds = {path: path.stat().st_mtime_ns for path in (project.root / "data/runs").rglob("seed_*.pt")}
    proc = project.run(*readme_command(README_COMMANDS[5]))
    assert "Ran experiment(s)" in proc.stdout + proc.stderr
    assert {path: path.read_bytes() for path in tracked} == tracked
    assert {path: path.stat().st_mtime_ns for path in (project.root / "data/runs").rglob("seed_*.pt")} == seeds
    shown = project.run(*readme_command(README_COMMANDS[6])).stdout
    header = next(line for line in shown.splitlines() if line.startswith("|"))
    assert "cora.cadnet.test_acc.mean" in header and "citeseer.cadnet.test_acc.mean" in header and "runs" in header
    assert "rw.test_acc" not in header  # only the columns kept
    assert any(line.split("|")[-2].strip() == "10" for line in shown.splitlines()[2:]), shown  # the quick look's row


def test_a_clone_lacks_only_the_raw_files_and_graphs_and_a_remote_brings_them_and_the_seeds(project, tmp_path):
    """A clone holds every result: `dvc status` lists only the download and preprocess stages,
    whose outputs DVC keeps out of git, and `dvc repro --dry --allow-missing` has nothing to run.
    Then the README's remote, verbatim: the seed files added and pushed, a clone pulls the raw
    files, the graphs and the seeds, is up to date, and trains none of its seeds again."""
    project.git("checkout", "--", "params.yaml")
    project.dvc("repro")  # whatever the tests before left
    project.git("add", "-A")
    project.git("commit", "-q", "--allow-empty", "-m", "the runs of the tests before")
    clone = tmp_path / "clone"
    project.run("git", "clone", "-q", str(project.root), str(clone))
    cloned = Project(clone, project.env)
    status = json.loads(cloned.dvc("status", "--json").stdout)
    stale = {stage: why for stage, why in status.items() if stage.split("@")[0] not in ("download", "preprocess")}
    assert {stage.split("@")[0] for stage in status} == {"download", "preprocess"}, stale
    assert "Data and pipelines are up to date." in cloned.run(*readme_command("dvc repro --dry --allow-missing")).stdout

    home = tmp_path / "home"
    home.mkdir()
    for root, commands in ((project.root, REMOTE_COMMANDS[:-1]), (tmp_path / "pulled", REMOTE_COMMANDS[-1:])):
        if root != project.root:
            project.run("git", "clone", "-q", str(project.root), str(root))
        script = "\n".join(c for c in commands if readme_command(c))  # each as the README writes it
        proc = subprocess.run(["bash", "-e", "-c", script], cwd=root, env=dict(project.env, HOME=str(home)),
                              capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr[-3000:]
    pulled = Project(tmp_path / "pulled", project.env)
    assert "Data and pipelines are up to date." in pulled.dvc("status").stdout
    forget_tables(pulled)  # judged by its seeds: those pulled are the committed tables' own
    proc = pulled.run(sys.executable, "-m", "pipeline.train", "cora", "cadnet")
    assert f"train cora/cadnet/main: {RUNS} seeds, {RUNS} reused, 0 to train" in proc.stderr, proc.stderr[-2000:]

