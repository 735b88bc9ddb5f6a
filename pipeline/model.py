r"""CAD-Net: the maths of the paper, section 3 ("Proposed Method").

Equation numbers are those of the paper's LaTeX source (``../shared/paper``), counted in
order: (1) overview, (4) transition, (5) self-guided class distribution, (6) CAD aggregation,
(7) AdaCAD interpolation, (8) control variable :math:`c_i`, (9) adaptive weight
:math:`\gamma_i`, (10) matrix form. SPEC.md calls the aggregation "Eq. 5"; it is label
``eq:CAD``, the sixth numbered equation.

Every function here accepts node tensors of shape ``[N, C]`` (one model) or ``[N, S, C]``
(``S`` models side by side), node axis first and class axis last. The batched engine
(:mod:`pipeline.batched`) reuses the softmax of Eq. (4), the weights of Eqs. (8)-(9), Eq. (7)
and the entropy; it computes the per-edge products and the diffusion as sparse-matrix
products of its own, which the tests check against the functions here.
"""
from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.utils import scatter, softmax

ENTROPY_EPS = 1e-15  # as in the authors' code: keeps log() finite for p = 0

# How the diffusion runs over the edge list (row, col) = edge_index, with T normalised
# over each node's out-edges (grouped by row):
#   push  - authors' code: messages flow row -> col, z_i = sum_j T[j, i] z_j, i.e. (T^T)^K Z
#   pull  - paper Eq. (6): messages flow col -> row, z_i = sum_j T[i, j] z_j, i.e. T^K Z
FLOW_OF_DIRECTION = {"push": "source_to_target", "pull": "target_to_source"}


def class_attentive_transition(probs: Tensor, edge_index: Tensor) -> tuple[Tensor, Tensor]:
    r"""Transition probabilities of the class-attentive random walk, Eq. (4).

    .. math::
        T_{ij} = \mathrm{softmax}_{j \in \mathcal{N}(i)}(\mathbf{p}_i^\top \mathbf{p}_j)

    Args:
        probs: class distributions :math:`\mathbf{p}` (Eq. 5), ``[N, C]`` or ``[N, S, C]``.
        edge_index: ``[2, E]``; edge ``e`` goes from ``row[e]`` = i to ``col[e]`` = j.

    Returns:
        ``(transition, similarity)``: :math:`T_{ij}` and :math:`\mathbf{p}_i^\top\mathbf{p}_j`
        per edge, each ``[E]`` or ``[E, S]``. The transitions of each node's out-edges sum to 1.
    """
    row, col = edge_index
    similarity = (probs[row] * probs[col]).sum(dim=-1)
    return transition_from_similarity(similarity, row, probs.size(0)), similarity


def transition_from_similarity(similarity: Tensor, row: Tensor, num_nodes: int) -> Tensor:
    """The softmax of Eq. (4) over each node's out-edges (edges grouped by their source ``row``)."""
    return softmax(similarity, row, num_nodes=num_nodes, dim=0)


def adaptive_weight(similarity: Tensor, row: Tensor, num_nodes: int, beta: float) -> Tensor:
    r"""Per-node weight :math:`\gamma_i` of the diffusion result, Eqs. (8) and (9).

    .. math::
        c_i = \frac{1}{\deg(i)} \sum_{j \in \mathcal{N}(i)} \mathbf{p}_i^\top \mathbf{p}_j,
        \qquad \gamma_i = \beta + (1 - \beta)\, c_i

    ``similarity`` holds :math:`\mathbf{p}_i^\top\mathbf{p}_j` per edge and ``row`` each edge's
    source i. A node without edges counts as degree 1 (so :math:`c_i = 0`). As in the authors'
    code, no gradient flows through :math:`\gamma`. Returns ``[N]`` or ``[N, S]``.
    """
    with torch.no_grad():
        degree = torch.bincount(row, minlength=num_nodes).clamp(min=1)
        degree = degree.view(-1, *([1] * (similarity.dim() - 1))).to(similarity.dtype)
        c = scatter(similarity, row, dim=0, dim_size=num_nodes, reduce="sum") / degree
        return beta + (1.0 - beta) * c


def entropy(probs: Tensor) -> Tensor:
    r"""Entropy :math:`H(\mathbf{p}_i)` of each node's class distribution (the regulariser
    :math:`\mathcal{L}_{\mathrm{ent}}` of section 3.4). Returns ``[N]`` or ``[N, S]``."""
    return -(probs * torch.log(probs + ENTROPY_EPS)).sum(dim=-1)


class ClassAttentiveDiffusion(MessagePassing):
    r"""K steps of class-attentive diffusion, Eqs. (6) and (10):
    :math:`Z^{(\mathrm{CAD})} = \Pi^{(K)} Z` with :math:`\Pi^{(K)} = T^K`, done as K sparse
    message-passing steps (no N x N matrix is ever built).

    Args:
        K: number of diffusion steps.
        direction: ``"push"`` (authors' code, :math:`(T^\top)^K Z`, the default that
            reproduces the paper's table) or ``"pull"`` (the paper's Eq. 6, :math:`T^K Z`).
    """

    def __init__(self, K: int, direction: str = "push"):
        if direction not in FLOW_OF_DIRECTION:
            raise ValueError(f"direction: unknown value {direction!r}; allowed: push, pull")
        super().__init__(aggr="add", flow=FLOW_OF_DIRECTION[direction], node_dim=0)
        self.K = K
        self.direction = direction

    def forward(self, z: Tensor, edge_index: Tensor, transition: Tensor) -> Tensor:
        for _ in range(self.K):
            z = self.propagate(edge_index, z=z, transition=transition)
        return z

    def message(self, z_j: Tensor, transition: Tensor) -> Tensor:
        return transition.unsqueeze(-1) * z_j

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(K={self.K}, direction={self.direction})"


def adacad(
    logits: Tensor,
    self_term: Tensor,
    edge_index: Tensor,
    diffusion: ClassAttentiveDiffusion,
    beta: float,
) -> tuple[Tensor, Tensor, Tensor]:
    r"""Adaptive aggregation with CAD, Eqs. (7) and (10):

    .. math::
        Z^{(\mathrm{AdaCAD})} = (\mathbf{I} - \Gamma) Z + \Gamma\, \Pi^{(K)} Z

    Args:
        logits: :math:`Z` before any dropout; it defines :math:`\mathbf{p} = \mathrm{softmax}(Z)`
            (Eq. 5, :math:`g_\phi` is a plain softmax) and so :math:`T` and :math:`\gamma`.
        self_term: the :math:`Z` that is diffused and interpolated; equal to ``logits``, or
            ``logits`` after dropout where the authors' code drops the logits (Cora, CiteSeer).

    Returns:
        ``(z_adacad, entropy_per_node, gamma)``.
    """
    probs = F.softmax(logits, dim=-1)
    transition, similarity = class_attentive_transition(probs, edge_index)
    gamma = adaptive_weight(similarity, edge_index[0], logits.size(0), beta)
    z_cad = diffusion(self_term, edge_index, transition)
    return interpolate(self_term, z_cad, gamma), entropy(probs), gamma


def interpolate(z: Tensor, z_cad: Tensor, gamma: Tensor) -> Tensor:
    r"""Eq. (7): :math:`(1 - \gamma_i) z_i + \gamma_i z_i^{(\mathrm{CAD})}` for every node."""
    gamma = gamma.unsqueeze(-1)
    return (1.0 - gamma) * z + gamma * z_cad


def sparse_dropout(x: Tensor, p: float, training: bool) -> Tensor:
    """Dropout on the stored values of a sparse COO matrix.

    Written by hand because ``F.dropout`` does not take sparse tensors. Zeros are unaffected
    by dense dropout, so dropping stored values has the same distribution as the authors'
    dense ``F.dropout`` on the feature matrix.
    """
    if not training or p == 0.0:
        return x
    return torch.sparse_coo_tensor(
        x.indices(), F.dropout(x.values(), p, True), x.shape, is_coalesced=True, check_invariants=False
    )


class CADNetOutput(NamedTuple):
    log_probs: Tensor  # [N, C] log_softmax(Z_AdaCAD): the prediction
    entropy: Tensor  # [N] H(p_i) of the undropped logits
    gamma: Tensor  # [N] adaptive weights


class CADNet(torch.nn.Module):
    r"""The whole network of section 3.4: a 2-layer MLP :math:`f_\theta` (Eq. 1), AdaCAD on
    its logits, and :math:`g_\phi = \mathrm{softmax}` for the prediction.

    This is the single-seed reference; :mod:`pipeline.batched` trains many seeds at once.

    Args:
        in_features, hidden, num_classes: layer sizes.
        leak_slope: negative slope of the LeakyReLU.
        p_drop: dropout probability, applied at each of ``dropout_sites``
            (``"input"``, ``"hidden"``, ``"logits"``).
        K, beta, direction: AdaCAD's diffusion steps, sensitivity and direction.
    """

    def __init__(
        self,
        in_features: int,
        hidden: int,
        num_classes: int,
        leak_slope: float,
        p_drop: float,
        dropout_sites: list[str] | tuple[str, ...],
        K: int,
        beta: float,
        direction: str = "push",
    ):
        super().__init__()
        self.embed1 = torch.nn.Linear(in_features, hidden)
        self.embed2 = torch.nn.Linear(hidden, num_classes)
        self.diffusion = ClassAttentiveDiffusion(K, direction)
        self.leak_slope = leak_slope
        self.p_drop = p_drop
        self.dropout_sites = frozenset(dropout_sites)
        self.beta = beta

    def _dropout(self, x: Tensor, site: str) -> Tensor:
        if site not in self.dropout_sites:
            return x
        if x.is_sparse:
            return sparse_dropout(x, self.p_drop, self.training)
        return F.dropout(x, self.p_drop, self.training)

    def forward(self, x: Tensor, edge_index: Tensor) -> CADNetOutput:
        x = self._dropout(x, "input")
        hidden = F.leaky_relu(_linear(x, self.embed1), self.leak_slope)
        hidden = self._dropout(hidden, "hidden")
        logits = self.embed2(hidden)
        self_term = self._dropout(logits, "logits")
        z, node_entropy, gamma = adacad(logits, self_term, edge_index, self.diffusion, self.beta)
        return CADNetOutput(F.log_softmax(z, dim=-1), node_entropy, gamma)


def _linear(x: Tensor, layer: torch.nn.Linear) -> Tensor:
    """``layer(x)`` for dense or sparse ``x`` (``nn.Linear`` rejects sparse input)."""
    if x.is_sparse:
        return torch.sparse.mm(x, layer.weight.t()) + layer.bias
    return layer(x)
