"""Evaluate stage: ``python -m pipeline.evaluate <dataset> [<method>]``.

Reads the per-seed table that the train stage wrote for one (dataset, method) cell,
``reports/eval/<dataset>/<method>.csv``, checks it holds the seeds its spec asks for, and writes
beside it ``<method>.json``: the number of runs, the mean and standard deviation of test accuracy
in percent over them, and the mean time per seed-epoch and epochs run. It reads committed files
only, so it reruns on any clone.
"""
from __future__ import annotations

import json

from pipeline import config
from pipeline.files import write_text_atomic
from pipeline.spec import read_spec
from pipeline.tables import per_seed_path, read_per_seed, summarize


def main(argv: list[str]) -> None:
    dataset, method = config.cell_args(argv, "evaluate")
    runs = read_spec(dataset, method)["runs"]
    table = read_per_seed(dataset, method, runs, with_summary=False)
    summary = summarize(table) if runs else {"runs": 0}  # runs 0: in the DVC matrix, not run
    write_text_atomic(per_seed_path(dataset, method).with_suffix(".json"), json.dumps(summary, indent=2) + "\n")
    if not runs:
        print(f"{dataset}/{method}: not run (runs 0)")
        return
    acc = summary["test_acc"]
    print(f"{dataset}/{method}: {acc['mean']:.2f} ± {acc['std']:.2f} over {summary['runs']} runs")


if __name__ == "__main__":
    config.run_main(main, kept="the per-seed table is kept; the summary is written whole or not at all")
