"""Tests for the evaluate stage (pipeline/evaluate.py): the summaries of a family's per-seed tables.

Seeds 0, 1, 2 of cora/cadnet have test accuracies 81.2, 84.5 and 85.1 % (conftest), so the
summary must be mean 83.6 and sample std 2.1.
"""
from __future__ import annotations

import errno
import json
import math

import numpy as np
import pytest

from conftest import FAKE_ACCS, FAKE_MEAN, FAKE_STD, update_params, write_tables_of_fake_seeds
from pipeline import config, evaluate
from pipeline.config import DataError


def run(argv=("cora", "cadnet")):
    evaluate.main(list(argv))


def summary_of(root, dataset="cora", method="cadnet", name="main") -> dict:
    return json.loads((root / f"reports/eval/{dataset}/{method}.json").read_text())[name]


def test_summary_mean_and_sample_std_in_percent(evaluated, capsys):
    run()
    summary = summary_of(evaluated)
    assert summary["runs"] == 3
    assert summary["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-4)
    assert summary["test_acc"]["std"] == pytest.approx(FAKE_STD, abs=1e-4)
    # not the population std (ddof=0), which would be 1.7146
    assert not math.isclose(summary["test_acc"]["std"], np.std(100 * np.array(FAKE_ACCS)), abs_tol=1e-3)
    assert summary["ms_per_seed_epoch"] == pytest.approx(11.0)  # 10, 11, 12
    assert summary["epochs_run"] == pytest.approx(6.0)  # 5, 6, 7
    assert "cora/cadnet/main: 83.60 ± 2.10 over 3 runs" in capsys.readouterr().out


def test_single_run_has_zero_std(cora_workdir):
    update_params(cora_workdir, runs=1)
    write_tables_of_fake_seeds(cora_workdir, accs=FAKE_ACCS[:1])
    summary = summary_of(cora_workdir)
    assert summary["runs"] == 1
    assert summary["test_acc"] == {"mean": pytest.approx(81.2), "std": 0.0}


@pytest.mark.parametrize("runs", [2, 4])
def test_a_table_with_other_seeds_than_the_spec_asks_for_is_refused(evaluated, runs):
    """The spec says how many seeds the cell has: a table of three is not a summary of two or four."""
    from pipeline import check

    update_params(evaluated, runs=runs)
    check.write_specs(config.load_params())
    before = (evaluated / "reports/eval/cora/cadnet.json").read_text()
    with pytest.raises(DataError) as info:
        run()
    assert "reports/eval/cora/cadnet/main.csv" in str(info.value) and f"0-{runs - 1}" in str(info.value)
    assert "\n" not in str(info.value)
    assert (evaluated / "reports/eval/cora/cadnet.json").read_text() == before


def test_a_missing_spec_names_the_file_and_the_fix(evaluated):
    (evaluated / "data/specs/cora/cadnet/main.json").unlink()
    with pytest.raises(DataError, match=r"data/specs/cora/cadnet/main\.json: missing; run `dvc repro check`"):
        run()


def test_other_method_is_separate(evaluated):
    update_params(evaluated, methods=["cadnet", "cadnet_pull"])
    before = (evaluated / "reports/eval/cora/cadnet.json").read_text()
    write_tables_of_fake_seeds(evaluated, method="cadnet_pull", accs=(0.70, 0.72, 0.74))
    summary = summary_of(evaluated, method="cadnet_pull")
    assert summary["test_acc"]["mean"] == pytest.approx(72.0, abs=1e-4)
    assert summary["test_acc"]["std"] == pytest.approx(2.0, abs=1e-4)
    assert (evaluated / "reports/eval/cora/cadnet.json").read_text() == before


@pytest.mark.parametrize("argv, fragment", [(["coraa"], "coraa"), (["cora", "gcnn"], "gcnn"), ([], "usage")])
def test_bad_arguments(cora_workdir, argv, fragment):
    with pytest.raises(config.ConfigError, match=fragment):
        evaluate.main(argv)
    assert not (cora_workdir / "reports").exists()


def test_a_cell_with_zero_runs_writes_a_summary_that_says_not_run(cora_workdir, capsys):
    """A study cell set to 0 runs is still a DVC stage: its outputs exist and say runs 0."""
    update_params(cora_workdir, variants={"datasets": ["cora"], "methods": ["rw"], "runs": {"cora": {"rw": 0}}})
    write_tables_of_fake_seeds(cora_workdir, method="rw", accs=())
    assert summary_of(cora_workdir, method="rw", name="variants") == {"runs": 0}
    assert (cora_workdir / "reports/eval/cora/rw/variants.csv").read_text().startswith("seed,test_acc")
    assert (cora_workdir / "reports/eval/cora/rw/variants_epochs.csv").read_text() == ""
    assert "cora/rw/variants: not run (runs 0)" in capsys.readouterr().out


def test_a_family_summarises_each_of_its_cells_and_one_without_cells_is_empty(cora_workdir, capsys):
    """Cells of several studies in one (dataset, method): one summary each, in the family's file."""
    from conftest import read_params, write_params

    params = read_params(cora_workdir)
    params["methods"] = ["cadnet", "gcn"]
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2, "grid": {"beta": [0.5]}}
    write_params(cora_workdir, params)
    from conftest import fake_record
    from pipeline import train

    train.write_tables("cora", "cadnet", "beta-beta=0.5", [fake_record(0, 0.70), fake_record(1, 0.74)])
    write_tables_of_fake_seeds(cora_workdir)  # main's, then evaluate
    assert summary_of(cora_workdir, name="beta-beta=0.5")["test_acc"]["mean"] == pytest.approx(72.0, abs=1e-4)
    assert summary_of(cora_workdir)["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-4)
    run(("cora", "gcn"))
    assert json.loads((cora_workdir / "reports/eval/cora/gcn.json").read_text()) == {}


def test_a_full_disk_in_evaluate_is_one_line_and_leaves_the_last_summary_whole(evaluated, monkeypatch):
    """The summary cannot be written: one line naming it; the last summary and the table stay."""
    outputs = sorted(p for p in (evaluated / "reports/eval").rglob("*") if p.is_file())
    before = {p: p.read_bytes() for p in outputs}
    real_write_text = type(evaluated).write_text

    def full(self, text, *args, **kwargs):
        if self.name.endswith(".tmp") and "cadnet.json" in self.name:
            real_write_text(self, text[:10])  # a part written, then the disk is full
            raise OSError(errno.ENOSPC, "No space left on device", str(self))
        return real_write_text(self, text, *args, **kwargs)

    monkeypatch.setattr(type(evaluated), "write_text", full)
    with pytest.raises(SystemExit) as info:
        config.run_main(evaluate.main, ["cora", "cadnet"], kept="the per-seed table is kept")
    assert "cadnet.json" in str(info.value.code) and "no space left on device" in str(info.value.code)
    assert sorted(p for p in (evaluated / "reports/eval").rglob("*") if p.is_file()) == outputs  # no temporary left
    assert {p: p.read_bytes() for p in outputs} == before
