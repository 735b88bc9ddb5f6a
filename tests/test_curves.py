"""Tests for the curves stage (pipeline/curves.py): the loss curves drawn from the per-epoch
summaries that train commits in reports/eval/, whose plotted values are the per-epoch means over
the seeds still running."""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import FAKE_ACCS, fake_record, update_params, write_tables_of_fake_seeds
from pipeline import curves
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
    for column in ("train_loss", "val_loss"):
        expected = mean_over_running_seeds(FAKE_ACCS, column)
        assert drawn[f"{column}, mean over the seeds still running"] == pytest.approx(expected, abs=1e-5)
    data = pd.read_csv(evaluated / "reports/plots/loss/cora_cadnet.csv")
    assert data["val_loss"].tolist() == pytest.approx(mean_over_running_seeds(FAKE_ACCS, "val_loss"), abs=1e-5)


def test_figure_b1_where_the_variants_ran_rw_on_citeseer(evaluated, monkeypatch):
    """The paper's Fig. B.1: validation loss of CAD-Net and RW on CiteSeer, each the per-epoch
    mean of that method's seeds."""
    update_params(evaluated, datasets=["cora", "citeseer"],
                  variants={"datasets": ["citeseer"], "methods": ["rw"], "runs": {}})
    for method, accs in (("cadnet", (0.73, 0.74, 0.75)), ("rw", (0.71, 0.72, 0.73))):
        write_tables_of_fake_seeds(evaluated, dataset="citeseer", method=method, accs=accs)
    drawn = recorded_lines(monkeypatch)
    curves.main([])
    assert_png(evaluated / "reports/curves/citeseer_val_loss_cadnet_vs_rw.png")
    for method, label in (("rw", "RW (mean over seeds)"), ("cadnet", "CAD-Net (mean over seeds)")):
        accs = (0.71, 0.72, 0.73) if method == "rw" else (0.73, 0.74, 0.75)
        assert drawn[label] == pytest.approx(mean_over_running_seeds(accs, "val_loss"), abs=1e-5)


def mean_over_running_seeds(accs, column) -> list[float]:
    """By hand from the fake seeds' histories: seed s runs 5 + s epochs, so epoch e's mean is
    over the seeds that reached it."""
    histories = [fake_record(seed, acc)["history"][column] for seed, acc in enumerate(accs)]
    longest = max(map(len, histories))
    return [sum(h[e] for h in histories if len(h) > e) / sum(len(h) > e for h in histories) for e in range(longest)]


def test_a_summary_without_spread_draws_the_mean_alone_and_an_empty_one_says_so(evaluated, monkeypatch):
    """Seeds whose per-epoch losses were recorded as means only draw no band; a cell whose
    seeds recorded none draws a figure that says so, and no loss data."""
    epochs = evaluated / "reports/eval/cora/cadnet/main_epochs.csv"
    table = pd.read_csv(epochs)
    spread = [c for c in table.columns if c.endswith(("_p10", "_p90"))]
    table.assign(**{c: float("nan") for c in spread}).to_csv(epochs, index=False)
    bands = []
    monkeypatch.setattr(curves.plt.Axes, "fill_between", lambda ax, *a, **k: bands.append(a))
    curves.main([])
    assert bands == []
    assert (evaluated / "reports/plots/loss/cora_cadnet.csv").exists()

    epochs.write_text(",".join(table.columns) + "\n")
    texts = []
    monkeypatch.setattr(curves.plt.Axes, "text", lambda ax, x, y, text, **k: texts.append(text))
    curves.main([])
    assert any("no per-epoch losses recorded" in t for t in texts)
    assert not (evaluated / "reports/plots/loss/cora_cadnet.csv").exists()


def test_missing_summary_names_the_file(evaluated):
    (evaluated / "reports/eval/cora/cadnet/main_epochs.csv").unlink()
    with pytest.raises(DataError) as info:
        curves.main([])
    assert "reports/eval/cora/cadnet/main_epochs.csv" in str(info.value)
    assert "\n" not in str(info.value)
