"""Tests for the stats stage (pipeline/stats.py): metrics.json and results.md from fake seeds.

The evaluate stage runs on the fake seeds of conftest (81.2, 84.5, 85.1 %: mean 83.6, sample
std 2.1); the paper's Cora number is 84.3 ± 0.5, so diff = -0.7 and diff / σ = -1.4.
"""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from conftest import FAKE_ACCS, FAKE_MEAN, FAKE_STD, update_params, write_data_stats, write_tables_of_fake_seeds
from pipeline import config, stats
from pipeline.config import ConfigError, DataError

PAPER_CORA = (84.3, 0.5)
NO_TABLE2: dict = {}  # a paper whose Table 2 compares no baseline: every one it names has run


@pytest.fixture
def evaluated(evaluated: Path) -> Path:
    """conftest's cora/cadnet evaluated, and reports/data/cora.json in place."""
    write_data_stats(evaluated, "cora")
    return evaluated


def collect(tables: dict, paper: dict) -> dict:
    """stats.collect of per-seed tables given by (dataset, method), as cells of Table 2."""
    return stats.collect({config.Cell("main", d, m): table for (d, m), table in tables.items()}, paper)


def run_stats(root: Path) -> tuple[dict, str]:
    """Each cell's whole summary (reports/cells.json) and results.md."""
    stats.main([])
    cells = json.loads((root / "reports/cells.json").read_text())
    return cells, (root / "reports/results.md").read_text()


def test_the_metrics_are_each_cells_headline_and_the_rest_stays_in_the_reports(evaluated):
    """`dvc exp show` and `dvc metrics diff` show what matters per cell (seeds, mean, std),
    three columns a cell, not ten: the CI and the paper's numbers are in cells.json."""
    cells, _ = run_stats(evaluated)
    metrics = json.loads((evaluated / "reports/metrics.json").read_text())
    assert metrics == {"cora": {"cadnet": {"runs": 3, "test_acc": {"mean": cells["cora"]["cadnet"]["test_acc"]["mean"],
                                                                   "std": cells["cora"]["cadnet"]["test_acc"]["std"]}}}}
    assert {"ci95_low", "ci95_high"} <= set(cells["cora"]["cadnet"]["test_acc"]) and "paper" in cells["cora"]["cadnet"]


def test_the_json_files_keep_ten_significant_digits_so_a_cpus_last_bits_are_not_a_change(evaluated):
    """A mean's last bits depend on the CPU (numpy's vectorised sums): kept to 10 significant
    digits, the same seeds give the same files on any machine; a tiny p keeps its digits."""
    cells, _ = run_stats(evaluated)
    metrics = json.loads((evaluated / "reports/metrics.json").read_text())

    def floats(value):
        if isinstance(value, dict):
            return [x for v in value.values() for x in floats(v)]
        return [value] if isinstance(value, float) else []
    found = floats(cells) + floats(metrics)
    assert all(float(f"{x:.10g}") == x for x in found)
    assert stats.rounded({"p": [5.523456789012345e-15, 74.05799999999999, 3]}) == {"p": [5.523456789e-15, 74.058, 3]}


def test_metrics_json(evaluated):
    metrics, _ = run_stats(evaluated)
    assert list(metrics) == ["cora"]
    assert list(metrics["cora"]) == ["cadnet"]
    cora = metrics["cora"]["cadnet"]
    assert cora["runs"] == 3
    assert cora["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-3)
    assert cora["test_acc"]["std"] == pytest.approx(FAKE_STD, abs=1e-3)
    assert cora["paper"] == {"mean": PAPER_CORA[0], "std": PAPER_CORA[1]}
    assert cora["diff"] == pytest.approx(FAKE_MEAN - 84.3, abs=1e-3)  # ours - paper = -0.7
    assert cora["diff_in_paper_std"] == pytest.approx((FAKE_MEAN - 84.3) / 0.5, abs=1e-3)  # -1.4
    assert "ms_per_seed_epoch" not in cora  # timings are not metrics: a rerun would show as a change


def test_timing_report_is_separate(evaluated):
    run_stats(evaluated)
    timing = (evaluated / "reports/timing.md").read_text()
    assert "| cora | cadnet | batched (chunk of 3) | cpu (3 seeds) | 11.00 | 7.60 |" in timing  # fake seeds: 10, 11, 12 ms


def test_confidence_interval(evaluated):
    metrics, _ = run_stats(evaluated)
    acc = metrics["cora"]["cadnet"]["test_acc"]
    low, high = acc["ci95_low"], acc["ci95_high"]
    accs = [100 * a for a in FAKE_ACCS]
    assert min(accs) - 1e-3 <= low <= acc["mean"] <= high <= max(accs) + 1e-3
    assert high - low > 0.1  # an interval, not a point, for three different values


def test_confidence_interval_is_reproducible(evaluated):
    first, _ = run_stats(evaluated)
    second, _ = run_stats(evaluated)
    assert first == second


def test_only_selected_datasets_are_read(evaluated):
    stale = evaluated / "reports/eval/citeseer"
    stale.mkdir(parents=True)
    (stale / "cadnet").mkdir()
    (stale / "cadnet/main.csv").write_text(
        "seed,test_acc,val_acc,best_val_loss,selected_epoch,epochs_run,ms_per_seed_epoch,gamma_mean,engine\n"
        "0,0.5,0.5,1.0,3,5,1.0,0.9,single\n1,0.6,0.6,1.0,3,5,1.0,0.9,single\n"
    )
    write_data_stats(evaluated, "citeseer")
    metrics, results = run_stats(evaluated)
    assert list(metrics) == ["cora"]
    assert "| citeseer |" not in results
    # and a stale other method of the selected dataset is not read either
    (evaluated / "reports/eval/cora/cadnet_pull").mkdir()
    (evaluated / "reports/eval/cora/cadnet_pull/main.csv").write_text((stale / "cadnet/main.csv").read_text())
    metrics, results = run_stats(evaluated)
    assert "cadnet_pull" not in metrics["cora"]
    assert "cadnet_pull |" not in results


def test_second_method_beside_the_first(evaluated):
    update_params(evaluated, methods=["cadnet", "cadnet_pull"])
    write_tables_of_fake_seeds(evaluated, method="cadnet_pull", accs=(0.83, 0.84, 0.85))
    metrics, results = run_stats(evaluated)
    assert metrics["cora"]["cadnet"]["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-3)
    pull = metrics["cora"]["cadnet_pull"]
    assert pull["test_acc"]["mean"] == pytest.approx(84.0, abs=1e-3)
    assert pull["test_acc"]["std"] == pytest.approx(1.0, abs=1e-3)
    assert pull["diff"] == pytest.approx(-0.3, abs=1e-3)
    assert pull["diff_in_paper_std"] == pytest.approx(-0.6, abs=1e-3)
    assert "| cora | cadnet_pull | 3 | 84.00 ± 1.00 |" in results
    assert "| cora | cadnet | 3 | 83.60 ± 2.10 |" in results


def test_results_markdown_numbers(evaluated):
    metrics, results = run_stats(evaluated)
    acc = metrics["cora"]["cadnet"]["test_acc"]
    row = next(line for line in results.splitlines() if line.startswith("| cora | cadnet |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == "3"
    assert cells[3] == "83.60 ± 2.10"
    assert cells[4] == f"({acc['ci95_low']:.2f}, {acc['ci95_high']:.2f})"
    assert cells[5] == "84.3 ± 0.5"
    assert cells[6] == "Table 2"
    assert cells[7] == "-0.70"
    assert cells[8] == "-1.40"
    assert "| cora | 2708 | 5278 | 1433 | 7 | yes |" in results


def test_variants_compare_with_their_own_paper_rows_and_fill_table3(evaluated):
    """rw against Table 3's RW row (Cora 82.4 ± 0.5), not CAD-Net's; Table 3's layout with
    seed counts below 100 labelled."""
    update_params(evaluated, variants={"datasets": ["cora"], "methods": ["rw", "cadnet_noent"], "runs": {}})
    write_tables_of_fake_seeds(evaluated, method="rw", accs=(0.82, 0.83, 0.84))
    write_tables_of_fake_seeds(evaluated, method="cadnet_noent", accs=(0.83, 0.84, 0.85))
    metrics, results = run_stats(evaluated)
    assert set(metrics["cora"]) == {"cadnet", "rw", "cadnet_noent"}
    rw = metrics["cora"]["rw"]
    assert rw["paper"] == {"mean": 82.4, "std": 0.5}
    assert rw["diff"] == pytest.approx(83.0 - 82.4, abs=1e-3)
    assert metrics["cora"]["cadnet_noent"]["paper"] == {"mean": 83.6, "std": 0.4}  # appendix B.3
    assert "| cora | rw | 3 | 83.00 ± 1.00 |" in results
    assert "| RW | 83.00 ± 1.00 (3 seeds) / 82.4 ± 0.5 (+1.2σ) |" in results
    assert "| AdaCAD | 83.60 ± 2.10 (3 seeds) / 84.3 ± 0.5 (-1.4σ) |" in results
    assert "| CAD-Net w/o entropy | 84.00 ± 1.00 (3 seeds) / 83.6 ± 0.4 (+1.0σ) |" in results


def test_results_markdown_flags_dataset_mismatch(evaluated):
    write_data_stats(evaluated, "cora", [2708, 5429, 1433, 7])
    _, results = run_stats(evaluated)
    assert "| cora | 2708 | 5429 | 1433 | 7 | no (paper: [2708, 5278, 1433, 7]) |" in results


def test_missing_eval_csv_names_the_file(cora_workdir):
    write_data_stats(cora_workdir, "cora")
    with pytest.raises(DataError) as info:
        stats.main([])
    assert "reports/eval/cora/cadnet/main.csv" in str(info.value)
    assert "dvc repro" in str(info.value) and "cora/cadnet" in str(info.value)
    assert "\n" not in str(info.value)
    assert not (cora_workdir / "reports/metrics.json").exists()


def test_missing_data_stats_names_the_file(evaluated):
    (evaluated / "reports/data/cora.json").unlink()
    with pytest.raises(DataError) as info:
        stats.main([])
    assert "reports/data/cora.json" in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_data_stats_writes_nothing(evaluated):
    (evaluated / "reports/data/cora.json").unlink()
    with pytest.raises(DataError):
        stats.main([])
    assert not (evaluated / "reports/metrics.json").exists()


def test_bad_params_fail_first(evaluated):
    update_params(evaluated, datasets=["cora", "nope"])
    with pytest.raises(ConfigError, match="datasets"):
        stats.main([])
    assert not (evaluated / "reports/metrics.json").exists()


def test_table2_significance_and_claims_from_the_baselines_that_ran(evaluated):
    """Two baselines on Cora: Table 2 in the paper's layout, Table B.6 against the better one
    (paired by seed: the same p-value scipy gives on the paired accuracies), and the claims."""
    from scipy.stats import ttest_rel

    from conftest import FAKE_ACCS

    update_params(evaluated, baselines={"datasets": ["cora"], "methods": ["gcn", "appnp"], "runs": {}})
    gcn, appnp = (0.80, 0.81, 0.83), (0.82, 0.84, 0.83)
    write_tables_of_fake_seeds(evaluated, method="gcn", accs=gcn)
    write_tables_of_fake_seeds(evaluated, method="appnp", accs=appnp)
    metrics, results = run_stats(evaluated)
    assert metrics["cora"]["gcn"]["paper"] == {"mean": 81.3, "std": 0.7}
    assert "| GCN | 81.33 ± 1.53 (3 seeds) / 81.3 ± 0.7 |" in results
    assert "| Cheby | not run / 81.4 ± 0.5 |" in results
    assert "| GDEN | not reproduced / 82.0 |" in results
    expected_p = ttest_rel([100 * a for a in FAKE_ACCS], [100 * a for a in appnp]).pvalue
    assert f"| cora | APPNP | 3 | {expected_p:.2e} |" in results  # APPNP (83.0) is the better baseline
    assert "2.78e-36" in results  # the paper's p-value beside ours
    # ahead on the 3 seeds both have, but no test separates them: a tie, not "best", and not a
    # verdict while nine baselines of the paper's Cora row have not run
    missing = "; not run here, though the paper compares them: Cheby, SAGE, JK, MixHop, SGC, AGNN, GAT, U-Nets, GDC |"
    assert ("| CAD-Net is the best method (Table 2) | cora | not enough seeds | CAD-Net 83.60, APPNP 83.00 on 3 shared "
            f"seeds (paired p = {expected_p:.1e}), the best of the 2 baselines run here{missing}") in results
    assert ("| CAD-Net is significantly better than the second best (Table B.6) | cora | does not hold | paired t-test "
            f"by seed against APPNP on 3 shared seeds, p < 0.05: p = {expected_p:.2e}{missing}") in results
    # the claims come first, then the paper's tables in its order, then every cell
    headings = [line for line in results.splitlines() if line.startswith("## ")]
    assert headings[:2] == ["## At a glance", "## The paper's claims, checked"], headings
    assert headings[-1] == "## Every cell", headings
    # CAD-Net's row beside the paper's, and each claim's verdict, one row per dataset
    assert "| Cora | 83.60 ± 2.10 (3 seeds) | 84.3 ± 0.5 | not enough seeds | does not hold | holds |" in results


def test_a_claim_names_the_baseline_that_is_significantly_ahead_of_cadnet():
    metrics = {"computers": {"cadnet": {"test_acc": {"mean": 81.0}}, "gat": {"test_acc": {"mean": 82.5}}}}
    compared = [{"dataset": "computers", "runner_up": "gat", "p_value": 0.001, "pairs": 20, "ours_shared": 81.0,
                 "theirs_shared": 82.5}]
    best, significant = stats.claims_markdown(stats.accuracy_claims(compared, metrics, NO_TABLE2))[-2:]
    assert best == ("| CAD-Net is the best method (Table 2) | computers | does not hold | CAD-Net 81.00, GAT 82.50 on 20 "
                    "shared seeds (paired p = 1.0e-03), the best of the 1 baseline run here |")
    assert significant.endswith("| does not hold | paired t-test by seed against GAT on 20 shared seeds, p < 0.05: "
                                "p = 1.00e-03; GAT is significantly better |")
    compared[0]["p_value"] = 0.2  # behind, but not significantly: a tie
    best, significant = stats.claims_markdown(stats.accuracy_claims(compared, metrics, NO_TABLE2))[-2:]
    assert "| computers | tied with GAT |" in best and significant.endswith("p = 2.00e-01 |")


@pytest.mark.parametrize("p_value, ours, best, significant", [
    (1e-6, 94.6, "not enough seeds", "not enough seeds"),  # ahead of the 2 run: a baseline not run may be better
    (0.3, 94.0, "not enough seeds", "does not hold"),  # tied: one not run may be ahead
    (1e-3, 92.0, "does not hold", "does not hold"),  # a rival ahead decides it, whatever else runs
])
def test_table_2s_claims_hold_only_when_every_baseline_the_paper_compares_there_has_run(p_value, ours, best, significant):
    """Physics: the paper has numbers for nine baselines (ChebNet and MixHop OOM). With APPNP and
    GCN run, "holds" or "tied" are not verdicts yet and name the missing ones; ChebNet and MixHop
    are not among them."""
    paper = stats.load_paper()
    metrics = {"physics": {"cadnet": {}, "appnp": {}, "gcn": {}}}
    compared = [{"dataset": "physics", "runner_up": "appnp", "p_value": p_value, "pairs": 25, "ours_shared": ours,
                 "theirs_shared": 93.6}]
    (_, _, best_verdict, evidence), (_, _, significant_verdict, _) = stats.accuracy_claims(compared, metrics, paper)
    assert (best_verdict, significant_verdict) == (best, significant)
    assert evidence.endswith("run here, though the paper compares them: SAGE, JK, SGC, AGNN, GAT, U-Nets, GDC"), evidence
    metrics["physics"] |= {m: {} for m in ("sage", "jknet", "sgc", "agnn", "gat", "graph_unet", "gdc")}
    (_, _, best_verdict, evidence), _ = stats.accuracy_claims(compared, metrics, paper)
    assert best_verdict == {"not enough seeds": "holds" if p_value < 0.05 else "tied with APPNP"}.get(best, best)
    assert "not run here" not in evidence


@pytest.mark.parametrize("edit", ["duplicate", "drop"])
def test_stats_refuses_an_incomplete_or_duplicated_seed_set(evaluated, edit):
    path = evaluated / "reports/eval/cora/cadnet/main.csv"
    lines = path.read_text().splitlines()
    lines = lines + [lines[1]] if edit == "duplicate" else lines[:-1]
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError) as info:
        stats.main([])
    assert "\n" not in str(info.value) and "cadnet/main.csv" in str(info.value) and "seeds 0-2 once each" in str(info.value)
    assert not (evaluated / "reports/metrics.json").exists()


def test_timing_keeps_each_device_on_its_own_row():
    """A cell trained partly on a CPU and partly on a GPU: two rows, each its own mean."""
    table = pd.DataFrame({"seed": [0, 1, 2], "ms_per_seed_epoch": [100.0, 120.0, 4.0],
                          "engine": ["batched (chunk of 2)"] * 2 + ["batched (chunk of 1)"],
                          "device": ["cpu", "cpu", "cuda (NVIDIA H200)"]})
    text = stats.timing_markdown({("photo", "cadnet"): table}, {"ms_per_epoch": {"cadnet": {"photo": 12.79}}})
    rows = [line for line in text.splitlines() if line.startswith("| photo")]
    assert rows == ["| photo | cadnet | batched (chunk of 2) | cpu (2 seeds) | 110.00 | 12.79 |",
                    "| photo | cadnet | batched (chunk of 1) | cuda (NVIDIA H200) (1 seeds) | 4.00 | 12.79 |"]


def test_the_time_claim_compares_cadnet_and_appnp_only_on_the_same_device_engine_and_chunk():
    def table(ms, device, engine="batched (chunk of 2)"):
        return pd.DataFrame({"seed": [0, 1], "ms_per_seed_epoch": ms, "engine": [engine] * 2, "device": [device] * 2})

    paper = stats.load_paper()
    lines = [stats.claim_row(*c) for c in stats.time_claims({("cora", "cadnet"): table([10.0, 14.0], "cpu"),
                                    ("cora", "appnp"): table([20.0, 20.0], "cpu"),
                                    ("photo", "cadnet"): table([40.0, 40.0], "cpu"),
                                    ("photo", "appnp"): table([20.0, 20.0], "cpu"),
                                    ("pubmed", "cadnet"): table([10.0, 10.0], "cpu"),
                                    ("pubmed", "appnp"): table([2.0, 2.0], "cuda (NVIDIA H200)"),
                                    ("physics", "cadnet"): table([10.0, 10.0], "cpu", "batched (chunk of 100)"),
                                    ("physics", "appnp"): table([5.0, 5.0], "cpu", "batched (chunk of 25)")}, paper)]
    claim = "| CAD-Net is on par with APPNP in time per epoch (Table B.8) |"
    assert lines[0] == (f"{claim} cora | holds | CAD-Net / APPNP = 0.60 on cpu, batched (chunk of 2) (paper 1.11); "
                        "on par: at most 1.6x |")
    assert lines[1].startswith(f"{claim} photo | does not hold | CAD-Net / APPNP = 2.00 on cpu, batched (chunk of 2) "
                               "(paper 1.53)")
    assert lines[2].startswith(f"{claim} pubmed | not comparable here |")
    assert lines[3].startswith(f"{claim} physics | not comparable here |")  # chunks of 100 and 25


def test_a_baseline_still_improving_at_its_last_epoch_is_flagged_in_table2_and_the_claims():
    def cell(selected, ran):
        return pd.DataFrame({"seed": range(len(ran)), "test_acc": [0.5 + 0.01 * k for k in range(len(ran))],
                             "selected_epoch": selected, "epochs_run": ran})

    paper = stats.load_paper()
    tables = {("photo", "cadnet"): cell([100, 90, 100, 80], [100] * 4),  # half its seeds: not flagged
              ("photo", "gcn"): cell([200, 200, 200, 199], [200, 200, 200, 199]),  # all: flagged
              ("photo", "appnp"): cell([150, 120, 200, 200], [170, 140, 200, 200])}
    metrics = collect(tables, paper)
    assert metrics["photo"]["gcn"]["last_epoch_share"] == 1.0 and metrics["photo"]["cadnet"]["last_epoch_share"] == 0.5
    params = {"datasets": ["photo"]}
    table2 = "\n".join(stats.table2_markdown(metrics, params, paper))
    assert "| GCN | " in table2 and "(4 seeds) † / 88.9 ± 1.9" in table2
    assert "(4 seeds) † /" not in table2.split("| APPNP |")[1].split("\n")[0]
    assert "† still improving when its epochs ran out" in table2 and "photo/gcn (100% of its seeds)" in table2
    compared = stats.comparisons(tables, metrics, params)
    claims = "\n".join(stats.claims_markdown(stats.accuracy_claims(compared, metrics, paper)))
    assert "not final: GCN still improving at the last epoch (†)" in claims


def test_a_variant_compared_with_a_table2_row_follows_that_row_in_table2():
    """mixhop_l2 (paper row: MixHop's) is shown right after MixHop, against MixHop's paper
    numbers; a variant that did not run gets no row."""
    paper = stats.load_paper()
    cell = pd.DataFrame({"seed": [0, 1], "test_acc": [0.70, 0.72], "selected_epoch": [10, 10], "epochs_run": [400, 400]})
    tables = {("citeseer", m): cell for m in ("mixhop", "mixhop_l2", "cadnet")}
    metrics = collect(tables, paper)
    rows = [line.split(" | ")[0] for line in stats.table2_markdown(metrics, {"datasets": ["citeseer"]}, paper)
            if line.startswith("| ") and " / " in line]
    at = rows.index("| MixHop")
    assert rows[at + 1] == "| MixHop, L2 only (May 2019 code)" and rows[at + 2] == "| SGC"
    assert "| CAD-Net, Eq. 6 direction" not in rows  # cadnet_pull did not run
    line = next(l for l in stats.table2_markdown(metrics, {"datasets": ["citeseer"]}, paper) if l.startswith("| MixHop, L2"))
    assert line.endswith(" / 71.5 ± 0.8 |")


@pytest.mark.parametrize("gcn_acc, caveat", [(0.5, False), (0.88, True)], ids=["not the rival", "the rival"])
def test_the_claims_name_a_still_improving_baseline_only_where_it_is_the_rival(gcn_acc, caveat):
    def cell(acc, selected, ran):
        return pd.DataFrame({"seed": range(4), "test_acc": [acc + 0.001 * k for k in range(4)],
                             "selected_epoch": selected, "epochs_run": ran})

    paper = stats.load_paper()
    tables = {("photo", "cadnet"): cell(0.90, [100, 90, 100, 80], [100] * 4),
              ("photo", "gcn"): cell(gcn_acc, [200] * 4, [200] * 4),  # still improving
              ("photo", "appnp"): cell(0.85, [150, 120, 180, 190], [170, 140, 200, 200])}
    metrics = collect(tables, paper)
    compared = stats.comparisons(tables, metrics, {"datasets": ["photo"]})
    claims = "\n".join(stats.claims_markdown(stats.accuracy_claims(compared, metrics, paper)))
    assert ("not final: GCN still improving" in claims) == caveat, claims


def test_a_study_with_a_grid_is_a_table_of_its_values_side_by_side(evaluated):
    """A study's cells are keyed by their grid values: in the metrics (`cora.cadnet@beta-beta=0.5`)
    and in a table of their own in results.md, a column per value, "not run" where none ran."""
    from conftest import fake_record, read_params, write_params
    from pipeline import train

    params = read_params(evaluated)
    params["studies"]["beta"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2, "grid": {"beta": [0.5, 0.9]}}
    write_params(evaluated, params)
    train.write_tables("cora", "cadnet", "beta-beta=0.5", [fake_record(0, 0.70), fake_record(1, 0.74)])
    train.write_tables("cora", "cadnet", "beta-beta=0.9", [fake_record(0, 0.80), fake_record(1, 0.84)])
    write_tables_of_fake_seeds(evaluated)  # the specs, main's tables, then evaluate
    metrics, results = run_stats(evaluated)
    assert metrics["cora"]["cadnet@beta-beta=0.5"]["test_acc"]["mean"] == pytest.approx(72.0)
    assert metrics["cora"]["cadnet"]["test_acc"]["mean"] == pytest.approx(FAKE_MEAN, abs=1e-3)  # Table 2's cell
    assert "## Beta (Figure B.4)" in results
    assert "### Cora\n\n| method | beta=0.5 | beta=0.9 |" in results
    assert "| CAD-Net (AdaCAD) | 72.00 ± 2.83 (2 seeds) | 82.00 ± 2.83 (2 seeds) |" in results


def test_the_label_rate_and_random_split_studies_sit_beside_the_papers_tables(evaluated):
    """Tables B.9-B.11 and 4: ours / the paper's per cell; the label rates' 20 column is the
    method's Table 2 cell."""
    from conftest import fake_record, read_params, write_params
    from pipeline import train

    params = read_params(evaluated)
    params["studies"]["label_rates"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 2,
                                        "settings": {"split": "public_subset"}, "grid": {"train_per_class": [5]}}
    params["studies"]["random_splits"] = {"datasets": ["cora"], "methods": ["cadnet"], "runs": 0,
                                          "settings": {"split": "random_planetoid"}}
    write_params(evaluated, params)
    train.write_tables("cora", "cadnet", "label_rates-train_per_class=5", [fake_record(0, 0.70), fake_record(1, 0.74)])
    train.write_tables("cora", "cadnet", "random_splits", [])
    write_tables_of_fake_seeds(evaluated)
    _, results = run_stats(evaluated)
    assert "### Cora (Table B.10)\n\n| method | train_per_class=5 | train_per_class=20 (Table 2's cell) |" in results
    assert (f"| CAD-Net (AdaCAD) | 72.00 ± 2.83 (2 seeds) / 76.7 ± 1.2 | "
            f"{FAKE_MEAN:.2f} ± {FAKE_STD:.2f} (3 seeds) / 84.3 ± 0.5 |") in results
    assert "## Random splits (Table 4)" in results and "| method | cora |\n|---|---|\n| CAD-Net (AdaCAD) | not run / 82.4 ± 1.4 |" in results


def test_a_printed_value_is_rounded_once():
    """Seeds 75.44 and 79.35: the std is 2.7648 and prints 2.76; rounded to three decimals
    first (2.765) it printed 2.77, as ten stds of results.md did."""
    from pipeline.report.summary import fmt_acc, method_metrics

    m = method_metrics(pd.DataFrame({"seed": [0, 1], "test_acc": [0.7544, 0.7935]}), None)
    assert fmt_acc(m).endswith(" ± 2.76")
