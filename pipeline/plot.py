"""Plot stage: ``python -m pipeline.plot``.

Figures drawn from ``reports/eval/`` alone (in git), so they can be redrawn from a clone that
holds no seed files (``dvc repro -s plot``). In ``reports/figures/`` (declared as DVC plots, so
``dvc plots show`` renders them offline), titled with any setting that differs from the paper's
(the paper's band is only called the paper's result at its own settings), for each selected
dataset:
- ``<dataset>_accuracy.png``: test accuracy of every seed, per method, against the paper's
  mean ± std band (Table 2);
- ``<dataset>_gamma.png``: histogram of the adaptive weight gamma over nodes at the selected
  epoch (the paper's Fig. B.3), all seeds pooled and seed 0 alone;
and, where the baselines study ran:
- ``<dataset>_table2.png``: CAD-Net and each baseline, mean ± std beside the paper's (Table 2);
and, where the variants study (Table 3) ran:
- ``<dataset>_table3.png``: each aggregation's mean ± std beside the paper's (Table 3);
and, per study of the paper that has cells here, its figure, one panel per dataset, the study's
setting on the x axis, a line per method with a band of ± one std:
- ``figure1_hidden_units.png``, ``figure2_label_rates.png``, ``figure3_ranges.png`` and
  ``figureB4_beta.png`` (with the state of the art, our best Table 2 baseline, and CAD alone,
  beta = 1, as dashed lines);
and, for `dvc plots diff` between experiments, the data behind these figures as CSV files that
DVC draws itself: ``reports/plots/accuracy/<dataset>_<method>.csv`` (test accuracy per seed) and
``reports/plots/studies/<study>_<dataset>_<method>.csv`` (mean and std per setting). The loss
curves, from the per-epoch summaries, are the curves stage's (``pipeline/curves.py``).
"""
from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on CI or servers
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pipeline import config  # noqa: E402
from pipeline.report import studies  # noqa: E402
from pipeline.files import write_atomic, write_csv_atomic  # noqa: E402
from pipeline.models import BASELINES, REGISTRY, TABLE3_ROWS, with_variants_beside  # noqa: E402
from pipeline.paths import FIGURES_ROOT, PLOT_DATA_ROOT  # noqa: E402
from pipeline.stats import collect, load_paper, paper_row  # noqa: E402
from pipeline.report.summary import metric_key  # noqa: E402
from pipeline.report.tables import read_per_seed, table_paths  # noqa: E402

DEFAULT_METHOD = "cadnet"
LEGEND_BELOW = dict(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2, frameon=False)


def changed_settings(params: dict, paper: dict, dataset: str, method: str = DEFAULT_METHOD) -> list[str]:
    """The settings of this run that differ from the paper's (its CAD-Net table and 100 runs),
    as ``key=value`` strings; empty when the figure shows the paper's own setting."""
    hp = config.hparams_for(params, dataset, method)
    reference = paper["settings"]["cadnet"][dataset]
    changed = [f"{k}={hp[k]}" for k, v in reference.items() if hp[k] != v]
    runs = config.runs_for(params, config.Cell(config.table_cell_name(params, method), dataset, method))
    if runs != paper["settings"]["runs"]:
        changed.append(f"{runs} seeds")
    return changed


def titled(text: str, changed: list[str]) -> str:
    return text if not changed else f"{text}\n(not the paper's settings: {', '.join(changed)})"


def read_table(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise config.DataError(f"{path}: missing; run the evaluate stage first")
    return pd.read_csv(path)


def table_of(params: dict, dataset: str, method: str) -> pd.DataFrame:
    """The per-seed table of ``method``'s cell of Tables 2 and 3 on ``dataset``."""
    return read_per_seed(dataset, method, config.table_cell_name(params, method))


def accuracy_figure(params: dict, dataset: str, methods: list[str], paper_mean_std: list[float], changed: list[str]):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    mean, std = paper_mean_std
    band = f"paper {mean:.1f} ± {std:.1f}" if not changed else f"paper {mean:.1f} ± {std:.1f}, at the paper's settings"
    ax.axhspan(mean - std, mean + std, color="tab:gray", alpha=0.25, label=band)
    ax.axhline(mean, color="tab:gray", lw=1)
    for method in methods:
        table = table_of(params, dataset, method)
        acc = 100 * table["test_acc"]
        summary = f"{acc.mean():.2f} ± {acc.std(ddof=1) if len(acc) > 1 else 0:.2f}" if len(acc) else "not run"
        points = ax.plot(table["seed"], acc, "o", ms=3, alpha=0.7, label=f"{REGISTRY[method].label}: {summary}")
        ax.axhline(acc.mean(), color=points[0].get_color(), lw=1, ls="--")
    ax.set(xlabel="seed (run index)", ylabel="test accuracy (%)",
           title=titled(f"{config.DATASET_NAMES[dataset]}: test accuracy per seed", changed))
    ax.legend(**LEGEND_BELOW)  # below the axes, never over the points
    return fig


def gamma_figure(params: dict, dataset: str, method: str, beta: float, changed: list[str]):
    """The paper's Fig. B.3: gamma over nodes at each seed's selected epoch; gamma >= beta."""
    path = table_paths(dataset, method, config.table_cell_name(params, method))["gamma"]
    if path.exists() and not path.read_text().strip():  # runs 0: train wrote its tables empty
        fig, ax = plt.subplots(figsize=(8, 3.2))
        ax.text(0.5, 0.5, "not run (runs 0)", transform=ax.transAxes, ha="center", va="center", color="tab:gray")
        ax.set(xlabel=r"adaptive weight $\gamma_i$ at the selected epoch", ylabel="nodes",
               title=f"{config.DATASET_NAMES[dataset]}, {REGISTRY[method].label}: not run")
        return fig
    hist = read_table(path)
    single = [c for c in hist.columns if c.startswith("count_seed_")][0]
    width = hist["bin_right"] - hist["bin_left"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, column, label in ((axes[0], "count_all_seeds", "all seeds"), (axes[1], single, single[6:].replace("_", " "))):
        ax.bar(hist["bin_left"], hist[column], width=width, align="edge", color="tab:blue")
        ax.axvline(beta, color="tab:red", lw=1, ls="--", label=rf"$\beta$ = {beta} (lower bound of $\gamma$)")
        ax.set(xlabel=r"adaptive weight $\gamma_i$ at the selected epoch", ylabel="nodes",
               title=f"{config.DATASET_NAMES[dataset]}, {REGISTRY[method].label}: {label}")
        ax.legend(fontsize=7, loc="upper left")
    if changed:
        fig.suptitle(f"not the paper's settings: {', '.join(changed)}", fontsize=8)
    fig.tight_layout()
    return fig


def comparison_figure(params: dict, dataset: str, methods: list[str], paper: dict, title: str, paper_label: str):
    """Each method's mean ± std (ours) beside the paper's, in the given (the paper's) order; a
    method's tick says how many seeds it ran where that is not the paper's count (none: not
    run), and where the paper reports no number (OOM)."""
    fig, ax = plt.subplots(figsize=(max(7.0, 0.9 * len(methods)), 4))
    handles, ticks, bars = {}, [], []
    for k, method in enumerate(methods):
        acc = 100 * table_of(params, dataset, method)["test_acc"]
        std = acc.std(ddof=1) if len(acc) > 1 else 0
        handles["ours (mean ± std)"] = ax.errorbar(k - 0.12, acc.mean(), yerr=std, fmt="o", color="tab:blue", capsize=3)
        bars.append((k - 0.12, acc.mean(), std))
        row = paper_row(paper, dataset, method)
        if isinstance(row, list):  # not a cell the paper marks OOM
            handles[paper_label] = ax.errorbar(k + 0.12, row[0], yerr=row[1], fmt="s", color="tab:gray", capsize=3)
            bars.append((k + 0.12, row[0], row[1] or 0))
        name = "AdaCAD" if method == DEFAULT_METHOD and "Table 3" in paper_label else REGISTRY[method].label.split(" (")[0]
        notes = [] if len(acc) == paper["settings"]["runs"] else [f"{len(acc)} seeds" if len(acc) else "not run"]
        notes += [f"paper {row}"] if isinstance(row, str) else []
        ticks.append("\n".join([textwrap.fill(name, 11), *notes]))  # long names wrapped, not overlapping
    ax.set_xticks(range(len(methods)), ticks, fontsize=8)
    ax.legend(list(handles.values()), list(handles), fontsize=8, loc="best")
    ax.set(xlabel="method, in the paper's order", ylabel="test accuracy (%)",
           title=f"{config.DATASET_NAMES[dataset]}: {title}")
    clip_wide_bars(ax, [bar for bar in bars if bar[1] == bar[1]])  # NaN: a cell not run
    return fig


def clip_wide_bars(ax, bars: list[tuple[float, float, float]]) -> None:
    """y limits that fit every mean and the typical error bar: a bar many times wider than the
    others (one unstable cell) would squeeze every other row flat, so it runs off the axes
    and its std is written beside its point."""
    if not bars:
        return
    means = [mean for _, mean, _ in bars]
    typical = sorted(std for _, _, std in bars)[len(bars) // 2]
    low, high = min(means) - 3 * typical - 0.5, max(means) + 3 * typical + 0.5
    ax.set_ylim(low, high)
    for x, mean, std in bars:
        if mean - std < low or mean + std > high:
            ax.annotate(f"± {std:.1f}", (x, mean), xytext=(4, 0), textcoords="offset points", fontsize=7,
                        va="center", color="tab:red")


def table3_figure(params: dict, dataset: str, methods: list[str], paper: dict):
    return comparison_figure(params, dataset, methods, paper, "aggregation methods in the same CAD-Net", "paper (Table 3)")


def table2_figure(params: dict, dataset: str, methods: list[str], paper: dict):
    return comparison_figure(params, dataset, methods, paper, "CAD-Net and the baselines", "paper (Table 2)")


def main_study_methods(params: dict) -> list[str]:
    """The selected methods of the main study (Table 2's CAD-Net row)."""
    return [m for m in (params["studies"].get("main") or {}).get("methods", []) if m in params["methods"]]


def selected_main_method(params: dict) -> str | None:
    """The method whose gamma and loss curves are drawn: CAD-Net itself unless the main study
    does not train it (then its first method; None: the main study trains none)."""
    methods = main_study_methods(params)
    return DEFAULT_METHOD if DEFAULT_METHOD in methods else (methods[0] if methods else None)


# The paper's figure of each study: (its name, the x axis, the grid key on it, log-scaled x)
STUDY_FIGURES = {
    "hidden_units": ("Figure 1", "hidden units (width of the hidden layer)", "hidden", True),
    "label_rates": ("Figure 2", "labelled nodes per class", "train_per_class", False),
    "ranges": ("Figure 3", "range (hops)", "range", False),
    "beta": ("Figure B.4", r"$\beta$ (lower bound of $\gamma$)", "beta", False),
}


def study_curves(results: studies.Results, study: str, dataset: str) -> dict[str, pd.DataFrame]:
    """Method -> its cells of the study on ``dataset`` that ran: the setting's value, mean and
    std (%) and seeds, one row per point of the grid (the label rates' 20: Table 2's cell)."""
    key = STUDY_FIGURES[study][2]
    curves = {}
    for method in studies.study_methods(results.params, study):
        rows = []
        for point in studies.points(results.params, study):
            m = results.summary(study, dataset, method, point)
            if m is not None and key in dict(point):
                # data DVC draws (the figure's text formats its own): three decimals are plenty
                rows.append({"value": dict(point)[key], "test_acc": round(m["test_acc"]["mean"], 3),
                             "std": round(m["test_acc"]["std"], 3), "runs": m["runs"]})
        if rows:
            curves[method] = pd.DataFrame(rows)
    return curves


def method_style(method: str) -> tuple[str, str]:
    """(colour, marker) of a method, the same in every figure: CAD-Net black; the baselines of
    Table 2 each a hue of tab10 in the paper's order (the eleventh with another marker); any
    other method a light tab20 shade."""
    if method == "cadnet":
        return "black", "o"
    if method in BASELINES:
        i = BASELINES.index(method)
        return plt.get_cmap("tab10")(i % 10), "os"[i // 10 % 2]
    return plt.get_cmap("tab20")((2 * list(REGISTRY).index(method) + 1) % 20), "^"


def study_figure(results: studies.Results, study: str, paper: dict | None = None):
    """The paper's figure of one study: a panel per dataset, a line per method that ran, ± one
    std as a band, each method in its own colour in every figure; the paper's numbers (Tables
    B.9-B.14, where ``paper`` has the study) as hollow markers of the same colour; seeds below
    100 in the panel."""
    name, xlabel, key, log_x = STUDY_FIGURES[study]
    datasets = studies.study_datasets(results.params, study)
    grid = sorted({dict(point)[key] for point in studies.points(results.params, study) if key in dict(point)})
    theirs = (paper or {}).get(study, {})
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.2 * len(datasets), 3.4), squeeze=False)
    legend = {}
    for ax, dataset in zip(axes[0], datasets):
        curves = study_curves(results, study, dataset)
        short = []  # methods here with fewer than 100 seeds in a cell, said in the panel
        for method, curve in curves.items():
            label = REGISTRY[method].label.replace(" (AdaCAD)", "")
            colour, marker = method_style(method)
            legend.setdefault(label, ax.plot(curve["value"], curve["test_acc"], f"{marker}-", ms=3, color=colour,
                                             lw=2 if method == "cadnet" else 1.1, label=label)[0])
            published = (theirs.get(dataset) or {}).get(method) or {}
            if published:
                values = sorted(v for v in published if v in grid)
                legend.setdefault("the paper's (hollow)", ax.plot(
                    values, [published[v][0] for v in values], marker, ms=5, mfc="none", color=colour, lw=0)[0])
            ax.fill_between(curve["value"], curve["test_acc"] - curve["std"], curve["test_acc"] + curve["std"],
                            color=colour, alpha=0.15, lw=0)
            if curve["runs"].min() < 100:
                short.append(f"{label} {int(curve['runs'].min())}")
        if short:
            ax.text(0.02, 0.02, "seeds: " + ", ".join(short), transform=ax.transAxes, fontsize=7, color="tab:gray")
        if study == "beta":
            for level, text, colour in beta_lines(results, dataset):
                line = ax.axhline(level, ls="--", lw=1, color=colour)
                legend.setdefault(text.split(":")[0], line)
                if text.startswith("state"):  # which baseline it is, here: ours at the left end, the paper's at the right
                    at_right = "paper's" in text
                    ax.annotate(text.split(": ")[-1], (0.99 if at_right else 0.01, level), xycoords=("axes fraction", "data"),
                                fontsize=7, color=colour, ha="right" if at_right else "left", va="bottom")
        if not curves:
            ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center", va="center", color="tab:gray")
        if log_x:
            ax.set_xscale("log", base=2)
        if len(grid) <= 10:  # the grid's values as ticks (beta's 21 would crowd)
            ax.set_xticks(grid, [f"{v:g}" for v in grid])
            pad = 0.05 * (grid[-1] - grid[0]) or 0.5
            ax.set_xlim(*((grid[0] / 1.15, grid[-1] * 1.15) if log_x else (grid[0] - pad, grid[-1] + pad)))
        ax.set(title=config.DATASET_NAMES[dataset], xlabel=xlabel, ylabel="test accuracy (%)")
    note = studies.CHOICES.get(study, "")
    fig.suptitle(f"{name}: {studies.TITLES[study].split(' (')[0].lower()}; mean ± std over seeds"
                 + (f"\n{textwrap.fill(note, 120)}" if note else ""), fontsize=9)
    fig.tight_layout()
    # one legend for every panel, below them
    fig.legend(legend.values(), legend.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=6, fontsize=7,
               frameon=False)
    return fig


def low_rate_figure(results: studies.Results, paper: dict):
    """``low_rate_settings`` (ours): a panel per dataset, CAD-Net's accuracy at the study's rate
    against the entropy weight, a line per learning rate (colour) and number of epochs (solid:
    the more), ± one std; the dataset's own settings ringed; SGC's label-rate cell and the
    paper's CAD-Net at that rate as dashed levels."""
    params, study = results.params, studies.LOW_RATE
    rate = params["studies"][study]["settings"]["train_per_class"]
    datasets = studies.study_datasets(params, study)
    grid = params["studies"][study]["grid"]
    fig, axes = plt.subplots(1, len(datasets), figsize=(4.6 * len(datasets), 3.6), squeeze=False)
    legend = {}
    for ax, dataset in zip(axes[0], datasets):
        own = config.hparams_for(params, dataset, DEFAULT_METHOD)
        rows = [{**dict(point), "mean": m["test_acc"]["mean"], "std": m["test_acc"]["std"]}
                for point in studies.points(params, study)
                if (m := results.summary(study, dataset, DEFAULT_METHOD, point)) is not None]
        cells = pd.DataFrame(rows)
        for (lr, epochs), line in (cells.groupby(["lr", "epochs"]) if rows else []):
            line = line.sort_values("lambda_ent")
            colour = plt.get_cmap("tab10")(grid["lr"].index(lr))  # the same colour for a lr in every panel
            style = "-" if epochs == max(grid["epochs"]) else ":"
            legend.setdefault(f"lr {lr:g}, {epochs} epochs", ax.errorbar(
                line["lambda_ent"], line["mean"], yerr=line["std"], fmt=f"o{style}", ms=3, capsize=2, color=colour)[0])
            mine = line[(line["lambda_ent"] == own["lambda_ent"]) & (lr == own["lr"]) & (epochs == own["epochs"])]
            if len(mine):
                legend.setdefault("the dataset's own settings", ax.plot(
                    mine["lambda_ent"], mine["mean"], "o", ms=10, mfc="none", color="black")[0])
        sgc = results.summary("label_rates", dataset, "sgc", (("train_per_class", rate),))
        published = (paper.get("label_rates", {}).get(dataset, {}).get(DEFAULT_METHOD) or {}).get(rate)
        if sgc is not None:
            legend.setdefault("SGC (ours)", ax.axhline(sgc["test_acc"]["mean"], ls="--", lw=1, color="tab:gray"))
        if published:
            legend.setdefault("CAD-Net, the paper's", ax.axhline(published[0], ls="--", lw=1, color="tab:olive"))
        if not rows:
            ax.text(0.5, 0.5, "not run", transform=ax.transAxes, ha="center", va="center", color="tab:gray")
        ax.set_xticks(grid["lambda_ent"], [f"{v:g}" for v in grid["lambda_ent"]])
        ax.set(title=config.DATASET_NAMES[dataset], xlabel=r"entropy weight $\lambda_{ent}$", ylabel="test accuracy (%)")
    fig.suptitle(f"CAD-Net at {rate} labels a class: its settings swept (ours, beside Figure 2); mean ± std over seeds",
                 fontsize=9)
    fig.tight_layout()
    fig.legend(legend.values(), legend.keys(), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4, fontsize=7,
               frameon=False)
    return fig


def beta_lines(results: studies.Results, dataset: str) -> list[tuple[float, str, str]]:
    """Figure B.4's dashed lines (level, "legend: label here", colour): the state of the art, twice
    (the paper does not say which method it drew): our best Table 2 baseline here and the paper's
    best Table 2 baseline here, as the claims check it; and CAD alone (beta = 1: the grid's cell,
    else Table 3's)."""
    lines = []
    baselines = {m: s for m, s in results.summaries.get(dataset, {}).items() if m in BASELINES}
    if baselines:
        best = max(baselines, key=lambda m: baselines[m]["test_acc"]["mean"])
        lines.append((baselines[best]["test_acc"]["mean"], f"state of the art (our best Table 2 baseline): "
                      f"{REGISTRY[best].label}", "tab:gray"))
    published = studies.published_means(baselines)
    if published:
        best = max(published, key=published.get)
        lines.append((published[best], f"state of the art (the paper's best Table 2 baseline): "
                      f"{REGISTRY[best].label}", "tab:olive"))
    cad = results.summary("beta", dataset, "cadnet", (("beta", 1.0),)) or results.summaries.get(dataset, {}).get("cad")
    if cad is not None:
        lines.append((cad["test_acc"]["mean"], r"CAD only ($\beta$ = 1): CAD", "tab:red"))
    return lines


def save_figure(folder: Path, name: str, fig) -> str:
    """Saved (whole or not at all) and closed as made: matplotlib keeps every open figure (it
    warns past 20)."""
    try:
        write_atomic(folder / f"{name}.png", lambda tmp: fig.savefig(tmp, format="png", dpi=110, bbox_inches="tight"))
    finally:
        plt.close(fig)
    return name


def main(argv: list[str]) -> None:
    params = config.load_params()
    paper = load_paper()
    FIGURES_ROOT.mkdir(parents=True, exist_ok=True)
    main_method = selected_main_method(params)
    saved = []

    def save(name: str, fig) -> None:
        saved.append(save_figure(FIGURES_ROOT, name, fig))

    blocks = params["studies"]
    main_methods = main_study_methods(params)
    for dataset in [d for d in blocks["main"]["datasets"] if d in params["datasets"]] if main_methods else []:
        changed = changed_settings(params, paper, dataset, main_method)
        save(f"{dataset}_accuracy", accuracy_figure(params, dataset, main_methods,
                                                    paper["table2"][DEFAULT_METHOD][dataset], changed))
        beta = config.hparams_for(params, dataset, main_method)["beta"]
        save(f"{dataset}_gamma", gamma_figure(params, dataset, main_method, beta, changed))
    variants = blocks.get("variants") or {"datasets": [], "methods": []}
    selected = {m for m in (*main_methods, *variants["methods"]) if m in params["methods"]}
    rows = [m for m in (*TABLE3_ROWS, "cadnet_noent") if m in selected]
    for dataset in [d for d in variants["datasets"] if d in params["datasets"]] if rows else []:
        save(f"{dataset}_table3", table3_figure(params, dataset, rows, paper))
    baselines = blocks.get("baselines") or {"datasets": [], "methods": []}
    for dataset in [d for d in baselines["datasets"] if d in params["datasets"]]:
        rows = ([m for m in BASELINES if m in baselines["methods"] and m in params["methods"]]
                + [m for m in main_methods if m == DEFAULT_METHOD])
        beside = {m for m in variants["methods"] if m in params["methods"] and dataset in variants["datasets"]
                  and config.runs_for(params, config.Cell("variants", dataset, m))}
        if rows:
            save(f"{dataset}_table2", table2_figure(params, dataset, with_variants_beside(tuple(rows), "table2", beside), paper))
    write_cell_data("accuracy", config.trained_cells(params), accuracy_per_seed)
    every = {cell: read_per_seed(cell.dataset, cell.method, cell.name, config.runs_for(params, cell))
             for cell in config.trained_cells(params)}
    results = studies.Results(params, collect(every, paper), every, studies.twin_cells(params, every))
    curves = {}
    for study in (s for s in STUDY_FIGURES if s in params["studies"]):
        drawn = {f"{study}_{dataset}_{method}": curve for dataset in studies.study_datasets(params, study)
                 for method, curve in study_curves(results, study, dataset).items()}
        if drawn:  # a study none of whose cells ran has no figure
            save(f"figure{STUDY_FIGURES[study][0].split()[1].replace('.', '')}_{study}", study_figure(results, study, paper))
        curves.update(drawn)
    if studies.LOW_RATE in params["studies"] and any(
            results.summary(studies.LOW_RATE, cell.dataset, cell.method, cell.setting) is not None
            for cell in config.cells(params) if cell.study == studies.LOW_RATE):
        save(studies.LOW_RATE, low_rate_figure(results, paper))
    # git keeps no empty folder, and a clone must hold this DVC output: a table with no rows
    write_tables("studies", curves or {"no_study_ran": pd.DataFrame(columns=["value", "test_acc", "std", "runs"])})
    print(f"wrote {len(saved)} figures to {FIGURES_ROOT}/ and their data to {PLOT_DATA_ROOT}/")


def write_cell_data(kind: str, cells: list[config.Cell], table_of_cell) -> None:
    """``table_of_cell(cell)`` per cell, as CSV in ``reports/plots/<kind>/<dataset>_<key>.csv``
    (key: :func:`pipeline.report.summary.metric_key`) that `dvc plots show` and `dvc plots diff` draw
    (templates in dvc.yaml). Every table is read before any file is written, each file is
    written whole, and old files of unselected cells go last."""
    write_tables(kind, {f"{cell.dataset}_{metric_key(cell)}": table_of_cell(cell) for cell in cells})


def write_tables(kind: str, tables: dict[str, pd.DataFrame]) -> None:
    """``reports/plots/<kind>/<name>.csv`` per table, each whole; old files not among them go.
    The folder exists even empty: it is a DVC output."""
    folder = PLOT_DATA_ROOT / kind
    folder.mkdir(parents=True, exist_ok=True)
    tables = {folder / f"{name}.csv": table for name, table in tables.items()}
    for path, table in tables.items():
        write_csv_atomic(path, table, index=False)
    for old in folder.glob("*.csv"):
        if old not in tables:
            old.unlink()


def accuracy_per_seed(cell: config.Cell) -> pd.DataFrame:
    table = read_per_seed(cell.dataset, cell.method, cell.name)
    return pd.DataFrame({"seed": table["seed"], "test_acc": (100 * table["test_acc"]).round(4)})


if __name__ == "__main__":
    config.run_main(main)
