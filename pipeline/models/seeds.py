"""Seeds as a batch dimension: what every method's stacked network shares with the training loop.

A chunk of S seeds trains as one network whose parameters carry a seed axis. What the loop and
every method need of that, whatever the method, is here: the output a network returns
(:class:`NetOutput`), one dropout stream per seed (:class:`SeedStreams`, :func:`dropout`), the
copy and restore of some seeds' parameters that freezes a seed once it stopped early
(:class:`StackedSeeds`), and the per-seed loss and accuracy over each seed's own nodes.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor


class NetOutput(NamedTuple):
    """What a method's network returns for its seeds, the loop's only view of any method."""
    log_probs: Tensor  # [N, S, C] the prediction (CAD-Net: log_softmax(Z_AdaCAD))
    regularizer: Tensor  # [S] the method's loss terms besides the NLL (CAD-Net: lambda_ent * mean H(p_i))
    gamma: Tensor  # [N, S] CAD-Net's adaptive weights; ones for a method without them


class SeedStreams:
    """One random stream per seed, for the dropout masks of a chunk of seeds.

    Stream s is a ``torch.Generator`` seeded with ``DROPOUT_STREAM_OFFSET + s``: offset so that
    it is not the stream that drew seed s's initial weights (``torch.manual_seed(s)``).
    """

    def __init__(self, seeds: list[int], device: torch.device | str = "cpu"):
        self.seeds = list(seeds)
        self.to(device)

    def to(self, device) -> "SeedStreams":
        self.device = torch.device(device)
        self.generators = [torch.Generator(self.device).manual_seed(DROPOUT_STREAM_OFFSET + s) for s in self.seeds]
        return self

    def uniform(self, shape: tuple[int, ...], seed_dim: int) -> Tensor:
        """A uniform [0, 1) draw of ``shape`` from each seed's stream, stacked at ``seed_dim``."""
        draws = [torch.rand(shape, generator=g, device=self.device) for g in self.generators]
        return torch.stack(draws, dim=seed_dim)


DROPOUT_STREAM_OFFSET = 1_000_003


def dropout(x: Tensor, p: float | PerReplica, streams: SeedStreams, seed_dim: int = 1) -> Tensor:
    """Training-mode dropout, as ``F.dropout`` (keep w.p. 1 - p, scale by 1 / (1 - p)), each
    seed's slice of ``x`` (along ``seed_dim``) masked from its own stream; ``p`` one rate for
    all, or one per replica (:class:`PerReplica`, its ``derived`` the scale 1 / (1 - p)).

    Written by hand because ``F.dropout`` draws from the global stream, shared by the chunk,
    and with ``bernoulli_``, which on CPU took about 3x as long as a uniform draw and a
    comparison for the same mask (13 ms vs 4.7 ms for 1.2M values, measured here).
    """
    per_seed_shape = x.shape[:seed_dim] + x.shape[seed_dim + 1:]
    if isinstance(p, PerReplica):
        keep = streams.uniform(per_seed_shape, seed_dim) >= p.along(seed_dim, x.dim())
        return x * keep * p.derived_along(seed_dim, x.dim())
    if p == 0.0:
        return x
    keep = streams.uniform(per_seed_shape, seed_dim) >= p
    return x * keep * (1.0 / (1.0 - p))


class PerReplica:
    """A setting whose value differs between the replicas of a batch (a study's grid: beta,
    lambda_ent, the dropout rate), one value per replica, and the quantity the network derives
    from it (``1 - beta``, the dropout scale ``1 / (1 - p)``).

    Both are computed from the Python floats in double precision and stored as float32, which
    is what torch does with a Python scalar in a float32 operation; so a replica's arithmetic
    is, operation for operation, that of its cell trained alone with the scalar setting.
    """

    def __init__(self, values: list[float], derive=None):
        self.value = torch.tensor(values, dtype=torch.float32)
        self.derived = torch.tensor([derive(v) for v in values], dtype=torch.float32) if derive else None

    def to(self, device) -> "PerReplica":
        self.value = self.value.to(device)
        self.derived = None if self.derived is None else self.derived.to(device)
        return self

    def along(self, seed_dim: int, dims: int) -> Tensor:
        """The values shaped to broadcast against a ``dims``-d tensor with seeds at ``seed_dim``."""
        return self.value.view([-1 if d == seed_dim else 1 for d in range(dims)])

    def derived_along(self, seed_dim: int, dims: int) -> Tensor:
        return self.derived.view([-1 if d == seed_dim else 1 for d in range(dims)])


class StackedSeeds(torch.nn.Module):
    """A network whose parameters stack its seeds along axis 0, or along ``SEED_AXIS[name]``."""

    SEED_AXIS: dict[str, int] = {}

    def seed_slices(self, seeds: Tensor) -> list[Tensor]:
        """Copies of the given seeds' parameters (to restore frozen seeds after a step)."""
        return [p.detach().index_select(self.SEED_AXIS.get(n, 0), seeds).clone() for n, p in self.named_parameters()]

    def restore_seed_slices(self, seeds: Tensor, saved: list[Tensor]) -> None:
        with torch.no_grad():
            for (name, param), values in zip(self.named_parameters(), saved):
                param.index_copy_(self.SEED_AXIS.get(name, 0), seeds, values)


def masked_nll(log_probs: Tensor, y: Tensor, mask: Tensor) -> Tensor:
    """Per-seed mean NLL over each seed's own node set: ``[N, S, C]``, ``[N]``, ``[N, S]`` -> ``[S]``."""
    picked = log_probs.gather(-1, y.view(-1, 1, 1).expand(-1, log_probs.size(1), 1)).squeeze(-1)
    return -(picked * mask).sum(0) / mask.sum(0)


def masked_accuracy(log_probs: Tensor, y: Tensor, mask: Tensor) -> Tensor:
    correct = (log_probs.argmax(-1) == y.view(-1, 1)) & mask
    return correct.sum(0) / mask.sum(0)
