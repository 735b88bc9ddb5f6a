"""pipeline/tables.py: a committed per-seed table and its summary are verified before any
stage reports from them; each corruption is one line naming the file, and nothing is written."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from pipeline import config, plot, stats, tables


def _table(root):
    return root / "reports/eval/cora/cadnet.csv"


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
    _table(root).with_suffix(".json").write_text(json.dumps(tables.summarize(table)))


def test_the_tables_evaluate_wrote_pass(evaluated):
    table = tables.read_per_seed("cora", "cadnet", runs=3)
    assert table["seed"].tolist() == [0, 1, 2]


CORRUPTIONS = {
    "summary cut short": (lambda root: _table(root).with_suffix(".json").write_text('{"runs": 3, "test_a'),
                          ["cadnet.json", "not a summary evaluate wrote"]),
    "summary missing": (lambda root: _table(root).with_suffix(".json").unlink(), ["cadnet.json", "missing"]),
    "summary of other numbers": (lambda root: _table(root).with_suffix(".json").write_text(
        json.dumps({"runs": 3, "test_acc": {"mean": 90.0, "std": 2.1}})), ["cadnet.json", "90.0", "83.6"]),
    "table cut mid-row": (lambda root: _table(root).write_text(_table(root).read_text()[:-25]),
                          ["cadnet.csv"]),
    "table emptied": (lambda root: _table(root).write_text(""), ["cadnet.csv", "not a per-seed table"]),
    "a test accuracy changed": (lambda root: _edit_table(root, test_acc=(0, 0.5)), ["cadnet.json", "cadnet.csv"]),
    "garbage in a number": (lambda root: _edit_table(root, test_acc=(1, "0.8x")), ["cadnet.csv", "test_acc", "not a number"]),
    "a percent where a fraction belongs, summary to match": (
        lambda root: (_edit_table(root, test_acc=(0, 7.5)), _summary_of_table(root)),
        ["cadnet.csv", "test_acc of seed 0", "7.5", "[0, 1]"]),
    "a selected epoch past the last": (lambda root: (_edit_table(root, selected_epoch=(2, 99)), _summary_of_table(root)),
                                       ["cadnet.csv", "seed 2", "selected epoch 99"]),
    "a seed row doubled, summary to match": (
        lambda root: (_table(root).write_text(_table(root).read_text() + _table(root).read_text().splitlines()[1] + "\n"),
                      _summary_of_table(root)), ["cadnet.csv", "4 rows of 3 distinct seeds"]),
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
    folder.mkdir(parents=True)
    pd.DataFrame(columns=tables.PER_SEED_COLUMNS).to_csv(folder / "gcn.csv", index=False)
    (folder / "gcn.json").write_text(json.dumps({"runs": 0}))
    assert tables.read_per_seed("cora", "gcn").empty
