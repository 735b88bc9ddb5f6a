"""pipeline/models/seeds.py: what every stacked network shares, by hand: the per-seed loss over each
seed's own nodes, and dropout drawn from each seed's own stream."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from pipeline.models.seeds import SeedStreams, dropout, masked_nll


def test_masked_nll_per_seed_by_hand():
    log_probs = torch.log(torch.tensor([[[0.5, 0.5], [0.25, 0.75]], [[0.9, 0.1], [0.2, 0.8]]]))  # [N=2, S=2, C=2]
    y = torch.tensor([0, 1])
    mask = torch.tensor([[True, True], [False, True]])
    expected = torch.tensor([-np.log(0.5), -(np.log(0.25) + np.log(0.8)) / 2], dtype=torch.float32)
    torch.testing.assert_close(masked_nll(log_probs, y, mask), expected)


def test_dropout_keeps_the_expected_share_and_scales_kept_values():
    x = torch.ones(100_000, 2)
    out = dropout(x, 0.3, SeedStreams([0, 1]))
    kept = out != 0
    assert kept.float().mean().item() == pytest.approx(0.7, abs=0.005)
    assert torch.allclose(out[kept], torch.full_like(out[kept], 1 / 0.7))
    assert not torch.equal(kept[:, 0], kept[:, 1])  # each seed its own mask
    assert torch.equal(kept[:, 1], dropout(x[:, 1:], 0.3, SeedStreams([1]))[:, 0] != 0)  # whatever its chunk
    assert dropout(x, 0.0, SeedStreams([0, 1])) is x
