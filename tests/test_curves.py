"""Tests for the curves stage (pipeline/curves.py): the loss curves drawn from the per-epoch
histories in data/eval/, whose plotted values are the per-epoch means over seeds."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import update_params, write_fake_seeds
from pipeline import curves, evaluate
from pipeline.config import DataError
from test_plot import assert_png


def recorded_lines(monkeypatch) -> dict:
    """Label -> y values of every line drawn with a label."""
    drawn = {}
    real_plot = curves.plt.Axes.plot

    def recording_plot(ax, *args, **kwargs):
        drawn[kwargs.get("label")] = list(args[1]) if len(args) > 1 else None
        return real_plot(ax, *args, **kwargs)

    monkeypatch.setattr(curves.plt.Axes, "plot", recording_plot)
    return drawn


def test_one_loss_figure_per_dataset_with_the_mean_over_seeds(evaluated, monkeypatch, capsys):
    drawn = recorded_lines(monkeypatch)
    curves.main([])
    assert [p.name for p in (evaluated / "reports/curves").iterdir()] == ["cora_loss.png"]
    assert_png(evaluated / "reports/curves/cora_loss.png")
    assert "wrote 1 figures" in capsys.readouterr().out
    history = pd.read_csv(evaluated / "data/eval/cora/cadnet_history.csv")
    for column in ("train_loss", "val_loss"):
        expected = history.groupby("epoch")[column].mean().tolist()
        assert drawn[f"{column}, mean over the seeds still running"] == pytest.approx(expected)
    data = pd.read_csv(evaluated / "reports/plots/loss/cora_cadnet.csv")
    assert data["val_loss"].tolist() == pytest.approx(history.groupby("epoch")["val_loss"].mean().tolist(), abs=1e-6)


def test_figure_b1_where_the_variants_ran_rw_on_citeseer(evaluated, monkeypatch):
    """The paper's Fig. B.1: validation loss of CAD-Net and RW on CiteSeer, each the per-epoch
    mean of that method's seeds."""
    update_params(evaluated, datasets=["cora", "citeseer"],
                  variants={"datasets": ["citeseer"], "methods": ["rw"], "runs": {}})
    for method, accs in (("cadnet", (0.73, 0.74, 0.75)), ("rw", (0.71, 0.72, 0.73))):
        write_fake_seeds(evaluated, dataset="citeseer", method=method, accs=accs)
        evaluate.main(["citeseer", method])
    drawn = recorded_lines(monkeypatch)
    curves.main([])
    assert_png(evaluated / "reports/curves/citeseer_val_loss_cadnet_vs_rw.png")
    for method, label in (("rw", "RW (mean over seeds)"), ("cadnet", "CAD-Net (mean over seeds)")):
        history = pd.read_csv(evaluated / f"data/eval/citeseer/{method}_history.csv")
        assert drawn[label] == pytest.approx(history.groupby("epoch")["val_loss"].mean().tolist())


def test_missing_history_names_the_file(evaluated):
    (evaluated / "data/eval/cora/cadnet_history.csv").unlink()
    with pytest.raises(DataError) as info:
        curves.main([])
    assert "data/eval/cora/cadnet_history.csv" in str(info.value)
    assert "\n" not in str(info.value)
