"""A cell's summary and how the reports print it: mean, std and bootstrap CI of its per-seed
test accuracies, the paper's number beside it, the paired test by seed, and a checked claim's
row. The stats stage (:mod:`pipeline.stats`) and the studies' sections (:mod:`pipeline.report.studies`)
share them."""
from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from scipy import stats as scipy_stats

from pipeline import config

BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0


# A cell whose seeds nearly all select their last epoch is flagged as still improving.
STILL_IMPROVING_SHARE = 0.9


def still_improving(m: dict) -> bool:
    """Nearly every seed had its lowest validation loss at its last epoch: the cell's epochs
    ran out while the model was still learning, so more epochs would move it."""
    return m.get("last_epoch_share", 0.0) >= STILL_IMPROVING_SHARE


def improving_footnote(flagged: list[str]) -> list[str]:
    """The note under a table whose cells ``flagged`` (``cora/sgc (100% of its seeds)``) carry †."""
    if not flagged:
        return []
    return ["", *textwrap.wrap(
        f"† still improving when its epochs ran out: at least {100 * STILL_IMPROVING_SHARE:.0f}% of the seeds had "
        "their lowest validation loss at their last epoch, so more epochs would move this cell (with early "
        "stopping in its settings, the epoch cap cut training short and the mean understates the model; a "
        "method trained a fixed number of epochs, as SGC's public settings are, simply ends there): "
        + ", ".join(flagged) + ".", width=100, break_on_hyphens=False)]


def bootstrap_ci(values: np.ndarray) -> tuple[float, float]:
    """95% bootstrap confidence interval of the mean (BCa, as scipy does by default);
    fixed resampling seed so reruns give the same interval."""
    if len(values) < 2 or np.all(values == values[0]):
        return float(values.mean()), float(values.mean())
    result = scipy_stats.bootstrap(
        (values,), np.mean, confidence_level=0.95, n_resamples=BOOTSTRAP_RESAMPLES,
        random_state=np.random.default_rng(BOOTSTRAP_SEED),
    )
    return float(result.confidence_interval.low), float(result.confidence_interval.high)


def method_metrics(per_seed: pd.DataFrame, paper_mean_std: list[float] | None) -> dict:
    """Summary of one cell: accuracy in percent, its CI, and the gap to the paper's row."""
    acc = 100.0 * per_seed["test_acc"].to_numpy(dtype=float)
    low, high = bootstrap_ci(acc)
    std = float(acc.std(ddof=1)) if len(acc) > 1 else 0.0
    # unrounded: each printed value is rounded once, where it is printed (3 decimals here, then 2
    # there, moved ten stds by 0.01)
    metrics = {
        "runs": int(len(acc)),
        "test_acc": {"mean": float(acc.mean()), "std": std, "ci95_low": low, "ci95_high": high},
    }
    if {"selected_epoch", "epochs_run"} <= set(per_seed.columns):
        metrics["last_epoch_share"] = float((per_seed["selected_epoch"] == per_seed["epochs_run"]).mean())
    if isinstance(paper_mean_std, str):  # the paper's cell says what happened there, e.g. OOM
        metrics["paper"] = paper_mean_std
    elif paper_mean_std is not None:
        paper_mean, paper_std = paper_mean_std
        diff = float(acc.mean()) - paper_mean
        metrics["paper"] = {"mean": paper_mean, "std": paper_std}
        metrics["diff"] = diff
        if paper_std:  # GDEN's row gives means only
            metrics["diff_in_paper_std"] = diff / paper_std
    return metrics


def metric_key(cell: config.Cell) -> str:
    """A cell's key under its dataset in metrics.json and cells.json: its method for a cell of
    Tables 2 and 3, ``<method>@<cell name>`` for another study's."""
    return cell.method if cell.study in config.TABLE_STUDIES and not cell.setting else f"{cell.method}@{cell.name}"


def fmt_acc(m: dict) -> str:
    return f"{m['test_acc']['mean']:.2f} ± {m['test_acc']['std']:.2f}"


def fmt_paper(paper) -> str:
    if isinstance(paper, str):
        return paper
    return f"{paper['mean']:.1f}" + ("" if paper["std"] is None else f" ± {paper['std']:.1f}")


def runs_label(m: dict) -> str:
    return "" if m["runs"] >= 100 else f" ({m['runs']} seeds)"


def paired_test(ours: pd.DataFrame, theirs: pd.DataFrame) -> tuple[float, int]:
    """Paired t-test of test accuracy, paired by seed (seed s of every method sees split s):
    the p-value and the number of pairs."""
    pairs = ours[["seed", "test_acc"]].merge(theirs[["seed", "test_acc"]], on="seed", suffixes=("_a", "_b"))
    if len(pairs) < 2:
        return float("nan"), len(pairs)
    return float(scipy_stats.ttest_rel(pairs["test_acc_a"], pairs["test_acc_b"]).pvalue), len(pairs)


def paired_means(ours: pd.DataFrame, theirs: pd.DataFrame) -> tuple[float, float, int, float]:
    """Two cells on the seeds both have (seed s of every method sees split s): each one's mean
    accuracy (%) over those seeds, how many, and the paired t-test's p (nan under two pairs or
    where every pair differs by the same amount as none)."""
    pairs = ours[["seed", "test_acc"]].merge(theirs[["seed", "test_acc"]], on="seed", suffixes=("_a", "_b"))
    p_value, _ = paired_test(ours, theirs)
    return 100 * float(pairs["test_acc_a"].mean()), 100 * float(pairs["test_acc_b"].mean()), len(pairs), p_value


# One checked claim: (claim, dataset, verdict, evidence).
Claim = tuple[str, str, str, str]


def claim_row(claim: str, dataset: str, verdict: str, evidence: str) -> str:
    return f"| {claim} | {dataset} | {verdict} | {evidence} |"
