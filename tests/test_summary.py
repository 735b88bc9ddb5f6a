"""pipeline/report/summary.py: a cell's summary (mean, std, bootstrap CI, the paper's number beside it)."""
from __future__ import annotations

import pandas as pd
import yaml

from pipeline.report import summary
from pipeline.stats import PAPER_FILE


def test_bootstrap_ci_on_larger_sample():
    import numpy as np

    values = np.random.default_rng(1).normal(80.0, 1.0, size=100)
    low, high = summary.bootstrap_ci(values)
    assert low < values.mean() < high
    # about 2 * 1.96 * 1 / sqrt(100) = 0.39 wide
    assert 0.25 < high - low < 0.6
    assert summary.bootstrap_ci(np.array([80.0, 80.0, 80.0])) == (80.0, 80.0)


def test_a_paper_cell_marked_oom_is_shown_as_such():
    paper = yaml.safe_load(PAPER_FILE.read_text())
    assert paper["table2"]["cheb"]["cs"] == "OOM"
    metrics = summary.method_metrics(pd.DataFrame({"test_acc": [0.9, 0.91]}), "OOM")
    assert metrics["paper"] == "OOM" and "diff" not in metrics
