"""Stats stage: ``python -m pipeline.stats``.

Gathers the per-seed tables of every trained cell of the studies and writes
- ``reports/metrics.json``: what ``dvc metrics show``, ``dvc metrics diff`` and ``dvc exp show``
  display: each cell's headline (seeds, mean and std of test accuracy), e.g. the columns
  ``cora.cadnet.test_acc.mean`` and ``cora.rw.runs`` for the cells of Tables 2 and 3 (the
  studies of config.TABLE_STUDIES), ``cora.cadnet@beta-beta=0.65.test_acc.mean`` for another
  study's (:func:`metric_key`);
- ``reports/cells.json``: each cell's whole summary (the headline, the 95% CI, the share of seeds
  selected at their last epoch, the paper's number and the gap to it), kept out of the metrics
  so that an experiment's table of metrics fits a screen;
- ``reports/results.md``: our numbers beside the paper's, each method beside its own row of
  the paper (Table 2, Table 3 or appendix B.3), and Table 3 in the paper's layout;
- ``reports/timing.md``: time per seed-epoch, kept out of the metrics so that a rerun with
  identical results shows no change in ``dvc metrics diff``.

Only the selected cells are read: files of datasets or methods dropped from the selection may
still lie in ``reports/eval`` and must not leak into the results.
"""
from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from scipy import stats as scipy_stats

from pipeline import config
from pipeline.files import write_text_atomic
from pipeline.methods import BASELINES, REGISTRY, TABLE3_ROWS, with_variants_beside
from pipeline.paths import CELLS_FILE, DATA_STATS_ROOT, METRICS_FILE, RESULTS_FILE, TIMING_FILE
from pipeline.tables import read_per_seed

PAPER_FILE = Path(__file__).with_name("paper_results.yaml")
BOOTSTRAP_RESAMPLES = 10_000
BOOTSTRAP_SEED = 0
# "On par with APPNP in time per epoch" read as: CAD-Net's epoch costs at most this many of
# APPNP's (the paper's own ratios, which it calls on par, run from 0.91 on CiteSeer to 1.53 on
# Photo, appendix B.8).
ON_PAR_FACTOR = 1.6
# A cell whose seeds nearly all select their last epoch is flagged as still improving.
STILL_IMPROVING_SHARE = 0.9
PAPER_TABLE_NAMES = {"table2": "Table 2", "table3": "Table 3", "tableB3": "App. B.3"}


def load_paper() -> dict:
    return yaml.safe_load(PAPER_FILE.read_text())


def paper_row(paper: dict, dataset: str, method: str) -> list[float] | None:
    """The paper's [mean, std] for this method on this dataset, from the method's own table."""
    table, row = REGISTRY[method].paper
    return paper.get(table, {}).get(row, {}).get(dataset)


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
    metrics = {
        "runs": int(len(acc)),
        "test_acc": {"mean": round(float(acc.mean()), 3), "std": round(std, 3),
                     "ci95_low": round(low, 3), "ci95_high": round(high, 3)},
    }
    if {"selected_epoch", "epochs_run"} <= set(per_seed.columns):
        last = (per_seed["selected_epoch"] == per_seed["epochs_run"]).mean()
        metrics["last_epoch_share"] = round(float(last), 3)
    if isinstance(paper_mean_std, str):  # the paper's cell says what happened there, e.g. OOM
        metrics["paper"] = paper_mean_std
    elif paper_mean_std is not None:
        paper_mean, paper_std = paper_mean_std
        diff = float(acc.mean()) - paper_mean
        metrics["paper"] = {"mean": paper_mean, "std": paper_std}
        metrics["diff"] = round(diff, 3)
        if paper_std:  # GDEN's row gives means only
            metrics["diff_in_paper_std"] = round(diff / paper_std, 3)
    return metrics


def metric_key(cell: config.Cell) -> str:
    """A cell's key under its dataset in metrics.json and cells.json: its method for a cell of
    Tables 2 and 3, ``<method>@<cell name>`` for another study's."""
    return cell.method if cell.study in config.TABLE_STUDIES and not cell.setting else f"{cell.method}@{cell.name}"


def collect(tables: dict[config.Cell, pd.DataFrame], paper: dict) -> dict:
    """cells.json's content: ``{dataset: {metric_key: summary}}`` for every trained cell (the
    paper's number beside a cell of Tables 2 and 3)."""
    metrics: dict = {}
    for cell, table in tables.items():
        key = metric_key(cell)
        paper_mean_std = paper_row(paper, cell.dataset, cell.method) if key == cell.method else None
        metrics.setdefault(cell.dataset, {})[key] = method_metrics(table, paper_mean_std)
    return metrics


def headline(cells: dict) -> dict:
    """metrics.json's content: of each cell's summary, its seeds and its accuracy's mean and std."""
    return {dataset: {method: {"runs": m["runs"], "test_acc": {k: m["test_acc"][k] for k in ("mean", "std")}}
                      for method, m in entry.items()} for dataset, entry in cells.items()}


def _fmt_acc(m: dict) -> str:
    return f"{m['test_acc']['mean']:.2f} ± {m['test_acc']['std']:.2f}"


def _fmt_paper(paper) -> str:
    if isinstance(paper, str):
        return paper
    return f"{paper['mean']:.1f}" + ("" if paper["std"] is None else f" ± {paper['std']:.1f}")


def _runs_label(m: dict) -> str:
    return "" if m["runs"] >= 100 else f" ({m['runs']} seeds)"


def still_improving(m: dict) -> bool:
    """Nearly every seed had its lowest validation loss at its last epoch: the cell's epochs
    ran out while the model was still learning, so more epochs would move it."""
    return m.get("last_epoch_share", 0.0) >= STILL_IMPROVING_SHARE


def results_markdown(metrics: dict, params: dict, paper: dict, tables: dict, every: dict | None = None) -> str:
    """The reviewer's tables: ours beside the paper's, and the dataset statistics check;
    ``every``: the summaries of every trained cell (:func:`collect`), for the other studies."""
    compared = comparisons(tables, metrics, params)
    lines = [
        "# CAD-Net reproduction: results",
        "",
        "Generated by `dvc repro` (stage `stats`); do not edit by hand. Test accuracy in percent,",
        f"mean ± sample std over the runs; 95% CI: BCa bootstrap of the mean ({BOOTSTRAP_RESAMPLES} resamples).",
        "CAD-Net at a glance, the paper's claims, then its tables in its order, then every cell beside its",
        "own row of the paper. Times per epoch: `reports/timing.md`.",
    ]
    claims = accuracy_claims(compared, metrics) + time_claims(tables, paper)
    lines += headline_markdown(claims, metrics, params)
    lines += claims_markdown(claims)
    lines += table2_markdown(metrics, params, paper)
    lines += significance_markdown(compared, metrics, paper)
    lines += table3_markdown(metrics, params, paper)
    lines += studies_markdown(every or {}, params, paper)
    lines += datasets_markdown(params, paper)
    lines += [
        "",
        "## Every cell",
        "",
        "Each method is compared with its own row of the paper; `diff` = our mean − the paper's mean,",
        "`diff / σ` divides it by the paper's std.",
        "",
        "| dataset | method | runs | ours | 95% CI of mean | paper | paper's table | diff | diff / σ |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for dataset, entry in metrics.items():
        for method, m in entry.items():
            table = PAPER_TABLE_NAMES[REGISTRY[method].paper[0]]
            if isinstance(m.get("paper"), dict):
                paper_cells = (f"{_fmt_paper(m['paper'])} | {table} | {m['diff']:+.2f} | "
                               f"{m['diff_in_paper_std']:+.2f}")
            elif "paper" in m:
                paper_cells = f"{m['paper']} | {table} | - | -"
            else:
                paper_cells = "- | - | - | -"
            lines.append(
                f"| {dataset} | {method} | {m['runs']} | {_fmt_acc(m)} | "
                f"({m['test_acc']['ci95_low']:.2f}, {m['test_acc']['ci95_high']:.2f}) | {paper_cells} |"
            )
    lines += [
        "",
        "Methods: `cadnet` diffuses as the authors' code does, Z_cad = (T^T)^K Z (the published",
        "numbers came from that code); `cadnet_pull` uses the paper's Eq. (6), Z_cad = T^K Z.",
        "The other methods are listed in `pipeline/methods.py` (what each fixes) and `params.yaml`",
        "(`method_hparams`: their own settings).",
    ]
    return "\n".join(lines) + "\n"


# Where the paper reports a study's cell: its number in paper_results.yaml (None: it reports none)
STUDY_PAPER = {
    "label_rates": lambda paper, d, m, point: paper.get("label_rates", {}).get(d, {}).get(m, {}).get(
        dict(point).get("train_per_class")),
    "random_splits": lambda paper, d, m, point: paper.get("table4", {}).get(m, {}).get(d),
}
# The label-rate study's 20 column is each method's Table 2 cell (the public split itself)
TABLE2_POINT = {"label_rates": (("train_per_class", 20),)}


def studies_markdown(every: dict, params: dict, paper: dict) -> list[str]:
    """Each study besides those of Tables 2 and 3, one table a study: a row per (dataset,
    method), a column per point of its grid, so that its values sit side by side; ours / the
    paper's where the paper reports the cell (Table 4, Tables B.9-B.11)."""
    lines = []
    for study, spec in params["studies"].items():
        cells = [c for c in config.cells(params) if c.study == study]
        if not cells or (study in config.TABLE_STUDIES and not spec["grid"]):
            continue
        points = list(dict.fromkeys(cell.setting for cell in cells)) + ([TABLE2_POINT[study]] if study in TABLE2_POINT else [])
        labels = [", ".join(f"{k}={v}" for k, v in point) or "-" for point in points]
        labels[-1] += " (Table 2's cell)" if study in TABLE2_POINT else ""
        lookup = STUDY_PAPER.get(study)
        lines += ["", f"## Study `{study}`", "",
                  f"Ours (mean ± std over the runs; fewer than 100 seeds are labelled; params.yaml `studies.{study}`)"
                  + (" / the paper's" if lookup else "") + ".", "",
                  "| dataset | method | " + " | ".join(labels) + " |", "|---|---|" + "---|" * len(labels)]
        for dataset, method in dict.fromkeys((c.dataset, c.method) for c in cells):
            row = []
            for point in points:
                key = method if point == TABLE2_POINT.get(study) else metric_key(config.Cell(study, dataset, method, point))
                m = every.get(dataset, {}).get(key)
                text = "not run" if m is None else f"{_fmt_acc(m)}{_runs_label(m)}"
                theirs = lookup(paper, dataset, method, point) if lookup else None
                row.append(text if theirs is None else f"{text} / {_fmt_paper({'mean': theirs[0], 'std': theirs[1]})}")
            lines.append(f"| {dataset} | {REGISTRY[method].label} | " + " | ".join(row) + " |")
    return lines


def datasets_markdown(params: dict, paper: dict) -> list[str]:
    """The selected datasets after preprocessing against the paper's Table 1."""
    lines = [
        "",
        "## Datasets after preprocessing",
        "",
        "| dataset | nodes | undirected edges | features | classes | matches the paper (Table 1) |",
        "|---|---|---|---|---|---|",
    ]
    for dataset in params["datasets"]:
        path = DATA_STATS_ROOT / f"{dataset}.json"
        if not path.exists():
            raise config.DataError(f"{path}: missing; run `dvc repro preprocess@{dataset}`")
        s = json.loads(path.read_text())
        ours = [s["nodes"], s["undirected_edges"], s["features"], s["classes"]]
        match = "yes" if ours == paper["datasets"][dataset] else f"no (paper: {paper['datasets'][dataset]})"
        lines.append(f"| {dataset} | {ours[0]} | {ours[1]} | {ours[2]} | {ours[3]} | {match} |")
    return lines


TABLE2_ROWS = (*BASELINES, "gden", "cadnet")  # the paper's order; GDEN has no public code


def table2_markdown(metrics: dict, params: dict, paper: dict) -> list[str]:
    """Table 2 in the paper's layout: one row per method, one column per selected dataset."""
    datasets = params["datasets"]
    lines = ["", "## Table 2: CAD-Net and the baselines", "",
             "Ours (mean ± std; fewer than 100 seeds are labelled) / the paper's. `not run`: the baseline is not",
             "selected for that dataset (params.yaml `baselines`); GDEN has no public code, so only the paper's",
             "numbers are shown.", "",
             "| method | " + " | ".join(datasets) + " |", "|---|" + "---|" * len(datasets)]
    flagged = []  # the cells marked †, for the footnote
    for method in with_variants_beside(TABLE2_ROWS, "table2", {m for entry in metrics.values() for m in entry}):
        cells = []
        for dataset in datasets:
            theirs = paper["table2"].get(method if method == "gden" else REGISTRY[method].paper[1], {}).get(dataset)
            theirs_text = "-" if theirs is None else (theirs if isinstance(theirs, str) else
                                                      _fmt_paper({"mean": theirs[0], "std": theirs[1]}))
            m = metrics.get(dataset, {}).get(method)
            if method == "gden":
                cells.append(f"not reproduced / {theirs_text}")
            elif m is None:
                cells.append(f"not run / {theirs_text}")
            else:
                mark = ""
                if still_improving(m):
                    mark = " †"
                    flagged.append(f"{dataset}/{method} ({100 * m['last_epoch_share']:.0f}% of its seeds)")
                cells.append(f"{_fmt_acc(m)}{_runs_label(m)}{mark} / {theirs_text}")
        label = "GDEN" if method == "gden" else REGISTRY[method].label
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if flagged:
        lines += ["", *textwrap.wrap(
            f"† still improving when its epochs ran out: at least {100 * STILL_IMPROVING_SHARE:.0f}% of the seeds had "
            "their lowest validation loss at their last epoch, so more epochs would move this cell (with early "
            "stopping in its settings, the epoch cap cut training short and the mean understates the model; a "
            "method trained a fixed number of epochs, as SGC's public settings are, simply ends there): "
            + ", ".join(flagged) + ".", width=100, break_on_hyphens=False)]
    return lines


def second_best(metrics: dict, dataset: str) -> str | None:
    """The Table 2 method other than CAD-Net with the highest mean here (by our numbers)."""
    others = {m: v["test_acc"]["mean"] for m, v in metrics.get(dataset, {}).items() if m in BASELINES}
    return max(others, key=others.get) if others else None


def paired_test(ours: pd.DataFrame, theirs: pd.DataFrame) -> tuple[float, int]:
    """Paired t-test of test accuracy, paired by seed (seed s of every method sees split s):
    the p-value and the number of pairs."""
    pairs = ours[["seed", "test_acc"]].merge(theirs[["seed", "test_acc"]], on="seed", suffixes=("_a", "_b"))
    if len(pairs) < 2:
        return float("nan"), len(pairs)
    return float(scipy_stats.ttest_rel(pairs["test_acc_a"], pairs["test_acc_b"]).pvalue), len(pairs)


def comparisons(tables: dict, metrics: dict, params: dict) -> list[dict]:
    """Per dataset where CAD-Net and a baseline ran: the second best by our means, and the
    paired t-test of CAD-Net against it (Table B.6 and the claims both read these)."""
    found = []
    for dataset in params["datasets"]:
        runner_up = second_best(metrics, dataset)
        if runner_up is None or "cadnet" not in metrics.get(dataset, {}):
            continue
        p_value, pairs = paired_test(tables[(dataset, "cadnet")], tables[(dataset, runner_up)])
        found.append({"dataset": dataset, "runner_up": runner_up, "p_value": p_value, "pairs": pairs})
    return found


def significance_markdown(compared: list[dict], metrics: dict, paper: dict) -> list[str]:
    """Appendix B.6: CAD-Net against the second-best method, per dataset, beside the paper's."""
    rows = []
    b6 = paper.get("tableB6", {})
    for c in compared:
        dataset, runner_up = c["dataset"], c["runner_up"]
        ours, theirs = metrics[dataset]["cadnet"]["test_acc"], metrics[dataset][runner_up]["test_acc"]
        paper_ci = b6.get("bci_second_best", {}).get(dataset), b6.get("bci_cadnet", {}).get(dataset)
        rows.append(f"| {dataset} | {REGISTRY[runner_up].label} | {c['pairs']} | {c['p_value']:.2e} | "
                    f"({theirs['ci95_low']:.2f}, {theirs['ci95_high']:.2f}) | ({ours['ci95_low']:.2f}, {ours['ci95_high']:.2f}) | "
                    f"{b6.get('p_value', {}).get(dataset, '-')} | {tuple(paper_ci[0]) if paper_ci[0] else '-'} | "
                    f"{tuple(paper_ci[1]) if paper_ci[1] else '-'} |")
    if not rows:
        return []
    return ["", "## Table B.6: CAD-Net against the second-best method", "",
            "Second best by our own means among the baselines run; paired t-test (`scipy.stats.ttest_rel`) of",
            "the per-seed test accuracies, paired by seed (the same split); 95% BCa bootstrap CIs of the means.",
            "The paper's second-best method may differ from ours.", "",
            "| dataset | second best (ours) | pairs | p-value | CI second best | CI CAD-Net | paper p-value | "
            "paper CI second best | paper CI CAD-Net |", "|---|---|---|---|---|---|---|---|---|", *rows]


CLAIM_BEST = "CAD-Net is the best method (Table 2)"
CLAIM_SIGNIFICANT = "CAD-Net is significantly better than the second best (Table B.6)"
CLAIM_TIME = "CAD-Net is on par with APPNP in time per epoch (Table B.8)"
# One checked claim: (claim, dataset, verdict, evidence).
Claim = tuple[str, str, str, str]


def claim_row(claim: str, dataset: str, verdict: str, evidence: str) -> str:
    return f"| {claim} | {dataset} | {verdict} | {evidence} |"


def time_claims(tables: dict[tuple[str, str], pd.DataFrame], paper: dict) -> list[Claim]:
    """The paper's "on par with APPNP in time per epoch", per dataset where both ran: CAD-Net's
    ms per seed-epoch over APPNP's, from seeds trained on the same device with the same engine
    and chunk size (a CPU's and a GPU's times do not compare, and a batched seed-epoch gets
    cheaper as its chunk grows), beside the paper's ratio."""
    found = []
    for dataset in dict.fromkeys(d for d, _ in tables):
        if (dataset, "cadnet") not in tables or (dataset, "appnp") not in tables:
            continue
        means = {}
        for method in ("cadnet", "appnp"):
            table = tables[(dataset, method)]
            means[method] = table.groupby([table["device"], table["engine"].astype(str)])["ms_per_seed_epoch"].mean()
        common = means["cadnet"].index.intersection(means["appnp"].index)
        theirs = [paper["ms_per_epoch"].get(m, {}).get(dataset) for m in ("cadnet", "appnp")]
        paper_text = (f"paper {theirs[0] / theirs[1]:.2f}" if all(isinstance(t, float) for t in theirs)
                      else "paper -")
        if common.empty:
            found.append((CLAIM_TIME, dataset, "not comparable here",
                          "CAD-Net and APPNP trained on different devices, engines or chunk sizes; "
                          "`python -m pipeline.bench` times both in one run"))
            continue
        for device, engine in common:
            ratio = means["cadnet"][(device, engine)] / means["appnp"][(device, engine)]
            verdict = "holds" if ratio <= ON_PAR_FACTOR else "does not hold"
            found.append((CLAIM_TIME, dataset, verdict,
                          f"CAD-Net / APPNP = {ratio:.2f} on {device}, {engine} ({paper_text}); "
                          f"on par: at most {ON_PAR_FACTOR}x"))
    return found


def accuracy_claims(compared: list[dict], metrics: dict) -> list[Claim]:
    """Table 2's and Table B.6's claims, per dataset where CAD-Net and a baseline both ran."""
    found = []
    for c in compared:
        dataset, runner_up, p_value = c["dataset"], c["runner_up"], c["p_value"]
        ours = metrics[dataset]["cadnet"]["test_acc"]["mean"]
        theirs = metrics[dataset][runner_up]["test_acc"]["mean"]
        run = [m for m in BASELINES if m in metrics[dataset]]
        significant = ours > theirs and p_value < 0.05
        behind = f"; {REGISTRY[runner_up].label} is significantly better" if ours < theirs and p_value < 0.05 else ""
        # only the rival the verdict names: another cell still improving is not what the claim compares
        caveat = (f"; not final: {REGISTRY[runner_up].label} still improving at the last epoch (†)"
                  if still_improving(metrics[dataset][runner_up]) else "")
        found.append((CLAIM_BEST, dataset, "holds" if ours > theirs else "does not hold",
                      f"CAD-Net {ours:.2f}, {REGISTRY[runner_up].label} {theirs:.2f}, the best of the "
                      f"{len(run)} baseline{'s' * (len(run) != 1)} run here{caveat}"))
        found.append((CLAIM_SIGNIFICANT, dataset, "holds" if significant else "does not hold",
                      f"paired t-test by seed against {REGISTRY[runner_up].label}, p < 0.05: "
                      f"p = {p_value:.2e}{behind}"))
    return found


def claims_markdown(claims: list[Claim]) -> list[str]:
    """The paper's comparative claims, one row per claim and dataset, checked against our
    numbers where both sides ran."""
    if not claims:
        return []
    return ["", "## The paper's claims, checked", "",
            "The paper: CAD-Net is the best method on every dataset, significantly better than the second best",
            "(Table B.6), and on par with APPNP in time per epoch (Table B.8: `reports/timing.md` and",
            "`reports/bench.md` hold our times; only ratios measured in one run carry across machines).", "",
            "| claim | dataset | verdict | evidence |", "|---|---|---|---|", *(claim_row(*c) for c in claims)]


def headline_markdown(claims: list[Claim], metrics: dict, params: dict) -> list[str]:
    """CAD-Net's Table 2 row beside the paper's, and each claim's verdict, one row per dataset:
    the table a reader sees first (the README shows it too)."""
    verdicts = {}
    for claim, dataset, verdict, _ in claims:
        verdicts.setdefault((claim, dataset), []).append(verdict)
    rows = []
    for dataset in params["datasets"]:
        m = metrics.get(dataset, {}).get("cadnet")
        if m is None:
            continue
        paper_text = _fmt_paper(m["paper"]) if isinstance(m.get("paper"), dict) else "-"
        cells = [", ".join(dict.fromkeys(verdicts.get((claim, dataset), ["-"])))
                 for claim in (CLAIM_BEST, CLAIM_SIGNIFICANT, CLAIM_TIME)]
        rows.append(f"| {config.DATASET_NAMES[dataset]} | {_fmt_acc(m)}{_runs_label(m)} | {paper_text} | "
                    + " | ".join(cells) + " |")
    if not rows:
        return []
    return ["", "## At a glance", "",
            "CAD-Net's test accuracy (ours and the paper's Table 2), and whether each of the paper's claims",
            "holds here: best of the baselines run (Table 2), significantly better than the second best",
            "(Table B.6), on par with APPNP in time per epoch (Table B.8). The evidence for each verdict:",
            "`reports/results.md`, \"The paper's claims, checked\".", "",
            "| dataset | CAD-Net, ours | CAD-Net, paper | best (Table 2) | significantly better (Table B.6) | "
            "time on par with APPNP (Table B.8) |", "|---|---|---|---|---|---|", *rows]


def table3_markdown(metrics: dict, params: dict, paper: dict) -> list[str]:
    """Table 3 (and appendix B.3's no-entropy row) in the paper's layout: one row per
    aggregation, one column per dataset, ours beside the paper's."""
    datasets = [d for d in (params["studies"].get("variants") or {}).get("datasets", []) if d in params["datasets"]]
    rows = [m for m in (*TABLE3_ROWS, "cadnet_noent") if any(m in metrics.get(d, {}) for d in datasets)]
    if not datasets or not rows:
        return []
    lines = [
        "",
        "## Table 3: aggregation methods inside the same CAD-Net (and B.3: no entropy term)",
        "",
        "Ours (mean ± std over the runs; fewer than 100 seeds are labelled) / the paper's; the gap in",
        "the paper's std. AdaCAD is `cadnet`.",
        "",
        "| aggregation | " + " | ".join(datasets) + " |",
        "|---|" + "---|" * len(datasets),
    ]
    for method in rows:
        label = "AdaCAD" if method == "cadnet" else REGISTRY[method].label
        cells = []
        for dataset in datasets:
            m = metrics.get(dataset, {}).get(method)
            if m is None:
                cells.append("not run")
            elif isinstance(m.get("paper"), dict):
                cells.append(f"{_fmt_acc(m)}{_runs_label(m)} / {m['paper']['mean']:.1f} ± {m['paper']['std']:.1f} "
                             f"({m['diff_in_paper_std']:+.1f}σ)")
            else:
                cells.append(f"{_fmt_acc(m)}{_runs_label(m)}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def timing_markdown(tables: dict[tuple[str, str], pd.DataFrame], paper: dict) -> str:
    lines = [
        "# Time per epoch",
        "",
        "Generated by `dvc repro` (stage `stats`). Ours: mean over seeds of `ms_per_seed_epoch`,",
        "the wall time of one epoch (training step and eval-mode pass) on the machine that ran the",
        "train stage, divided by the seeds trained together (batched engine: a chunk; single engine:",
        "one). The paper's: one seed on one GTX 1080 Ti (appendix B.8). Wall times depend on the",
        "machine and its load; compare ratios measured in one run (`python -m pipeline.bench`).",
        "",
        "| dataset | method | engine | device | ms / seed-epoch (ours) | ms / epoch (paper GPU) |",
        "|---|---|---|---|---|---|",
    ]
    for (dataset, method), table in tables.items():
        paper_ms = paper["ms_per_epoch"].get(method, {}).get(dataset)
        paper_text = "-" if paper_ms is None else (paper_ms if isinstance(paper_ms, str) else f"{paper_ms:.2f}")
        for device, part in table.groupby("device", sort=True):  # a CPU's and a GPU's times are not averaged
            engine = ", ".join(sorted(part["engine"].astype(str).unique()))
            lines.append(f"| {dataset} | {method} | {engine} | {device} ({len(part)} seeds) | "
                         f"{part['ms_per_seed_epoch'].mean():.2f} | {paper_text} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> None:
    params = config.load_params()
    paper = load_paper()
    every = {cell: read_per_seed(cell.dataset, cell.method, cell.name, config.runs_for(params, cell))
             for cell in config.trained_cells(params)}
    cells = collect(every, paper)
    tables = {key: every[cell] for key, cell in config.table_cells(params).items()}  # Tables 2 and 3
    in_tables = {d: {m: s for m, s in entry.items() if (d, m) in tables} for d, entry in cells.items()}
    markdown = results_markdown(in_tables, params, paper, tables, cells)  # checks every input before writing
    timing = timing_markdown(tables, paper)
    write_text_atomic(CELLS_FILE, json.dumps(cells, indent=2) + "\n")
    write_text_atomic(METRICS_FILE, json.dumps(headline(cells), indent=2) + "\n")
    write_text_atomic(RESULTS_FILE, markdown)
    write_text_atomic(TIMING_FILE, timing)
    print(markdown)


if __name__ == "__main__":
    config.run_main(main)
