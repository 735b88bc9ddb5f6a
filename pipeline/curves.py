"""Curves stage: ``python -m pipeline.curves``.

The figures drawn from the per-epoch summaries that the train stage commits beside each
cell's per-seed table (``reports/eval/<dataset>/<method>/<cell>_epochs.csv``), so they redraw on any
clone, in ``reports/curves/`` (declared as DVC plots):
- ``<dataset>_loss.png``: training and validation loss over epochs of the selected main
  method (CAD-Net), mean over seeds with the 10-90% band, for each selected dataset;
- ``citeseer_val_loss_cadnet_vs_rw.png``: validation loss of CAD-Net and RW on CiteSeer over
  epochs (the paper's Fig. B.1), where the variants study ran RW on CiteSeer;
and, for `dvc plots diff` between experiments, ``reports/plots/loss/<dataset>_<key>.csv`` (key:
the method, or ``<method>@<cell>`` outside Tables 2 and 3):
mean training and validation loss per epoch of every trained cell whose summary has them. The accuracy and gamma
figures are the plot stage's (``pipeline/plot.py``).
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")  # files only; no display on CI or servers
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pipeline import config  # noqa: E402
from pipeline.models import REGISTRY  # noqa: E402
from pipeline.paths import CURVES_ROOT, PLOT_DATA_ROOT  # noqa: E402
from pipeline.plot import (DEFAULT_METHOD, LEGEND_BELOW, changed_settings, read_table,  # noqa: E402
                           save_figure, selected_main_method, titled, write_cell_data)
from pipeline.stats import load_paper  # noqa: E402
from pipeline.report.tables import table_paths  # noqa: E402


def epochs_of(dataset: str, method: str, name: str) -> pd.DataFrame:
    """A trained cell's per-epoch summary over its seeds, as the train stage wrote it."""
    return read_table(table_paths(dataset, method, name)["epochs"])


def _mean_and_band(ax, epochs: pd.DataFrame, loss: str, label: str, band_label: str | None = None,
                   color: str | None = None) -> None:
    """One curve per epoch: the mean over the seeds still running (a seed that stopped early
    leaves it) and the band of their 10th to 90th percentiles, where the summary has them."""
    line = ax.plot(epochs["epoch"], epochs[f"{loss}_mean"], color=color, label=label)
    if epochs[f"{loss}_p10"].notna().all():
        ax.fill_between(epochs["epoch"], epochs[f"{loss}_p10"], epochs[f"{loss}_p90"], color=line[0].get_color(),
                        alpha=0.2, label=band_label)


def loss_figure(dataset: str, method: str, name: str, changed: list[str]):
    epochs = epochs_of(dataset, method, name)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for loss, color in (("train_loss", "tab:blue"), ("val_loss", "tab:orange")):
        _mean_and_band(ax, epochs, loss, f"{loss}, mean over the seeds still running",
                       f"{loss}, 10-90% of those seeds", color)
    if epochs.empty:
        ax.text(0.5, 0.5, "no per-epoch losses recorded with these seeds:\nretrain the cell to draw them",
                ha="center", va="center", transform=ax.transAxes)
    ax.set(xlabel="epoch", ylabel="NLL loss (eval mode)",
           title=titled(f"{config.DATASET_NAMES[dataset]}, {REGISTRY[method].label}: loss over epochs "
                        "(a seed that stopped early leaves the mean)", changed))
    ax.legend(**LEGEND_BELOW)
    return fig


def validation_loss_figure(dataset: str, cells: dict[str, str]):
    """The paper's Fig. B.1: validation loss over epochs, mean over seeds (a seed that stopped
    early leaves the mean from then on), with its 10-90% band."""
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for method, name in cells.items():
        label = "CAD-Net" if method == DEFAULT_METHOD else REGISTRY[method].label
        _mean_and_band(ax, epochs_of(dataset, method, name), "val_loss", f"{label} (mean over seeds)")
    ax.set(xlabel="epoch", ylabel="validation NLL (eval mode)", title=f"{config.DATASET_NAMES[dataset]}: validation loss (paper Fig. B.1)")
    ax.legend(fontsize=8)
    return fig


def mean_losses(cell: config.Cell) -> pd.DataFrame:
    epochs = epochs_of(cell.dataset, cell.method, cell.name)
    table = epochs[["epoch", "train_loss_mean", "val_loss_mean"]].rename(columns=lambda c: c.removesuffix("_mean"))
    return table.round(6)


def main(argv: list[str]) -> None:
    params = config.load_params()
    paper = load_paper()
    CURVES_ROOT.mkdir(parents=True, exist_ok=True)
    main_method = selected_main_method(params)
    cells = config.table_cells(params, trained=False)
    saved = [save_figure(CURVES_ROOT, f"{dataset}_loss",
                         loss_figure(dataset, main_method, cells[(dataset, main_method)].name,
                                     changed_settings(params, paper, dataset, main_method)))
             for dataset in params["datasets"] if (dataset, main_method) in cells]
    if ("citeseer", "rw") in cells and ("citeseer", DEFAULT_METHOD) in cells:
        saved.append(save_figure(CURVES_ROOT, "citeseer_val_loss_cadnet_vs_rw", validation_loss_figure(
            "citeseer", {m: cells[("citeseer", m)].name for m in (DEFAULT_METHOD, "rw")})))
    losses = {cell: mean_losses(cell) for cell in config.trained_cells(params)}
    recorded = [cell for cell, table in losses.items() if not table.empty]
    write_cell_data("loss", recorded, lambda cell: losses[cell])
    print(f"wrote {len(saved)} figures to {CURVES_ROOT}/ and their data to {PLOT_DATA_ROOT}/loss/")


if __name__ == "__main__":
    config.run_main(main)
