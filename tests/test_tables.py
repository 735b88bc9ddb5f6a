"""pipeline/report/tables.py: the tables train writes from the seeds, computed by hand; and a committed
per-seed table and its summary are verified before any stage reports from them, each corruption
one line naming the file, with nothing written."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import FAKE_ACCS, FAKE_NODES, fake_record
from pipeline import config, plot, stats
from pipeline.report import tables


def _table(root):
    return root / "reports/eval/cora/cadnet/main.csv"


def _summary(root):
    return root / "reports/eval/cora/cadnet.json"


def _write_summary(root, summary) -> None:
    _summary(root).write_text(json.dumps({"main": summary}))


def _edit_table(root, **column_values) -> None:
    path = _table(root)
    table = pd.read_csv(path)
    for column, (row, value) in column_values.items():
        table[column] = table[column].astype(object)
        table.loc[row, column] = value
    table.to_csv(path, index=False)


def _summary_of_table(root) -> None:
    """Rewrite the summary from the (edited) table, as a careful forger would."""
    table = pd.read_csv(_table(root))
    _write_summary(root, tables.summarize(table))


def test_the_tables_evaluate_wrote_pass(evaluated):
    table = tables.read_per_seed("cora", "cadnet", "main", runs=3)
    assert table["seed"].tolist() == [0, 1, 2]


CORRUPTIONS = {
    "summary cut short": (lambda root: _summary(root).write_text('{"main": {"runs": 3, "test_a'),
                          ["cadnet.json", "not a summary evaluate wrote"]),
    "summary missing": (lambda root: _summary(root).unlink(), ["cadnet.json", "missing"]),
    "summary of the cell missing": (lambda root: _summary(root).write_text("{}"), ["cadnet.json", "no summary of main"]),
    "summary of other numbers": (lambda root: _write_summary(root, {"runs": 3, "test_acc": {"mean": 90.0, "std": 2.1}}),
                                 ["cadnet.json", "90.0", "83.6"]),
    "table cut mid-row": (lambda root: _table(root).write_text(_table(root).read_text()[:-25]),
                          ["cadnet/main.csv"]),
    "table emptied": (lambda root: _table(root).write_text(""), ["cadnet/main.csv", "not a per-seed table"]),
    "a test accuracy changed": (lambda root: _edit_table(root, test_acc=(0, 0.5)), ["cadnet.json", "main.csv"]),
    "garbage in a number": (lambda root: _edit_table(root, test_acc=(1, "0.8x")),
                            ["cadnet/main.csv", "test_acc", "not a number"]),
    "a percent where a fraction belongs, summary to match": (
        lambda root: (_edit_table(root, test_acc=(0, 7.5)), _summary_of_table(root)),
        ["cadnet/main.csv", "test_acc of seed 0", "7.5", "[0, 1]"]),
    "a selected epoch past the last": (lambda root: (_edit_table(root, selected_epoch=(2, 99)), _summary_of_table(root)),
                                       ["cadnet/main.csv", "seed 2", "selected epoch 99"]),
    "a seed row doubled, summary to match": (
        lambda root: (_table(root).write_text(_table(root).read_text() + _table(root).read_text().splitlines()[1] + "\n"),
                      _summary_of_table(root)), ["cadnet/main.csv", "4 rows of 3 distinct seeds"]),
}


@pytest.mark.parametrize("stage", [stats, plot])
@pytest.mark.parametrize("corrupt", list(CORRUPTIONS))
def test_a_corrupted_table_or_summary_stops_stats_and_plot_with_one_line(evaluated, stage, corrupt):
    damage, fragments = CORRUPTIONS[corrupt]
    damage(evaluated)
    before = {p: p.read_bytes() for p in (evaluated / "reports").rglob("*") if p.is_file()}
    with pytest.raises(config.DataError) as info:
        stage.main([])
    plot.plt.close("all")  # the figure being drawn when plot stopped
    message = str(info.value)
    assert "\n" not in message and all(f in message for f in fragments), message
    assert "cora/cadnet" in message  # and how to make it again
    after = {p: p.read_bytes() for p in (evaluated / "reports").rglob("*") if p.is_file()}
    assert after == before  # nothing written from it


def test_a_cell_set_to_zero_runs_is_a_valid_empty_table(workdir):
    folder = workdir / "reports/eval/cora"
    (folder / "gcn").mkdir(parents=True)
    pd.DataFrame(columns=tables.PER_SEED_COLUMNS).to_csv(folder / "gcn/baselines.csv", index=False)
    (folder / "gcn.json").write_text(json.dumps({"baselines": {"runs": 0}}))
    assert tables.read_per_seed("cora", "gcn", "baselines").empty


# ------------------------------------------------------------- what train writes from the seeds


def test_per_seed_table_rows():
    records = [fake_record(seed, acc) for seed, acc in enumerate(FAKE_ACCS)]
    table = tables.per_seed_table(records)
    assert list(table.columns) == tables.PER_SEED_COLUMNS
    assert table["seed"].tolist() == [0, 1, 2]
    assert table["test_acc"].tolist() == pytest.approx(list(FAKE_ACCS))
    for seed, row in table.iterrows():
        expected = records[seed]
        for key in ("val_acc", "best_val_loss", "selected_epoch", "epochs_run", "ms_per_seed_epoch"):
            assert row[key] == pytest.approx(expected[key]), key
        assert row["gamma_mean"] == pytest.approx(float(expected["gamma"].mean()), abs=1e-6)
        assert row["device"] == tables.DEVICE_BEFORE_RECORDED  # the fake records name none


def test_gamma_histogram_counts():
    hist = tables.gamma_histogram([fake_record(seed, acc) for seed, acc in enumerate(FAKE_ACCS)])
    assert list(hist.columns) == ["bin_left", "bin_right", "count_all_seeds", "count_seed_0"]
    assert len(hist) == tables.GAMMA_BINS
    assert hist["count_all_seeds"].sum() == FAKE_NODES * 3
    assert hist["count_seed_0"].sum() == FAKE_NODES
    assert (hist["count_seed_0"] <= hist["count_all_seeds"]).all()
    # bins are contiguous and span the pooled gammas (0.8 .. 1.0 in the fake records)
    assert np.allclose(hist["bin_right"].to_numpy()[:-1], hist["bin_left"].to_numpy()[1:], atol=1e-5)
    assert hist["bin_left"].iloc[0] == pytest.approx(0.8, abs=1e-5)
    assert hist["bin_right"].iloc[-1] == pytest.approx(1.0, abs=1e-5)


def test_gamma_histogram_all_equal():
    """beta = 1 puts every gamma at 1: the histogram still has its bins and counts every node."""
    records = [fake_record(s, a) for s, a in enumerate(FAKE_ACCS)]
    for r in records:
        r["gamma"] = torch.ones(FAKE_NODES)
    hist = tables.gamma_histogram(records)
    assert hist["count_all_seeds"].sum() == FAKE_NODES * 3
    assert hist["count_seed_0"].sum() == FAKE_NODES
    assert (hist["bin_right"] > hist["bin_left"]).all()


def test_epoch_summary_by_hand():
    """Seeds with 2, 3 and 4 epochs of validation losses: epoch 1 has all three, epoch 4 one;
    the mean and the 10th/90th percentiles (linear interpolation) over those that ran it."""
    losses = [[1.0, 0.8], [2.0, 1.0, 0.5], [3.0, 1.2, 0.7, 0.6]]
    records = [{"seed": s, "history": {"train_loss": [x + 1 for x in v], "val_loss": v, "val_acc": [0.5] * len(v)}}
               for s, v in enumerate(losses)]
    table = tables.epoch_summary(records)
    assert list(table.columns) == tables.EPOCH_COLUMNS
    assert table["epoch"].tolist() == [1, 2, 3, 4]
    assert table["seeds_running"].tolist() == [3, 3, 2, 1]
    assert table["val_loss_mean"].tolist() == pytest.approx([2.0, 1.0, 0.6, 0.6])
    assert table["train_loss_mean"].tolist() == pytest.approx([3.0, 2.0, 1.6, 1.6])
    assert table["val_loss_p10"].tolist() == pytest.approx([1.2, 0.84, 0.52, 0.6])  # 1 + 0.2 * (2 - 1), ...
    assert table["val_loss_p90"].tolist() == pytest.approx([2.8, 1.16, 0.68, 0.6])
    assert table["val_acc_mean"].tolist() == pytest.approx([0.5] * 4)
