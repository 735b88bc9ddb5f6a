"""Tests for the evaluate stage (pipeline/evaluate.py) on hand-made seed files.

Seeds 0, 1, 2 of cora/cadnet have test accuracies 81.2, 84.5 and 85.1 % (conftest), so the
summary must be mean 83.6 and sample std 2.1.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
import torch

from conftest import FAKE_ACCS, FAKE_MEAN, FAKE_NODES, FAKE_STD, fake_record, update_params, write_fake_seeds
from pipeline import config, evaluate
from pipeline.config import DataError


def run(argv=("cora", "cadnet")):
    evaluate.main(list(argv))


def test_per_seed_csv_rows(cora_workdir):
    run()
    table = pd.read_csv(cora_workdir / "reports/eval/cora/cadnet.csv")
    assert list(table.columns) == evaluate.PER_SEED_COLUMNS
    assert table["seed"].tolist() == [0, 1, 2]
    assert table["test_acc"].tolist() == pytest.approx(list(FAKE_ACCS))
    for seed, row in table.iterrows():
        expected = fake_record(seed, FAKE_ACCS[seed])
        assert row["val_acc"] == pytest.approx(expected["val_acc"])
        assert row["best_val_loss"] == pytest.approx(expected["best_val_loss"])
        assert row["selected_epoch"] == expected["selected_epoch"]
        assert row["epochs_run"] == expected["epochs_run"]
        assert row["ms_per_seed_epoch"] == pytest.approx(expected["ms_per_seed_epoch"])
        assert row["gamma_mean"] == pytest.approx(float(expected["gamma"].mean()), abs=1e-6)


def test_summary_mean_and_sample_std_in_percent(cora_workdir, capsys):
    run()
    summary = json.loads((cora_workdir / "reports/eval/cora/cadnet.json").read_text())
    assert summary["runs"] == 3
    assert summary["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-4)
    assert summary["test_acc"]["std"] == pytest.approx(FAKE_STD, abs=1e-4)
    # not the population std (ddof=0), which would be 1.7146
    assert not math.isclose(summary["test_acc"]["std"], np.std(100 * np.array(FAKE_ACCS)), abs_tol=1e-3)
    assert summary["ms_per_seed_epoch"] == pytest.approx(11.0)  # 10, 11, 12
    assert summary["epochs_run"] == pytest.approx(6.0)  # 5, 6, 7
    assert "cora/cadnet: 83.60 ± 2.10 over 3 runs" in capsys.readouterr().out


def test_single_run_has_zero_std(cora_workdir):
    update_params(cora_workdir, runs=1)
    run()
    summary = json.loads((cora_workdir / "reports/eval/cora/cadnet.json").read_text())
    assert summary["runs"] == 1
    assert summary["test_acc"] == {"mean": pytest.approx(81.2), "std": 0.0}


def test_only_seeds_below_runs_are_read(cora_workdir):
    """A leftover seed_003.pt (e.g. from an older, larger `runs`) must not count."""
    torch.save(fake_record(3, 0.10), cora_workdir / "data/runs/cora/cadnet/seed_003.pt")
    run()
    summary = json.loads((cora_workdir / "reports/eval/cora/cadnet.json").read_text())
    assert summary["runs"] == 3
    assert summary["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-4)
    assert len(pd.read_csv(cora_workdir / "reports/eval/cora/cadnet.csv")) == 3


def test_missing_seed_file_names_the_file(cora_workdir):
    (cora_workdir / "data/runs/cora/cadnet/seed_001.pt").unlink()
    with pytest.raises(DataError) as info:
        run()
    message = str(info.value)
    assert "\n" not in message
    assert "data/runs/cora/cadnet/seed_001.pt" in message
    assert "train@cora-cadnet" in message
    assert not (cora_workdir / "reports").exists()  # nothing half-written
    assert not (cora_workdir / "data/eval").exists()


@pytest.mark.parametrize("replace_with, fragment", [
    (lambda: fake_record(0, 0.9), "holds seed 0 of cora/cadnet, not seed 1"),  # a copied seed file
    (lambda: dict(fake_record(1, 0.9), method="rw"), "holds seed 1 of cora/rw"),  # another method's
    (lambda: fake_record(1, 0.9, fingerprint="other"), "trained with other settings"),  # mixed settings
    (lambda: b"PK\x03\x04 truncated", "unreadable"),
])
def test_a_seed_file_that_is_not_what_its_name_says_is_refused(cora_workdir, replace_with, fragment):
    """Seed 1's file replaced: never counted (a copy would count a seed twice in the tables)."""
    path = cora_workdir / "data/runs/cora/cadnet/seed_001.pt"
    value = replace_with()
    if isinstance(value, bytes):
        path.write_bytes(value)
    else:
        torch.save(value, path)
    with pytest.raises(DataError) as info:
        run()
    assert "\n" not in str(info.value) and "seed_001.pt" in str(info.value) and fragment in str(info.value)
    assert not (cora_workdir / "reports").exists()


def test_more_runs_than_seeds_is_an_error(cora_workdir):
    update_params(cora_workdir, runs=4)
    with pytest.raises(DataError, match=r"seed_003\.pt"):
        run()


def test_missing_seed_exits_with_one_error_line(cora_workdir, capsys):
    (cora_workdir / "data/runs/cora/cadnet/seed_002.pt").unlink()
    with pytest.raises(SystemExit) as info:
        config.run_main(evaluate.main, ["cora", "cadnet"])
    assert str(info.value.code).startswith("error: ")
    assert "seed_002.pt" in str(info.value.code)
    assert "\n" not in str(info.value.code)


def test_gamma_histogram_counts(cora_workdir):
    run()
    hist = pd.read_csv(cora_workdir / "reports/eval/cora/cadnet_gamma.csv")
    assert list(hist.columns) == ["bin_left", "bin_right", "count_all_seeds", "count_seed_0"]
    assert len(hist) == evaluate.GAMMA_BINS
    assert hist["count_all_seeds"].sum() == FAKE_NODES * 3
    assert hist["count_seed_0"].sum() == FAKE_NODES
    assert (hist["count_seed_0"] <= hist["count_all_seeds"]).all()
    # bins are contiguous and span the pooled gammas (0.8 .. 1.0 in the fake records)
    assert np.allclose(hist["bin_right"].to_numpy()[:-1], hist["bin_left"].to_numpy()[1:], atol=1e-5)
    assert hist["bin_left"].iloc[0] == pytest.approx(0.8, abs=1e-5)
    assert hist["bin_right"].iloc[-1] == pytest.approx(1.0, abs=1e-5)


def test_gamma_histogram_all_equal(cora_workdir):
    """beta = 1 puts every gamma at 1: the histogram still has its bins and counts every node."""
    records = [fake_record(s, a) for s, a in enumerate(FAKE_ACCS)]
    for r in records:
        r["gamma"] = torch.ones(FAKE_NODES)
    hist = evaluate.gamma_histogram(records)
    assert hist["count_all_seeds"].sum() == FAKE_NODES * 3
    assert hist["count_seed_0"].sum() == FAKE_NODES
    assert (hist["bin_right"] > hist["bin_left"]).all()


def test_history_csv(cora_workdir):
    run()
    history = pd.read_csv(cora_workdir / "data/eval/cora/cadnet_history.csv")
    assert list(history.columns[:2]) == ["seed", "epoch"]
    assert {"train_loss", "val_loss", "test_loss", "train_acc", "val_acc", "test_acc"} <= set(history.columns)
    assert len(history) == 5 + 6 + 7  # epochs_run of seeds 0, 1, 2
    seed1 = history[history["seed"] == 1]
    assert seed1["epoch"].tolist() == list(range(1, 7))
    assert seed1["val_loss"].tolist() == pytest.approx(fake_record(1, 0.0)["history"]["val_loss"], abs=1e-5)


def test_other_method_is_separate(cora_workdir):
    from conftest import write_fake_seeds

    update_params(cora_workdir, methods=["cadnet", "cadnet_pull"])
    write_fake_seeds(cora_workdir, method="cadnet_pull", accs=(0.70, 0.72, 0.74))
    run(("cora", "cadnet_pull"))
    summary = json.loads((cora_workdir / "reports/eval/cora/cadnet_pull.json").read_text())
    assert summary["test_acc"]["mean"] == pytest.approx(72.0, abs=1e-4)
    assert summary["test_acc"]["std"] == pytest.approx(2.0, abs=1e-4)
    assert not (cora_workdir / "reports/eval/cora/cadnet.json").exists()


@pytest.mark.parametrize("argv, fragment", [(["coraa"], "coraa"), (["cora", "gcnn"], "gcnn"), ([], "usage")])
def test_bad_arguments(cora_workdir, argv, fragment):
    with pytest.raises(config.ConfigError, match=fragment):
        evaluate.main(argv)
    assert not (cora_workdir / "reports").exists()


def test_a_cell_with_zero_runs_writes_outputs_that_say_not_run(cora_workdir, capsys):
    """A study cell set to 0 runs is still a DVC stage: its outputs exist and say runs 0."""
    update_params(cora_workdir, variants={"datasets": ["cora"], "methods": ["rw"], "runs": {"cora": {"rw": 0}}})
    run(("cora", "rw"))
    summary = json.loads((cora_workdir / "reports/eval/cora/rw.json").read_text())
    assert summary == {"runs": 0}
    assert (cora_workdir / "reports/eval/cora/rw.csv").read_text().startswith("seed,test_acc")
    assert (cora_workdir / "data/eval/cora/rw_history.csv").exists()
    assert "cora/rw: not run (runs 0)" in capsys.readouterr().out


def test_a_full_disk_in_evaluate_is_one_line_and_leaves_the_last_outputs_whole(evaluated, monkeypatch):
    """The history (the largest file) cannot be written: one line naming it; the table, its
    summary and the history of the last run stay as they were, no file is cut mid-row."""
    import errno

    outputs = sorted(p for root in ("reports/eval", "data/eval") for p in (evaluated / root).rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in outputs}
    real_to_csv = pd.DataFrame.to_csv

    def full_for_history(self, path, *args, **kwargs):
        if "history" in str(path):
            with open(path, "w") as handle:  # a part written, then the disk is full
                handle.write("seed,epoch,train_loss\n0,1,0.9")
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_to_csv(self, path, *args, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", full_for_history)
    write_fake_seeds(evaluated, accs=(0.5, 0.6, 0.7))  # new results the disk has no room for
    with pytest.raises(SystemExit) as info:
        config.run_main(evaluate.main, ["cora", "cadnet"], kept="the evaluate outputs written before it are kept whole")
    assert str(info.value.code) == ("error: data/eval/cora/cadnet_history.csv: no space left on device; the evaluate "
                                    "outputs written before it are kept whole; free some space and run it again")
    after = sorted(p for root in ("reports/eval", "data/eval") for p in (evaluated / root).rglob("*") if p.is_file())
    assert after == outputs  # no temporary file left behind
    changed = [p.name for p in outputs if p.read_bytes() != before[p]]
    assert set(changed) <= {"cadnet.csv", "cadnet_gamma.csv"}  # written whole before the disk filled
    assert (evaluated / "reports/eval/cora/cadnet.json").read_bytes() == before[evaluated / "reports/eval/cora/cadnet.json"]
