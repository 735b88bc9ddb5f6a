"""Starting a cluster (pipeline/cluster.py): its bad options are one line each, before anything
starts. The clusters themselves are started by test_dispatch.py (a local one) and by the README's
commands in test_pipeline_e2e.py (local, by hand, SLURM against a stand-in sbatch)."""
from __future__ import annotations

import pytest

from pipeline import cluster, config


@pytest.mark.parametrize("argv, message", [
    (["local", "--workers", "0"], "--workers: 0; allowed values: an integer >= 1"),
    (["slurm", "--cores", "0"], "--cores: 0; allowed values: an integer >= 1"),
    (["pbs", "--gpu"], "--gpu: pbs has no one way to ask for a GPU; allowed with: slurm"),
])
def test_a_bad_option_is_one_line_naming_it(argv, message, tmp_path):
    with pytest.raises(config.ConfigError) as info:
        cluster.main([*argv, "--scheduler-file", str(tmp_path / "cluster.json")])
    assert str(info.value) == message
    assert not (tmp_path / "cluster.json").exists()
