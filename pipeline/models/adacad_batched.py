r"""Batched engine: S seeds of CAD-Net as one model (its training loop is
:func:`pipeline.engine.loop.train_chunk`).

Why: one seed of CAD-Net is a few small sparse products and scatters per epoch, so run one
at a time much of the time goes to per-operation overhead. Here the S seeds' parameters are
stacked (``W1: F x S x H``, ``W2: S x H x C``), every operation runs once for all of them,
the first layer is one ``embedding_bag`` (:class:`StackedSparseFeatures`), and the per-edge
work runs on one block-diagonal sparse matrix over all seeds (:class:`BlockDiagonalGraph`).

What stays per seed, exactly as in the single-seed path (:func:`pipeline.engine.loop.train_seed`,
the readable reference):
- initial weights: seed s starts from the weights ``CADNet`` gets after
  ``torch.manual_seed(s)``;
- the loss: the sum over seeds of each seed's loss, so seed s's gradient is its own;
- Adam(amsgrad) and weight decay act element-wise, so one optimiser over the stacked tensors
  updates each seed as its own optimiser would; the lr schedule depends on the epoch only;
- dropout masks (independent per seed; sparse features keep their sparsity: dropout acts on
  stored values), splits (a new per-class split per seed where the table says so),
  best-validation-loss model selection and early stopping: a stopped seed is frozen (its
  parameters restored after each optimiser step) while the others go on.

Each seed draws its dropout masks from its own random stream (:class:`pipeline.models.seeds.SeedStreams`),
so a seed's result does not depend on which seeds share its chunk, nor on the chunk size: a run
of 10 seeds repeats seeds 0-9 of a run of 100, and a resumed run repeats an uninterrupted one.
"""
from __future__ import annotations

import warnings

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.utils import segment

from pipeline.models.adacad import AdaCAD, CADNet, adaptive_weight, transition_from_similarity
from pipeline.models.methods import REPLICA_SETTINGS
from pipeline.models.seeds import NetOutput, PerReplica, SeedStreams, StackedSeeds, dropout

# CSR products are what this module is built on; torch's "beta" notice would repeat every run.
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")


class StackedSparseFeatures:
    """The sparse feature matrix X laid out so one ``embedding_bag`` call computes
    ``X_s @ W1_s`` for every seed s at once, each seed with its own dropout mask.

    Bag (n, s) -- row ``n * S + s`` of the result -- sums rows ``k * S + s`` of ``W1`` viewed
    as ``[F * S, H]`` over the stored entries (n, k) of X, weighted by ``x_nk`` (times the
    seed's dropout mask). The same slots sorted by ``W1`` row give the transposed layout
    that the backward pass needs (see :class:`_StackedSparseProduct`).
    """

    def __init__(self, x: Tensor, num_seeds: int):
        x = x.coalesce()
        rows, cols = x.indices()
        n, S = x.size(0), num_seeds
        per_row = torch.bincount(rows, minlength=n)
        bag_sizes = per_row.repeat_interleave(S)  # bags ordered (n, s)
        self.offsets = torch.cumsum(bag_sizes, 0) - bag_sizes
        entry_of = _row_entries(per_row, S)  # for each slot: which stored entry of X
        seed_of = torch.arange(S, device=x.device).repeat(n).repeat_interleave(bag_sizes)
        self.index = cols[entry_of] * S + seed_of
        self.values = x.values()[entry_of]
        # where each slot's dropout draw lies in an [S, nnz] draw (one row per seed's stream)
        self.draw_index = seed_of * rows.numel() + entry_of
        self.nnz = rows.numel()
        # transposed layout: bags are rows of W1, each listing the output rows it feeds
        self.t_order = torch.argsort(self.index, stable=True)
        self.t_index = torch.arange(n * S, device=x.device).repeat_interleave(bag_sizes)[self.t_order]
        t_sizes = torch.bincount(self.index, minlength=x.size(1) * S)
        self.t_offsets = torch.cumsum(t_sizes, 0) - t_sizes
        self.num_rows = n
        self.num_seeds = S

    def to(self, device) -> "StackedSparseFeatures":
        for name in ("offsets", "index", "values", "draw_index", "t_order", "t_index", "t_offsets"):
            setattr(self, name, getattr(self, name).to(device))
        return self

    def matmul(self, weight: Tensor, p_drop: float | PerReplica = 0.0, streams: SeedStreams | None = None) -> Tensor:
        """``[N, S, H]``: for each seed, dropout(X) @ W1[:, s, :] (``weight`` is ``[F, S, H]``);
        dropout acts on X's stored values, seed s's mask drawn from ``streams``' stream s (at
        seed s's own rate where ``p_drop`` is one per replica)."""
        values = self.values
        if isinstance(p_drop, PerReplica):
            draws = streams.uniform((self.nnz,), seed_dim=0)  # [S, nnz]
            keep = (draws >= p_drop.along(0, 2)).view(-1)[self.draw_index]
            scale = p_drop.derived_along(0, 2).expand_as(draws).reshape(-1)[self.draw_index]
            values = values * keep * scale
        elif p_drop > 0:
            keep = streams.uniform((self.nnz,), seed_dim=0).view(-1)[self.draw_index] >= p_drop
            values = values * keep * (1.0 / (1.0 - p_drop))
        table = weight.reshape(-1, weight.size(-1))
        out = _StackedSparseProduct.apply(table, self, values)
        return out.view(self.num_rows, self.num_seeds, -1)


class _StackedSparseProduct(torch.autograd.Function):
    """``embedding_bag`` forward, and for the weight gradient a second ``embedding_bag`` over
    the transposed layout. Written by hand because autograd's own backward of
    ``embedding_bag`` sorts all S * nnz indices every step, though they never change."""

    @staticmethod
    def forward(ctx, table: Tensor, layout: StackedSparseFeatures, values: Tensor) -> Tensor:
        ctx.layout = layout
        ctx.save_for_backward(values)
        return F.embedding_bag(layout.index, table, layout.offsets, mode="sum", per_sample_weights=values)

    @staticmethod
    def backward(ctx, grad_out: Tensor):
        (values,) = ctx.saved_tensors
        layout = ctx.layout
        grad_table = F.embedding_bag(layout.t_index, grad_out.contiguous(), layout.t_offsets, mode="sum",
                                     per_sample_weights=values[layout.t_order])
        return grad_table, None, None


def _row_entries(per_row: Tensor, S: int) -> Tensor:
    """For bags ordered (n, s), the stored-entry number of each slot: row n's entries
    ``start_n .. start_n + count_n - 1``, repeated S times."""
    starts = torch.cumsum(per_row, 0) - per_row
    bag_sizes = per_row.repeat_interleave(S)
    bag_starts = starts.repeat_interleave(S)
    slot_bag_start = torch.cumsum(bag_sizes, 0) - bag_sizes
    position = torch.arange(int(bag_sizes.sum()), device=per_row.device)
    position = position - slot_bag_start.repeat_interleave(bag_sizes)
    return bag_starts.repeat_interleave(bag_sizes) + position


class _CSRLayout:
    """A fixed sparsity pattern as CSR, and where each (edge, seed) value goes in it."""

    def __init__(self, rows: Tensor, cols: Tensor, size: int):
        self.order = torch.argsort(rows * size + cols)
        self.row = rows[self.order]
        self.crow = torch._convert_indices_from_coo_to_csr(self.row, size)
        self.col = cols[self.order]
        self.size = size

    def matrix(self, values_in_order: Tensor) -> Tensor:
        return torch.sparse_csr_tensor(self.crow, self.col, values_in_order, (self.size, self.size),
                                       check_invariants=False)

    def softmax(self, src: Tensor) -> Tensor:
        """PyG's ``softmax(src, ptr=crow)`` over each row's entries (``src`` in CSR order), with
        each row's max and sum spread back to its entries by their stored row index, where PyG's
        ``repeat_interleave`` of the row counts rebuilds that index at every call (40% of its
        forward pass over PubMed's 8 attention heads). The same operations on the same values:
        equal bit for bit, gradients included."""
        row_max = segment(src.detach(), self.crow, reduce="max").index_select(0, self.row)
        out = (src - row_max).exp()
        return out / (segment(out, self.crow, reduce="sum") + 1e-16).index_select(0, self.row)

    def to(self, device) -> "_CSRLayout":
        for name in ("order", "row", "crow", "col"):
            setattr(self, name, getattr(self, name).to(device))
        return self


class BlockDiagonalGraph:
    r"""The graph of S seeds as one block-diagonal ``NS x NS`` sparse matrix, so that the
    per-edge work of CAD-Net runs as sparse-matrix products for all seeds at once.

    Node i of seed s is row ``i * S + s`` (``[N, S, C]`` tensors viewed as ``[NS, C]``); edge
    e of seed s sits at (row ``target_e * S + s``, column ``source_e * S + s``), where messages
    flow source -> target as in :class:`pipeline.models.adacad.ClassAttentiveDiffusion` (``push``:
    row -> col, the authors' code; ``pull``: col -> row, the paper's Eq. 6). Per-edge values
    (similarities, transitions) are kept in this matrix's CSR order.

    Written by hand (each product with its backward) because neither PyG nor torch offers a
    batched sparse product whose values differ per batch element; PyG's message passing
    would write and read ``[E, S, C]`` tensors, which dominated a 100-seed epoch.
    """

    def __init__(self, edge_index: Tensor, num_nodes: int, num_seeds: int, direction: str):
        row, col = edge_index
        source, target = (row, col) if direction == "push" else (col, row)
        seeds = torch.arange(num_seeds, device=edge_index.device)
        out_rows = (target.view(-1, 1) * num_seeds + seeds).reshape(-1)
        in_cols = (source.view(-1, 1) * num_seeds + seeds).reshape(-1)
        self.forward_layout = _CSRLayout(out_rows, in_cols, num_nodes * num_seeds)
        self.backward_layout = _CSRLayout(in_cols, out_rows, num_nodes * num_seeds)
        # where each value of the transposed matrix comes from in the forward CSR order
        position = torch.empty_like(self.forward_layout.order)
        position[self.forward_layout.order] = torch.arange(position.numel(), device=position.device)
        self.transposed_from = position[self.backward_layout.order]
        # the (node, seed) each entry's edge starts from (edge_index[0] = i: the group of Eqs. 4
        # and 8) and where it ends (edge_index[1] = j)
        self.push = direction == "push"
        self.row_group = self.forward_layout.col if self.push else self.forward_layout.row
        self.col_group = self.forward_layout.row if self.push else self.forward_layout.col
        self.num_nodes, self.num_seeds = num_nodes, num_seeds
        self.num_rows = num_nodes * num_seeds

    def to(self, device) -> "BlockDiagonalGraph":
        self.forward_layout.to(device)
        self.backward_layout.to(device)
        self.transposed_from = self.transposed_from.to(device)
        self.row_group = self.row_group.to(device)
        self.col_group = self.col_group.to(device)
        return self

    def in_csr_order(self, per_edge: Tensor) -> Tensor:
        """``[E, S]`` values in edge order -> the flat CSR order used here."""
        return per_edge.reshape(-1)[self.forward_layout.order]

    # -- the graph interface of pipeline.models.adacad.AdaCAD (as pipeline.models.adacad.EdgeListGraph)

    def edge_products(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\mathbf{a}_i^\top \mathbf{b}_j` for every edge i -> j and seed (CSR order), as
        one sampled product at the graph's entries (CSR rows are targets of the messages)."""
        n, S, _ = a.shape
        a, b = a.reshape(n * S, -1), b.reshape(n * S, -1)
        return _SampledProduct.apply(b, a, self) if self.push else _SampledProduct.apply(a, b, self)

    def pair_similarity(self, probs: Tensor) -> Tensor:
        r""":math:`\mathbf{p}_i^\top \mathbf{p}_j` for every edge and seed (CSR order)."""
        return self.edge_products(probs, probs)

    def at_source(self, x: Tensor) -> Tensor:
        """``[N, S]`` node values at each entry's i (edge_index[0])."""
        return x.reshape(-1)[self.row_group]

    def at_target(self, x: Tensor) -> Tensor:
        return x.reshape(-1)[self.col_group]

    def out_softmax(self, scores: Tensor) -> Tensor:
        return transition_from_similarity(scores, self.row_group, self.num_rows)  # Eq. (4)

    def adaptive_weight(self, similarity: Tensor, beta: float) -> Tensor:
        gamma = adaptive_weight(similarity, self.row_group, self.num_rows, beta)  # Eqs. (8, 9)
        return gamma.view(self.num_nodes, self.num_seeds)

    def diffuse(self, z: Tensor, transition: Tensor, K: int) -> Tensor:
        """K steps ``z <- T z`` (block-diagonal T, values in CSR order) on ``[N, S, C]``."""
        n, S, C = z.shape
        matrix = self.forward_layout.matrix(transition.detach())
        transposed = self.backward_layout.matrix(transition.detach()[self.transposed_from])
        return _BlockDiagonalSteps.apply(z.reshape(n * S, C), transition, matrix, transposed, K).view(n, S, C)


class _SampledProduct(torch.autograd.Function):
    """values = (L R^T) sampled at the CSR entries (row r, col c): L_r . R_c.
    grad L = A_g R and grad R = A_g^T L, with A_g holding the values' gradient."""

    @staticmethod
    def forward(ctx, left: Tensor, right: Tensor, graph: BlockDiagonalGraph) -> Tensor:
        ctx.save_for_backward(left, right)
        ctx.graph = graph
        pattern = graph.forward_layout.matrix(torch.zeros(graph.forward_layout.col.numel(), dtype=left.dtype,
                                                          device=left.device))
        return torch.sparse.sampled_addmm(pattern, left, right.t(), beta=0.0).values()

    @staticmethod
    def backward(ctx, grad: Tensor):
        left, right = ctx.saved_tensors
        graph = ctx.graph
        grad = grad.contiguous()
        grad_left = torch.sparse.mm(graph.forward_layout.matrix(grad), right)
        grad_right = torch.sparse.mm(graph.backward_layout.matrix(grad[graph.transposed_from]), left)
        return grad_left, grad_right, None


class _BlockDiagonalSteps(torch.autograd.Function):
    """K steps z <- A z. Backward: z's gradient through A^T, K times; the values' gradient is
    sum_k <g_k[target], z_k[source]> (g_k: gradient of step k's output, z_k: its input), done
    as one sampled product over the K steps side by side, one pass over the pattern."""

    @staticmethod
    def forward(ctx, z: Tensor, values: Tensor, matrix: Tensor, transposed: Tensor, K: int) -> Tensor:
        inputs = []
        for _ in range(K):
            inputs.append(z)
            z = torch.sparse.mm(matrix, z)
        ctx.save_for_backward(*inputs)
        ctx.matrix, ctx.transposed = matrix, transposed
        return z

    @staticmethod
    def backward(ctx, grad: Tensor):
        inputs = ctx.saved_tensors
        grads = []
        for _ in inputs:  # steps K-1 .. 0
            grad = grad.contiguous()
            grads.append(grad)
            grad = torch.sparse.mm(ctx.transposed, grad)
        grad_values = None
        if ctx.needs_input_grad[1]:
            # one step (GAT's and AGNN's aggregations): the tensors themselves, not a copy of them
            side_by_side = grads[0] if len(grads) == 1 else torch.cat(grads[::-1], dim=1)
            stepped = inputs[0] if len(inputs) == 1 else torch.cat(inputs, dim=1)
            sampled = torch.sparse.sampled_addmm(ctx.matrix, side_by_side, stepped.t(), beta=0.0)
            grad_values = sampled.values()
        return grad, grad_values, None, None, None


class BatchedCADNet(StackedSeeds):
    """S copies of :class:`pipeline.models.adacad.CADNet` with stacked parameters.

    Built from S single-seed models, so each seed starts from the single-seed path's weights;
    the aggregation is the same :class:`pipeline.models.adacad.AdaCAD` operator, run on a
    :class:`BlockDiagonalGraph` with the seeds' learned parameters stacked. The forward pass
    returns :class:`NetOutput` with shapes ``[N, S, C]``, ``[S]``, ``[N, S]``.

    ``per_replica`` gives, for the settings of :data:`REPLICA_SETTINGS` that differ between the
    batch's replicas (a beta study's cells trained side by side), each replica's value; the
    others are the config's. A replica computes what its cell would alone.
    """

    # the seed axis of each parameter, where it is not the first (for freezing stopped seeds)
    SEED_AXIS = {"w1": 1}

    def __init__(self, models: list[CADNet], x: Tensor, edge_index: Tensor, seeds: list[int],
                 per_replica: dict[str, list[float]] | None = None):
        super().__init__()
        self.streams = SeedStreams(seeds)
        self.cfg = cfg = models[0].cfg
        per_replica = per_replica or {}
        if set(per_replica) - set(REPLICA_SETTINGS):
            raise ValueError(f"settings {sorted(set(per_replica) - set(REPLICA_SETTINGS))} cannot differ within a batch")
        self.p_drop = (PerReplica(per_replica["p_drop"], lambda p: 1.0 / (1.0 - p)) if "p_drop" in per_replica
                       else cfg.p_drop)
        self.lambda_ent = PerReplica(per_replica["lambda_ent"]).value if "lambda_ent" in per_replica else cfg.lambda_ent
        self.w1 = torch.nn.Parameter(torch.stack([m.embed1.weight.detach().t() for m in models], dim=1))
        self.b1 = torch.nn.Parameter(torch.stack([m.embed1.bias.detach() for m in models]))
        self.w2 = torch.nn.Parameter(torch.stack([m.embed2.weight.detach().t() for m in models]))
        self.b2 = torch.nn.Parameter(torch.stack([m.embed2.bias.detach() for m in models]))
        self.aggregate = AdaCAD(cfg.aggregation, cfg.num_classes, len(models), fixed=models[0].aggregate.fixed)
        if "beta" in per_replica:
            self.aggregate.beta = PerReplica(per_replica["beta"], lambda beta: 1.0 - beta)
        with torch.no_grad():  # each seed's own attention parameters (gat, tf), stacked
            for name, stacked in self.aggregate.named_parameters():
                stacked.copy_(torch.cat([dict(m.aggregate.named_parameters())[name] for m in models]))
        self.graph = None  # not needed (nor its memory, edges x seeds) by graph-only aggregations
        if self.aggregate.needs_edge_values:
            self.graph = BlockDiagonalGraph(edge_index, x.size(0), len(models), cfg.aggregation.direction)
        self.features = StackedSparseFeatures(x, len(models))
        self.x = x.coalesce()

    def to(self, device):  # the feature layout and the graph are plain tensors, not buffers
        super().to(device)
        self.streams.to(device)
        self.features.to(device)
        for holder, name in ((self, "p_drop"), (self, "lambda_ent"), (self.aggregate, "beta")):
            if isinstance(getattr(holder, name), (PerReplica, Tensor)):
                setattr(holder, name, getattr(holder, name).to(device))
        if self.graph is not None:
            self.graph.to(device)
        self.x = self.x.to(device)
        return self

    def _dropout(self, x: Tensor, site: str) -> Tensor:
        if self.training and site in self.cfg.dropout_sites:
            return dropout(x, self.p_drop, self.streams)
        return x

    def _first_layer(self) -> Tensor:
        if self.training and "input" in self.cfg.dropout_sites and (isinstance(self.p_drop, PerReplica) or self.p_drop > 0):
            return self.features.matmul(self.w1, self.p_drop, self.streams)
        # no input dropout: all seeds share X, so one product with the seeds side by side
        F_in, S, H = self.w1.shape
        return torch.sparse.mm(self.x, self.w1.reshape(F_in, S * H)).view(-1, S, H)

    def forward(self) -> NetOutput:
        """The single-seed forward pass (:class:`pipeline.models.adacad.CADNet`) for every seed."""
        hidden = F.leaky_relu(self._first_layer() + self.b1, self.cfg.leak_slope)
        hidden = self._dropout(hidden, "hidden")
        logits = torch.einsum("nsh,shc->nsc", hidden, self.w2) + self.b2
        self_term = self._dropout(logits, "logits")
        z, node_entropy, gamma = self.aggregate(logits, self_term, self.graph)
        return NetOutput(F.log_softmax(z, dim=-1), self.lambda_ent * node_entropy.mean(0), gamma)
