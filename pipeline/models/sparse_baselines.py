r"""GCN, SGC, APPNP and GDC with seeds as a batch dimension, as sparse products
(``method_hparams.<baseline>[.<dataset>].implementation: sparse``).

These four networks are linear in their neighbours: every propagation is :math:`\hat{A} H`
for one fixed sparse matrix :math:`\hat{A}` (GCN's normalisation of the graph with self-loops,
Kipf & Welling 2017, Eq. 2; GDC's rewired graph), so the S seeds' propagations are one
sparse-dense product :math:`\hat{A} [H_1 \Vert \dots \Vert H_S]`, and their inputs are binary
bag-of-words rows, so the first layer is a product of the sparse features. Written against the
one-seed networks of :mod:`pipeline.models.baselines` (PyG's ``GCNConv``, ``SGConv``, ``APPNP``),
which stay the reference: each seed starts from that network's weights after
``torch.manual_seed(seed)``, and without dropout computes the same outputs and gradients
(``tests/test_sparse_baselines.py``).

What the ``vmap`` implementation (``implementation: vmap``) spends its time on and this one does
not: the dense feature matrix times each seed's weights (Cora's is 1.3% non-zero), dropout masks
over every entry of it (here only over the stored entries, which is the same distribution: a
dropped zero is zero), one product per edge and seed (PyG's messages), and SGC's logits on rows
that no loss or accuracy reads. Each seed draws its dropout masks from its own stream
(:class:`pipeline.models.seeds.SeedStreams`), as CAD-Net's do, so a seed's numbers do not depend
on its chunk, and cells that differ only in their split train as replicas of one batch.

Tensors are ``[N, S, D]`` (node, seed, width), as in :mod:`pipeline.models.adacad_batched`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn.conv.gcn_conv import gcn_norm

from pipeline.models.adacad_batched import StackedSparseFeatures
from pipeline.models.methods import PRODUCT_ORDERS
from pipeline.models.seeds import NetOutput, SeedStreams, StackedSeeds, dropout

class FixedGraph:
    r"""A fixed propagation matrix :math:`M` with :math:`M_{ij} = w_{j \to i}`: PyG's message
    passing (``flow="source_to_target"``) sends ``x_j`` along each edge ``j -> i``
    (``edge_index[0]`` to ``edge_index[1]``) and sums at ``i``; duplicate edges add up, as there.
    Kept as CSR with its transpose, for the gradient; :meth:`rows` keeps some of its rows."""

    def __init__(self, edge_index: Tensor, edge_weight: Tensor, num_nodes: int):
        source, target = edge_index
        self._set(torch.sparse_coo_tensor(torch.stack([target, source]), edge_weight, (num_nodes, num_nodes),
                                          check_invariants=True).coalesce())

    def _set(self, coo: Tensor) -> "FixedGraph":
        self.coo = coo
        self.matrix = coo.to_sparse_csr()
        self.transposed = coo.t().coalesce().to_sparse_csr()
        return self

    @classmethod
    def gcn_normalised(cls, edge_index: Tensor, num_nodes: int) -> "FixedGraph":
        r""":math:`\hat{D}^{-1/2}(A + I)\hat{D}^{-1/2}` as PyG's ``gcn_norm`` weighs it (the
        propagation of ``GCNConv``, ``SGConv`` and ``APPNP`` with their defaults)."""
        index, weight = gcn_norm(edge_index, None, num_nodes, add_self_loops=True)
        return cls(index, weight, num_nodes)

    def rows(self, index: Tensor) -> "FixedGraph":
        """The matrix of rows ``index`` of this one: its product gives those nodes only."""
        return FixedGraph.__new__(FixedGraph)._set(self.coo.index_select(0, index).coalesce())

    def to(self, device) -> "FixedGraph":
        self.coo, self.matrix, self.transposed = (t.to(device) for t in (self.coo, self.matrix, self.transposed))
        return self

    def propagate(self, h: Tensor) -> Tensor:
        """``M @ h`` for every seed of ``h`` ``[N, S, D]`` at once: ``[rows of M, S, D]``."""
        out = _FixedProduct.apply(self.matrix, self.transposed, h.reshape(h.size(0), -1))
        return out.view(-1, *h.shape[1:])


class _FixedProduct(torch.autograd.Function):
    """``M @ H`` for a fixed sparse ``M``; the gradient ``M^T G`` with the transpose built once
    (torch's own backward of ``sparse.mm`` transposes the CSR matrix at every step)."""

    @staticmethod
    def forward(ctx, matrix: Tensor, transposed: Tensor, h: Tensor) -> Tensor:
        ctx.transposed = transposed
        return torch.sparse.mm(matrix, h)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return None, None, torch.sparse.mm(ctx.transposed, grad.contiguous())


class _SeedBias(torch.autograd.Function):
    """``h + b`` for ``h`` ``[N, S, D]`` and ``b`` ``[S, D]``, whose gradient sums over the nodes
    along each seed's own contiguous row: autograd's own sum over the strided node axis
    vectorises by the width S x D, so a seed's bias gradient would differ in its last bits with
    the number of seeds beside it."""

    @staticmethod
    def forward(ctx, h: Tensor, b: Tensor) -> Tensor:
        return h + b

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad, grad.movedim(0, -1).contiguous().sum(-1)


def add_bias(h: Tensor, b: Tensor) -> Tensor:
    return _SeedBias.apply(h, b)


def _stack(tensors: list[Tensor], dim: int = 0) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.stack([t.detach() for t in tensors], dim=dim))


class SparseSeeds(StackedSeeds):
    """What the four networks share: the seeds' dropout streams, the sparse features laid out
    for S seeds, and the first layer ``X @ W_s`` (``w_in``: ``[F, S, H]``)."""

    SEED_AXIS = {"w_in": 1}

    def __init__(self, x: Tensor, seeds: list[int]):
        super().__init__()
        self.streams = SeedStreams(seeds)
        self.x = x.coalesce()
        self.features = StackedSparseFeatures(self.x, len(seeds))

    def to(self, device):
        super().to(device)
        self.streams.to(device)
        self.features.to(device)
        self.x = self.x.to(device)
        return self

    def first_layer(self, p_drop: float = 0.0) -> Tensor:
        """``dropout(X) @ W_s`` for every seed ``[N, S, H]``, each seed's mask on X's stored
        entries from its own stream; without dropout one product with the seeds side by side."""
        if self.training and p_drop > 0:
            return self.features.matmul(self.w_in, p_drop, self.streams)
        F_in, S, H = self.w_in.shape
        return torch.sparse.mm(self.x, self.w_in.reshape(F_in, S * H)).view(-1, S, H)

    def dropout(self, h: Tensor, p: float) -> Tensor:
        return dropout(h, p, self.streams) if self.training and p > 0 else h

    @staticmethod
    def output(logits: Tensor) -> NetOutput:
        n, S = logits.shape[:2]
        return NetOutput(F.log_softmax(logits, dim=-1), logits.new_zeros(S), logits.new_ones(n, S))


class SparseConvStack(SparseSeeds):
    """:class:`pipeline.models.baselines.ConvStack` of ``GCNConv`` layers (GCN; GDC on its
    rewired graph with ``normalize=False``): each layer :math:`M H W + b`, ReLU and dropout
    between layers, no input dropout (PyG's ``benchmark/citation/gcn.py``)."""

    SEED_AXIS = {"w_in": 1}

    def __init__(self, models: list, x: Tensor, graph: FixedGraph, seeds: list[int]):
        super().__init__(x, seeds)
        convs = [m.convs for m in models]
        self.graph, self.p_drop = graph, models[0].p_drop
        self.w_in = _stack([c[0].lin.weight.t() for c in convs], dim=1)
        self.weights = torch.nn.ParameterList(_stack([c[k].lin.weight.t() for c in convs])
                                              for k in range(1, len(convs[0])))
        self.biases = torch.nn.ParameterList(_stack([c[k].bias for c in convs]) for k in range(len(convs[0])))

    def to(self, device):
        super().to(device)
        self.graph.to(device)
        return self

    def forward(self) -> NetOutput:
        h = add_bias(self.graph.propagate(self.first_layer()), self.biases[0])
        for w, b in zip(self.weights, self.biases[1:]):
            h = self.dropout(F.relu(h), self.p_drop)
            h = add_bias(self.graph.propagate(torch.einsum("nsh,shc->nsc", h, w)), b)
        return self.output(h)


class SparseAPPNP(SparseSeeds):
    r""":class:`pipeline.models.baselines.APPNPNet`: dropout, Linear, ReLU, dropout, Linear,
    then K steps :math:`Z \leftarrow (1 - \alpha) \hat{A} Z + \alpha H` (Klicpera et al. 2019,
    Eq. 3; PyG's ``APPNP``)."""

    def __init__(self, models: list, x: Tensor, graph: FixedGraph, seeds: list[int]):
        super().__init__(x, seeds)
        self.graph, self.p_drop = graph, models[0].p_drop
        self.K, self.alpha = models[0].prop.K, models[0].prop.alpha
        self.w_in = _stack([m.lin1.weight.t() for m in models], dim=1)
        self.b_in = _stack([m.lin1.bias for m in models])
        self.w_out = _stack([m.lin2.weight.t() for m in models])
        self.b_out = _stack([m.lin2.bias for m in models])

    def to(self, device):
        super().to(device)
        self.graph.to(device)
        return self

    def forward(self) -> NetOutput:
        h = F.relu(add_bias(self.first_layer(self.p_drop), self.b_in))
        h = self.dropout(h, self.p_drop)
        h = add_bias(torch.einsum("nsh,shc->nsc", h, self.w_out), self.b_out)
        z = h
        for _ in range(self.K):
            z = (1 - self.alpha) * self.graph.propagate(z) + self.alpha * h
        return self.output(z)


class SparseSGC(StackedSeeds):
    r""":class:`pipeline.models.baselines.SGC`: logits :math:`\hat{A}^K X W + b` in one of two
    orders of products (its ``product_order`` setting; the same function, rounded differently).
    ``propagated_first``: :math:`(\hat{A}^K X) W`, the propagated features computed once, as PyG's
    ``SGConv(cached=True)`` keeps them (Wu et al. 2019, Eq. 8: SGC is a linear model on
    pre-propagated features), then one dense product with every seed's weights side by side.
    ``weights_first``: :math:`\hat{A}^K (X W)`, the sparse features times the weights, then K
    sparse products with ``[N, S x C]`` at every step: ``nnz(X) + K nnz(A)`` multiply-adds a
    column, where the other order costs ``F`` a row read. Either way the last product is taken
    only on the rows the loop reads (:meth:`read_rows`: the training nodes in training mode,
    every split's in the eval pass); the other rows' log-probabilities are left at 0, which no
    loss or accuracy reads. Rounding differs from PyG's message passing in the last digits."""

    SEED_AXIS = {"w_in": 1}

    def __init__(self, models: list, x: Tensor, graph: FixedGraph, seeds: list[int]):
        super().__init__()
        self.w_in = _stack([m.conv.lin.weight.t() for m in models], dim=1)  # [F, S, C]
        self.bias = _stack([m.conv.lin.bias for m in models])
        self.K, self.weights_first = models[0].conv.K, models[0].product_order == "weights_first"
        x = x.coalesce()
        self.graph, self.n = graph, x.size(0)
        if self.weights_first:  # X as a fixed CSR matrix with its transpose (the weights' gradient)
            self.x = FixedGraph.__new__(FixedGraph)._set(x)
            self.propagated = None
        else:
            self.x, self.propagated = None, x.to_dense()
            for _ in range(self.K):
                self.propagated = torch.sparse.mm(graph.matrix, self.propagated)
        self.rows = {True: None, False: None}  # training mode -> the rows read (None: all)
        self.inputs = {True: self.propagated, False: self.propagated}  # those rows of A^K X
        self.last = {True: graph, False: graph}  # weights first: the last product, those rows only

    def to(self, device):
        super().to(device)
        self.graph.to(device)
        if self.x is not None:
            self.x.to(device)
        if self.propagated is not None:
            self.propagated = self.propagated.to(device)
            self.inputs = {mode: inputs.to(device) for mode, inputs in self.inputs.items()}
        self.rows = {mode: None if rows is None else rows.to(device) for mode, rows in self.rows.items()}
        self.last = {mode: last.to(device) for mode, last in self.last.items()}
        return self

    def read_rows(self, training: Tensor, every: Tensor) -> None:
        """The nodes ``[N]`` (bool) whose output the loop reads in training mode and in the eval pass."""
        self.rows = {True: training.nonzero().view(-1), False: every.nonzero().view(-1)}
        if self.weights_first:
            if self.K > 0:  # K = 0 is a linear model on the features: every row is its own product
                self.last = {mode: self.graph.rows(rows) for mode, rows in self.rows.items()}
        else:
            self.inputs = {mode: self.propagated.index_select(0, rows) for mode, rows in self.rows.items()}

    def forward(self) -> NetOutput:
        F_in, S, C = self.w_in.shape
        rows = self.rows[self.training]
        if self.weights_first:
            h = self.x.propagate(self.w_in)  # X [N, F] times every seed's [F, C]: [N, S, C]
            for _ in range(self.K - 1):
                h = self.graph.propagate(h)
            if self.K:
                h = self.last[self.training].propagate(h)
            elif rows is not None:
                h = h.index_select(0, rows)
        else:
            h = (self.inputs[self.training] @ self.w_in.reshape(F_in, S * C)).view(-1, S, C)
        logits = add_bias(h, self.bias)
        if rows is None:
            return SparseSeeds.output(logits)
        log_probs = F.log_softmax(logits, dim=-1)
        log_probs = log_probs.new_zeros(self.n, S, C).index_copy(0, rows, log_probs)
        return NetOutput(log_probs, logits.new_zeros(S), logits.new_ones(self.n, S))


def build_sparse(name: str, models: list, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None,
                 seeds: list[int]) -> StackedSeeds:
    """The sparse batched network of baseline ``name`` from its seeds' one-seed ``models``:
    ``edge_index`` without self-loops (GCN's normalisation adds them), or GDC's rewired graph
    with its weights."""
    num_nodes = x.size(0)
    if name == "gdc":
        return SparseConvStack(models, x, FixedGraph(edge_index, edge_weight, num_nodes), seeds)
    graph = FixedGraph.gcn_normalised(edge_index, num_nodes)
    network = {"gcn": SparseConvStack, "appnp": SparseAPPNP, "sgc": SparseSGC}[name]
    return network(models, x, graph, seeds)
