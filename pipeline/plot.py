"""Plot stage: ``python -m pipeline.plot``.

For each selected dataset, three PNG figures in ``reports/figures/`` (declared as DVC plots,
so ``dvc plots show`` renders them offline):
- ``<dataset>_accuracy.png``: test accuracy of every seed, per method, against the paper's
  mean ± std band (Table 2);
- ``<dataset>_gamma.png``: histogram of the adaptive weight gamma over nodes at the selected
  epoch (the paper's Fig. B.3), all seeds pooled and seed 0 alone;
- ``<dataset>_loss.png``: training and validation loss over epochs (the paper's Fig. B.1),
  mean over seeds with the 10-90% band.
"""
from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display on CI or servers
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

from pipeline import config  # noqa: E402
from pipeline.evaluate import EVAL_ROOT, HISTORY_ROOT  # noqa: E402
from pipeline.stats import DEFAULT_METHOD, load_paper  # noqa: E402

FIGURES_ROOT = Path("reports/figures")


def _read(path: Path) -> pd.DataFrame:
    if not path.exists():
        raise config.DataError(f"{path}: missing; run the evaluate stage first")
    return pd.read_csv(path)


def accuracy_figure(dataset: str, methods: list[str], paper_mean_std: list[float]):
    fig, ax = plt.subplots(figsize=(7, 3.5))
    mean, std = paper_mean_std
    ax.axhspan(mean - std, mean + std, color="tab:gray", alpha=0.25, label=f"paper {mean:.1f} ± {std:.1f}")
    ax.axhline(mean, color="tab:gray", lw=1)
    for method in methods:
        table = _read(EVAL_ROOT / dataset / f"{method}.csv")
        acc = 100 * table["test_acc"]
        points = ax.plot(table["seed"], acc, "o", ms=3, alpha=0.7,
                         label=f"{method}: {acc.mean():.2f} ± {acc.std(ddof=1) if len(acc) > 1 else 0:.2f}")
        ax.axhline(acc.mean(), color=points[0].get_color(), lw=1, ls="--")
    ax.set(xlabel="seed", ylabel="test accuracy (%)", title=f"{dataset}: test accuracy per seed")
    ax.legend(fontsize=8, loc="lower right")
    return fig


def gamma_figure(dataset: str, method: str):
    hist = _read(EVAL_ROOT / dataset / f"{method}_gamma.csv")
    single = [c for c in hist.columns if c.startswith("count_seed_")][0]
    width = hist["bin_right"] - hist["bin_left"]
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.2))
    for ax, column, label in ((axes[0], "count_all_seeds", "all seeds"), (axes[1], single, single[6:].replace("_", " "))):
        ax.bar(hist["bin_left"], hist[column], width=width, align="edge", color="tab:blue")
        ax.set(xlabel=r"$\gamma_i$", ylabel="nodes", title=f"{dataset}/{method}: {label}")
    fig.tight_layout()
    return fig


def loss_figure(dataset: str, method: str):
    history = _read(HISTORY_ROOT / dataset / f"{method}_history.csv")
    fig, ax = plt.subplots(figsize=(7, 3.5))
    for column, color in (("train_loss", "tab:blue"), ("val_loss", "tab:orange")):
        by_epoch = history.groupby("epoch")[column]
        ax.plot(by_epoch.mean().index, by_epoch.mean(), color=color, label=f"{column} (mean over seeds)")
        ax.fill_between(by_epoch.mean().index, by_epoch.quantile(0.1), by_epoch.quantile(0.9), color=color, alpha=0.2)
    ax.set(xlabel="epoch", ylabel="NLL loss (eval mode)", title=f"{dataset}/{method}: loss over epochs")
    ax.legend(fontsize=8)
    return fig


def main(argv: list[str]) -> None:
    params = config.load_params()
    paper = load_paper()
    FIGURES_ROOT.mkdir(parents=True, exist_ok=True)
    # gamma and loss curves for one method: CAD-Net itself unless it is not selected
    main_method = DEFAULT_METHOD if DEFAULT_METHOD in params["methods"] else params["methods"][0]
    for dataset in params["datasets"]:
        figures = {
            "accuracy": accuracy_figure(dataset, params["methods"], paper["table2"][DEFAULT_METHOD][dataset]),
            "gamma": gamma_figure(dataset, main_method),
            "loss": loss_figure(dataset, main_method),
        }
        for name, fig in figures.items():
            fig.savefig(FIGURES_ROOT / f"{dataset}_{name}.png", dpi=110, bbox_inches="tight")
            plt.close(fig)
    print(f"wrote {3 * len(params['datasets'])} figures to {FIGURES_ROOT}/")


if __name__ == "__main__":
    config.run_main(main)
