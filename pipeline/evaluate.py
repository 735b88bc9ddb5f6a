"""Evaluate stage: ``python -m pipeline.evaluate <dataset> [<method>]``.

Reads the per-seed tables that the train stage wrote for the cells of one (dataset, method)
family, ``reports/eval/<dataset>/<method>/<cell>.csv``, checks each holds the seeds its spec asks
for, and writes ``reports/eval/<dataset>/<method>.json``: of each cell, the number of runs, the
mean and standard deviation of test accuracy in percent over them, and the mean time per
seed-epoch and epochs run. It reads committed files only, so it reruns on any clone.
"""
from __future__ import annotations

import json

from pipeline import config
from pipeline.files import write_text_atomic
from pipeline.engine.spec import check_family, read_index, read_spec
from pipeline.report.tables import read_per_seed, summaries_path, summarize


def main(argv: list[str]) -> None:
    dataset, method = config.cell_args(argv, "evaluate", check_method=False)
    check_family(dataset, method)
    summaries = {}
    for name in read_index(dataset, method):
        runs = read_spec(dataset, method, name)["runs"]
        table = read_per_seed(dataset, method, name, runs, with_summary=False)
        summaries[name] = summarize(table) if runs else {"runs": 0}  # runs 0: in the DVC matrix, not run
    write_text_atomic(summaries_path(dataset, method), json.dumps(summaries, indent=2) + "\n")
    for name, summary in summaries.items():
        if not summary["runs"]:
            print(f"{dataset}/{method}/{name}: not run (runs 0)")
            continue
        acc = summary["test_acc"]
        print(f"{dataset}/{method}/{name}: {acc['mean']:.2f} ± {acc['std']:.2f} over {summary['runs']} runs")


if __name__ == "__main__":
    config.run_main(main, kept="the per-seed tables are kept; the summaries are written whole or not at all")
