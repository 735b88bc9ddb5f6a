r"""The baselines with seeds as a batch dimension, as sparse products
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
from torch_geometric.utils import add_self_loops, remove_self_loops

from pipeline.models.adacad_batched import BlockDiagonalGraph, StackedSparseFeatures
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


class _SeedScores(torch.autograd.Function):
    """GAT's per-node attention scores ``(x * a).sum(-1)`` for ``x`` ``[N, S, H, C]`` and ``a``
    ``[S, H, C]``, whose gradient for ``a`` sums over the nodes along each seed's own contiguous
    row, as :class:`_SeedBias` does for a bias."""

    @staticmethod
    def forward(ctx, x: Tensor, a: Tensor) -> Tensor:
        ctx.save_for_backward(x, a)
        return (x * a).sum(-1)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, a = ctx.saved_tensors
        grad = grad.unsqueeze(-1)
        return grad * a, (x * grad).movedim(0, -1).contiguous().sum(-1)


def _stack(tensors: list[Tensor], dim: int = 0) -> torch.nn.Parameter:
    return torch.nn.Parameter(torch.stack([t.detach() for t in tensors], dim=dim))


def _layer_products(h: Tensor, weight: Tensor) -> Tensor:
    """``h @ weight[s]`` for every seed: ``[N, S, D]`` by ``[S, D, O]`` -> ``[N, S, O]``."""
    return torch.einsum("nsd,sdo->nso", h, weight)


class SparseSeeds(StackedSeeds):
    """What the four networks share: the seeds' dropout streams, the sparse features laid out
    for S seeds, and the first layer ``X @ W_s`` (``w_in``: ``[F, S, H]``)."""

    SEED_AXIS = {"w_in": 1}
    graph = None  # the network's fixed sparse matrix (FixedGraph or BlockDiagonalGraph), if one

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
        if self.graph is not None:
            self.graph.to(device)
        return self

    def first_layer(self, p_drop: float = 0.0) -> Tensor:
        """``dropout(X) @ W_s`` for every seed ``[N, S, H]`` (``w_in``)."""
        return self.features_times(self.w_in, p_drop)

    def features_times(self, weight: Tensor, p_drop: float = 0.0) -> Tensor:
        """``dropout(X) @ weight[:, s]`` for every seed s (``weight``: ``[F, S, H]``), each seed's
        mask on X's stored entries from its own stream (``embedding_bag``,
        :class:`StackedSparseFeatures`). Training without dropout takes ``torch.sparse.mm`` of X
        and the seeds' weights side by side, whose backward is the faster over many seeds
        (PubMed, GCN at 25 seeds: 31 against 95 ms a seed-epoch); the eval pass the
        ``embedding_bag``, whose forward is the faster (PubMed, one seed: 7 against 61 ms). The
        two are equal bit for bit."""
        if self.training and p_drop == 0:
            F_in, S, H = weight.shape
            return torch.sparse.mm(self.x, weight.reshape(F_in, S * H)).view(-1, S, H)
        return self.features.matmul(weight, p_drop if self.training else 0.0, self.streams)

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

    def forward(self) -> NetOutput:
        h = add_bias(self.graph.propagate(self.first_layer()), self.biases[0])
        for w, b in zip(self.weights, self.biases[1:]):
            h = self.dropout(F.relu(h), self.p_drop)
            h = add_bias(self.graph.propagate(_layer_products(h, w)), b)
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

    def forward(self) -> NetOutput:
        h = F.relu(add_bias(self.first_layer(self.p_drop), self.b_in))
        h = self.dropout(h, self.p_drop)
        h = add_bias(_layer_products(h, self.w_out), self.b_out)
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


class SparseChebStack(SparseSeeds):
    r""":class:`pipeline.models.baselines.ConvStack` of PyG ``ChebConv`` layers (ChebNet,
    Defferrard et al. 2016, Eq. 5): each layer :math:`\sum_{k<K} T_k(\tilde{L}) H W_k + b`, with
    :math:`\tilde{L} = 2L/\lambda_{max} - I` for the symmetric normalised Laplacian and
    :math:`\lambda_{max} = 2` (ChebConv's defaults: :math:`-D^{-1/2} A D^{-1/2}`), ReLU and
    dropout between layers, no input dropout (PyG's ``benchmark/citation/cheb.py``).

    PyG propagates the input, :math:`T_k(\tilde{L}) X`, at the input's width (Cora's 1,433
    columns, dense); here every :math:`Y_k = H W_k` comes first (for the sparse features, one
    product for all k and seeds) and the sum is Clenshaw's recurrence on them,
    :math:`b_k = Y_k + 2 \tilde{L} b_{k+1} - b_{k+2}`, output :math:`Y_0 + \tilde{L} b_1 - b_2`:
    K - 1 sparse products at the layer's output width. The same function, rounded differently."""

    SEED_AXIS = {"w_in": 1}

    def __init__(self, models: list, x: Tensor, edge_index: Tensor, seeds: list[int]):
        super().__init__(x, seeds)
        convs = [m.convs for m in models]
        first = convs[0][0]
        index, weight = first.__norm__(edge_index, x.size(0), None, first.normalization,
                                       torch.tensor(2.0), dtype=torch.float32)
        self.graph, self.p_drop = FixedGraph(index, weight, x.size(0)), models[0].p_drop
        self.K = len(first.lins)
        # [F, S, K, H]: one product of the sparse features gives every Y_k of every seed
        self.w_in = _stack([torch.stack([lin.weight.t() for lin in c[0].lins], dim=1) for c in convs], dim=1)
        self.weights = torch.nn.ParameterList(_stack([torch.stack([lin.weight.t() for lin in c[k].lins])
                                                      for c in convs]) for k in range(1, len(convs[0])))
        self.biases = torch.nn.ParameterList(_stack([c[k].bias for c in convs]) for k in range(len(convs[0])))

    def chebyshev_sum(self, ys: list[Tensor], bias: Tensor) -> Tensor:
        r""":math:`\sum_k T_k(\tilde{L}) Y_k + b` from the K ``ys`` ``[N, S, O]`` (Clenshaw)."""
        later = nearer = torch.zeros_like(ys[0])  # b_{k+2}, b_{k+1}
        for k in range(self.K - 1, 0, -1):
            later, nearer = nearer, ys[k] + 2 * self.graph.propagate(nearer) - later
        return add_bias(ys[0] + self.graph.propagate(nearer) - later, bias)

    def forward(self) -> NetOutput:
        F_in, S, K, H = self.w_in.shape
        ys = self.features_times(self.w_in.view(F_in, S, K * H)).view(-1, S, K, H).unbind(2)
        h = self.chebyshev_sum(ys, self.biases[0])
        for w, b in zip(self.weights, self.biases[1:]):
            h = self.dropout(F.relu(h), self.p_drop)
            # one product per k, each reducing over the layer's input width only: one einsum
            # over k as well would reduce over (k, width) in the backward, whose blocking (so its
            # last bits) changes with the number of seeds beside a seed
            h = self.chebyshev_sum([_layer_products(h, w[:, k]) for k in range(K)], b)
        return self.output(h)


class SparseSAGE(SparseSeeds):
    r""":class:`pipeline.models.baselines.ConvStack` of PyG ``SAGEConv`` layers (GraphSAGE-mean,
    Hamilton et al. 2017, Alg. 1 with the root's own term as PyG writes it):
    :math:`\mathrm{mean}_{j \to i}(h_j) W_l + b + h_i W_r`, the mean one sparse product with
    :math:`D_{in}^{-1} A` (a node without neighbours gets 0, as PyG's mean), taken after the
    product with :math:`W_l` (the same function at the layer's output width)."""

    SEED_AXIS = {"w_in": 1, "w_root": 1}

    def __init__(self, models: list, x: Tensor, edge_index: Tensor, seeds: list[int]):
        super().__init__(x, seeds)
        convs = [m.convs for m in models]
        source, target = edge_index
        degree = torch.bincount(target, minlength=x.size(0)).float()
        self.graph = FixedGraph(edge_index, 1.0 / degree[target], x.size(0))
        self.p_drop = models[0].p_drop
        self.w_in = _stack([c[0].lin_l.weight.t() for c in convs], dim=1)
        self.w_root = _stack([c[0].lin_r.weight.t() for c in convs], dim=1)
        later = range(1, len(convs[0]))
        self.neighbours = torch.nn.ParameterList(_stack([c[k].lin_l.weight.t() for c in convs]) for k in later)
        self.roots = torch.nn.ParameterList(_stack([c[k].lin_r.weight.t() for c in convs]) for k in later)
        self.biases = torch.nn.ParameterList(_stack([c[k].lin_l.bias for c in convs]) for k in range(len(convs[0])))

    def forward(self) -> NetOutput:
        both = self.features_times(torch.cat([self.w_in, self.w_root], dim=2))  # [N, S, 2 H]
        neighbours, root = both.split(self.w_in.size(2), dim=2)
        h = add_bias(self.graph.propagate(neighbours), self.biases[0]) + root
        for w_l, w_r, b in zip(self.neighbours, self.roots, self.biases[1:]):
            h = self.dropout(F.relu(h), self.p_drop)
            h = add_bias(self.graph.propagate(_layer_products(h, w_l)), b) + _layer_products(h, w_r)
        return self.output(h)


class SparseJKNet(SparseConvStack):
    r""":class:`pipeline.models.baselines.JKNet`: ``layers`` GCN layers :math:`\hat{A} H W + b`
    (:class:`SparseConvStack`'s weights), each followed by ReLU and dropout, their outputs
    concatenated, then a linear classifier."""

    def __init__(self, models: list, x: Tensor, graph: FixedGraph, seeds: list[int]):
        super().__init__(models, x, graph, seeds)
        self.w_out = _stack([m.lin.weight.t() for m in models])
        self.b_out = _stack([m.lin.bias for m in models])

    def forward(self) -> NetOutput:
        h = self.dropout(F.relu(add_bias(self.graph.propagate(self.first_layer()), self.biases[0])), self.p_drop)
        outs = [h]
        for w, b in zip(self.weights, self.biases[1:]):
            h = self.dropout(F.relu(add_bias(self.graph.propagate(_layer_products(h, w)), b)), self.p_drop)
            outs.append(h)
        return self.output(add_bias(_layer_products(torch.cat(outs, dim=2), self.w_out), self.b_out))


class SparseGAT(SparseSeeds):
    r""":class:`pipeline.models.baselines.GAT` of PyG ``GATConv`` layers (Veličković et al. 2018,
    Eqs. 1-4): per head, :math:`\alpha_{ij} = \mathrm{softmax}_j \mathrm{LeakyReLU}(a_{dst}^\top W h_i
    + a_{src}^\top W h_j)` over i's incoming edges and its self-loop, attention dropout, then
    :math:`\sum_j \alpha_{ij} W h_j`; heads concatenated (the last layer: averaged), plus bias.

    The S seeds' H heads are S x H blocks of one block-diagonal sparse matrix
    (:class:`pipeline.models.adacad_batched.BlockDiagonalGraph`, as CAD-Net's transitions): the
    attention logits are gathers of the per-node scores at its entries, the softmax runs over its
    CSR rows (PyG's ``softmax`` with ``ptr``), and the aggregation is one sparse product with
    ``[N x S x H, C]``, whose gradient for the attention is a sampled product at the entries. PyG's
    message passing instead writes ``[E, S, H, C]`` messages per layer. Each seed's attention
    dropout is drawn from its own stream, per edge and head."""

    SEED_AXIS = {"w_in": 1}
    NEGATIVE_SLOPE = 0.2  # GATConv's default

    def __init__(self, models: list, x: Tensor, edge_index: Tensor, seeds: list[int]):
        super().__init__(x, seeds)
        convs = [m.convs for m in models]
        self.p_drop = models[0].p_drop
        self.shapes = [(c.heads, c.out_channels, c.concat) for c in convs[0]]  # (H, C, concat) per layer
        self.w_in = _stack([c[0].lin.weight.t() for c in convs], dim=1)
        layers = range(len(convs[0]))
        self.weights = torch.nn.ParameterList(_stack([c[k].lin.weight.t() for c in convs]) for k in layers[1:])
        self.att_src = torch.nn.ParameterList(_stack([c[k].att_src[0] for c in convs]) for k in layers)
        self.att_dst = torch.nn.ParameterList(_stack([c[k].att_dst[0] for c in convs]) for k in layers)
        self.biases = torch.nn.ParameterList(_stack([c[k].bias for c in convs]) for k in layers)
        num_nodes, S = x.size(0), len(seeds)
        self.edge_index = add_self_loops(remove_self_loops(edge_index)[0], num_nodes=num_nodes)[0]
        self.graphs = {H: BlockDiagonalGraph(self.edge_index, num_nodes, S * H, "push") for H, _, _ in self.shapes}
        # where each CSR entry's dropout draw lies in the seeds' draws [S, E, H] (seed s's stream
        # draws its [E, H] values): entry (edge e, block s H + h) of the edge order e S H + s H + h
        E = self.edge_index.size(1)
        self.draw_at = {}
        for H in self.graphs:
            edge, block = self.graphs[H].forward_layout.order.div(S * H, rounding_mode="floor"), \
                self.graphs[H].forward_layout.order.remainder(S * H)
            self.draw_at[H] = block.div(H, rounding_mode="floor") * (E * H) + edge * H + block.remainder(H)

    def to(self, device):
        super().to(device)
        for graph in self.graphs.values():
            graph.to(device)
        self.draw_at = {H: at.to(device) for H, at in self.draw_at.items()}
        return self

    def attend(self, k: int, xw: Tensor) -> Tensor:
        """Layer k's attention and aggregation of the projected ``xw`` ``[N, S, H x C]``."""
        H, C, concat = self.shapes[k]
        n, S = xw.shape[:2]
        xw = xw.view(n, S, H, C)
        graph, layout = self.graphs[H], self.graphs[H].forward_layout
        score_src = _SeedScores.apply(xw, self.att_src[k]).reshape(-1)  # [N S H]: i S H + s H + h
        score_dst = _SeedScores.apply(xw, self.att_dst[k]).reshape(-1)
        # CSR rows are the messages' targets i, columns their sources j (``push``)
        logits = F.leaky_relu(score_src[layout.col] + score_dst[layout.row], self.NEGATIVE_SLOPE)
        alpha = layout.softmax(logits)
        if self.training and self.p_drop > 0:
            draws = self.streams.uniform((self.edge_index.size(1), H), seed_dim=0)  # [S, E, H]
            alpha = alpha * (draws.view(-1)[self.draw_at[H]] >= self.p_drop) * (1.0 / (1.0 - self.p_drop))
        out = graph.diffuse(xw.reshape(n, S * H, C), alpha, 1).view(n, S, H, C)
        out = out.reshape(n, S, H * C) if concat else out.mean(2)
        return add_bias(out, self.biases[k])

    def forward(self) -> NetOutput:
        h = self.attend(0, self.first_layer(self.p_drop))
        for k, w in enumerate(self.weights, start=1):
            h = self.dropout(F.elu(h), self.p_drop)
            h = self.attend(k, _layer_products(h, w))
        return self.output(h)


class _SeedScale(torch.autograd.Function):
    """``x * b`` for ``x`` ``[N, S, D]`` and a per-seed scalar ``b`` ``[S]``, whose gradient for
    ``b`` sums along each seed's own contiguous row, as :class:`_SeedBias` does."""

    @staticmethod
    def forward(ctx, x: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(x, b)
        return x * b.view(1, -1, 1)

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, b = ctx.saved_tensors
        return grad * b.view(1, -1, 1), (grad * x).transpose(0, 1).reshape(b.numel(), -1).sum(-1)


class SparseAGNN(SparseSeeds):
    r""":class:`pipeline.models.baselines.AGNN` (Thekumparampil et al. 2018, Eqs. 5-6; PyG's
    ``AGNNConv``): dropout, Linear, ReLU, then propagation layers
    :math:`h_i' = \sum_j \alpha_{ij} h_j`, :math:`\alpha_{ij} = \mathrm{softmax}_j(\beta \cos(h_i, h_j))`
    over i's incoming edges and its self-loop (the first layer's :math:`\beta = 1` fixed, the
    others learned), dropout, Linear.

    The S seeds are the blocks of one block-diagonal sparse matrix, as GAT's heads
    (:class:`SparseGAT`): the cosines are one sampled product of the normalised rows at its
    entries, the softmax runs over its CSR rows and the propagation is one sparse product. PyG's
    ``AGNNConv`` does not run under ``vmap``, so its ``vmap`` implementation trains one seed at a
    time (:class:`pipeline.models.baselines.OneSeed`)."""

    SEED_AXIS = {"w_in": 1}

    def __init__(self, models: list, x: Tensor, edge_index: Tensor, seeds: list[int]):
        super().__init__(x, seeds)
        self.p_drop = models[0].p_drop
        self.w_in = _stack([m.lin1.weight.t() for m in models], dim=1)
        self.b_in = _stack([m.lin1.bias for m in models])
        props = [m.props for m in models]
        # propagation layer k's beta for every seed [S] as ``beta_k``: a parameter where the
        # layer learns it, a buffer where it is fixed (AGNNConv's requires_grad=False: the first)
        self.layers = len(props[0])
        for k, prop in enumerate(props[0]):
            betas = torch.stack([p[k].beta.detach()[0] for p in props])
            if prop.beta.requires_grad:
                setattr(self, f"beta_{k}", torch.nn.Parameter(betas))
            else:
                self.register_buffer(f"beta_{k}", betas)
        self.w_out = _stack([m.lin2.weight.t() for m in models])
        self.b_out = _stack([m.lin2.bias for m in models])
        num_nodes = x.size(0)
        edge_index = add_self_loops(remove_self_loops(edge_index)[0], num_nodes=num_nodes)[0]
        self.graph = BlockDiagonalGraph(edge_index, num_nodes, len(seeds), "push")

    def propagate(self, h: Tensor, beta: Tensor) -> Tensor:
        normalised = F.normalize(h, p=2.0, dim=-1)
        scores = self.graph.edge_products(_SeedScale.apply(normalised, beta), normalised)
        alpha = self.graph.forward_layout.softmax(scores)  # CSR rows: the messages' targets
        return self.graph.diffuse(h, alpha, 1)

    def forward(self) -> NetOutput:
        h = F.relu(add_bias(self.first_layer(self.p_drop), self.b_in))
        for k in range(self.layers):
            h = self.propagate(h, getattr(self, f"beta_{k}"))
        h = self.dropout(h, self.p_drop)
        return self.output(add_bias(_layer_products(h, self.w_out), self.b_out))


def build_sparse(name: str, models: list, x: Tensor, edge_index: Tensor, edge_weight: Tensor | None,
                 seeds: list[int]) -> StackedSeeds:
    """The sparse batched network of baseline ``name`` from its seeds' one-seed ``models``:
    ``edge_index`` without self-loops (GCN's normalisation adds them), or GDC's rewired graph
    with its weights."""
    num_nodes = x.size(0)
    if name == "gdc":
        return SparseConvStack(models, x, FixedGraph(edge_index, edge_weight, num_nodes), seeds)
    on_edges = {"cheb": SparseChebStack, "sage": SparseSAGE, "gat": SparseGAT, "agnn": SparseAGNN}
    if name in on_edges:
        return on_edges[name](models, x, edge_index, seeds)
    graph = FixedGraph.gcn_normalised(edge_index, num_nodes)
    network = {"gcn": SparseConvStack, "appnp": SparseAPPNP, "sgc": SparseSGC, "jknet": SparseJKNet}[name]
    return network(models, x, graph, seeds)
