"""Evaluate stage: ``python -m pipeline.evaluate <dataset> [<method>]``.

Reads the seed files of one (dataset, method) pair and writes, in ``reports/eval/<dataset>/``,
``<method>.csv`` (one row per seed), ``<method>.json`` (mean and standard deviation of test
accuracy in percent, over the runs) and ``<method>_gamma.csv`` (histogram of the adaptive
weights gamma over nodes at each seed's selected epoch); and, in ``data/eval/<dataset>/``,
``<method>_history.csv`` (per-epoch losses and accuracies of every seed; too large for git).
"""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import torch

from pipeline import config
from pipeline.files import write_csv_atomic, write_text_atomic
from pipeline.paths import EVAL_ROOT, HISTORY_ROOT, RUNS_ROOT, seed_file
from pipeline.tables import PER_SEED_COLUMNS, summarize

GAMMA_BINS = 50
# seeds saved before records named their device were all trained on this project's CPU machines
DEVICE_BEFORE_RECORDED = "cpu"


def load_records(dataset: str, method: str, runs: int) -> list[dict]:
    """All ``runs`` seed records, each checked to be the seed its file name says, of this
    dataset and method, all of one fingerprint: a missing, copied or mixed-in seed file is an
    error, never a row counted twice."""
    run_dir = RUNS_ROOT / dataset / method
    records = []
    for seed in range(runs):
        path = seed_file(run_dir, seed)
        if not path.exists():
            raise config.DataError(f"{path}: missing; run `dvc repro train@{dataset}-{method}`")
        try:
            record = torch.load(path, weights_only=False)
        except Exception as err:
            raise config.DataError(f"{path}: unreadable ({type(err).__name__}); delete it and rerun "
                                   f"`dvc repro train@{dataset}-{method}`") from None
        found = (record.get("seed"), record.get("dataset", dataset), record.get("method", method))
        if found != (seed, dataset, method):
            raise config.DataError(f"{path}: holds seed {found[0]} of {found[1]}/{found[2]}, not seed {seed} of "
                                   f"{dataset}/{method}; delete it and rerun `dvc repro train@{dataset}-{method}`")
        if records and record.get("fingerprint") != records[0].get("fingerprint"):
            raise config.DataError(f"{path}: trained with other settings than seed 0 (fingerprint "
                                   f"{record.get('fingerprint')} vs {records[0].get('fingerprint')}); "
                                   f"rerun `dvc repro train@{dataset}-{method}`")
        records.append(record)
    return records


def per_seed_table(records: list[dict]) -> pd.DataFrame:
    rows = [{**{k: r[k] for k in PER_SEED_COLUMNS if k in r}, "gamma_mean": float(r["gamma"].mean()),
             "device": r.get("device", DEVICE_BEFORE_RECORDED)} for r in records]
    return pd.DataFrame(rows, columns=PER_SEED_COLUMNS)


def history_table(records: list[dict]) -> pd.DataFrame:
    frames = []
    for r in records:
        frame = pd.DataFrame(r["history"])
        frame.insert(0, "epoch", range(1, len(frame) + 1))
        frame.insert(0, "seed", r["seed"])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def gamma_histogram(records: list[dict]) -> pd.DataFrame:
    """Counts of gamma over nodes, pooled over all seeds and for seed 0 alone (paper Fig. B.3)."""
    pooled = np.concatenate([r["gamma"].numpy().ravel() for r in records])
    low, high = float(pooled.min()), float(pooled.max())
    if high - low < 1e-6:  # beta = 1 puts every gamma at 1
        low, high = low - 0.005, high + 0.005
    counts, edges = np.histogram(pooled, bins=GAMMA_BINS, range=(low, high))
    first = min(records, key=lambda r: r["seed"])["gamma"].numpy().ravel()
    counts_first, _ = np.histogram(first, bins=edges)
    return pd.DataFrame({"bin_left": edges[:-1], "bin_right": edges[1:], "count_all_seeds": counts,
                         f"count_seed_{min(r['seed'] for r in records)}": counts_first})


def main(argv: list[str]) -> None:
    dataset, method = config.cell_args(argv, "evaluate")
    params = config.load_params()

    records = load_records(dataset, method, config.runs_for(params, dataset, method))
    table = per_seed_table(records)
    out_dir, history_dir = EVAL_ROOT / dataset, HISTORY_ROOT / dataset
    # each file whole or not at all, the summary last: a cut-short run leaves no summary that
    # is newer than the table it describes (stats checks the two against each other)
    write_csv_atomic(out_dir / f"{method}.csv", table, index=False, float_format="%.6g")
    if not records:  # runs 0: the cell is in the DVC matrix but not run; its outputs say so
        for path in (out_dir / f"{method}_gamma.csv", history_dir / f"{method}_history.csv"):
            write_text_atomic(path, "")
        write_text_atomic(out_dir / f"{method}.json", json.dumps({"runs": 0}, indent=2) + "\n")
        print(f"{dataset}/{method}: not run (runs 0)")
        return
    write_csv_atomic(out_dir / f"{method}_gamma.csv", gamma_histogram(records), index=False, float_format="%.6g")
    write_csv_atomic(history_dir / f"{method}_history.csv", history_table(records), index=False, float_format="%.6g")
    summary = summarize(table)
    write_text_atomic(out_dir / f"{method}.json", json.dumps(summary, indent=2) + "\n")
    acc = summary["test_acc"]
    print(f"{dataset}/{method}: {acc['mean']:.2f} ± {acc['std']:.2f} over {summary['runs']} runs")


if __name__ == "__main__":
    config.run_main(main, kept="the seed files and the evaluate outputs written before it are kept whole")
