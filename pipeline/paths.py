"""Every path the stages read or write, relative to the project root (where `dvc repro` runs).

Kept in one torch-free module so that the light stages (stats, plot, curves) can import them without
importing the training code.
"""
from pathlib import Path

PARAMS_FILE = Path("params.yaml")
CHECKED_FILE = Path("data/params_checked.txt")  # check: written once params.yaml passed every check
SPECS_ROOT = Path("data/specs")  # check: data/specs/<dataset>/<method>.json, what one cell's numbers depend on
RAW_ROOT = Path("data/raw")  # download: data/raw/<dataset>/<upstream file name>
PROCESSED_ROOT = Path("data/processed")  # preprocess: data/processed/<dataset>/graph.pt
FEATURES_AS_READ = "features_as_read.pt"  # preprocess: beside graph.pt, the features before normalisation
DATA_STATS_ROOT = Path("reports/data")  # preprocess: reports/data/<dataset>.json and .classes.json
RUNS_ROOT = Path("data/runs")  # train: data/runs/<dataset>/<method>/seed_NNN.pt, a cache of finished seeds
LOCKS_ROOT = Path("data/locks")  # train: data/locks/<dataset>-<method>.lock while a process trains that cell
STASH_ROOT = Path("data/stash")  # train: seeds of other settings, data/stash/<dataset>/<method>/<fingerprint>/
# train: reports/eval/<dataset>/<method>{.csv,_gamma.csv,_epochs.csv}; evaluate: <method>.json
EVAL_ROOT = Path("reports/eval")
METRICS_FILE = Path("reports/metrics.json")  # stats: each cell's headline, DVC's metrics
CELLS_FILE = Path("reports/cells.json")  # stats: each cell's whole summary
RESULTS_FILE = Path("reports/results.md")  # stats
TIMING_FILE = Path("reports/timing.md")  # stats: wall times, kept out of the metrics
RUNS_FILE = Path("reports/RUNS.md")  # provenance: where each committed result came from
FIGURES_ROOT = Path("reports/figures")  # plot: PNG figures drawn from reports/eval/
CURVES_ROOT = Path("reports/curves")  # curves: PNG figures drawn from the per-epoch summaries in reports/eval/
BENCH_ROOT = Path("reports/bench")  # bench: reports/bench/<device>/<dataset>.json, the measured figures
BENCH_REPORT = Path("reports/bench_{device}.md")  # bench: the device's page, generated from them
PLOT_DATA_ROOT = Path("reports/plots")  # plot (accuracy/), curves (loss/): CSV data plots for `dvc plots show/diff`


def bench_file(device_type: str, dataset: str, root: Path = BENCH_ROOT) -> Path:
    """Where ``python -m pipeline.bench`` keeps one dataset's figures measured on one kind of device."""
    return root / device_type / f"{dataset}.json"


def class_counts_file(dataset: str, root: Path = DATA_STATS_ROOT) -> Path:
    """Where preprocess keeps a dataset's nodes per class (and public training nodes per class)."""
    return root / f"{dataset}.classes.json"


def run_dir(dataset: str, method: str, cell_name: str) -> Path:
    """Where the train stage keeps a cell's finished seeds."""
    return RUNS_ROOT / dataset / method / cell_name


def seed_file(run_dir: Path, seed: int) -> Path:
    return run_dir / f"seed_{seed:03d}.pt"
