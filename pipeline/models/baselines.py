"""The baselines of Table 2, each built from PyG's own layers and trained by the same loop as
CAD-Net (:func:`pipeline.engine.loop.train_chunk`: same seeds, same splits, same protocol).

Each baseline is a small network ``forward(x, edge_index, edge_weight) -> logits [N, C]``
written after the public code named in ``params.yaml`` (``method_hparams.<baseline>``, where
every value cites its source). The paper gives no baseline settings ("publicly released codes
were employed"); docs/SPEC.md lists the standard ones.

Seeds run side by side with ``torch.func``: the S networks' parameters are stacked
(``stack_module_state``) and one ``vmap`` runs them over the shared inputs, with
``randomness="different"`` so each seed draws its own dropout masks. Those masks come from
the chunk's one random stream, so a baseline seed's result depends on its chunk (the registry
entry says ``chunk_independent=False`` and the chunk size is part of what the seed records).
A network ``vmap`` cannot run (Graph U-Net's top-k pooling selects a different number of
nodes per seed) trains seed by seed.

Inputs as the public code feeds them: the dense feature matrix, the graph without the
self-loops CAD-Net's table adds (each layer adds its own, as in PyG), and for GDC the graph
rewired by PyG's ``transforms.GDC``.
"""
from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from scipy.sparse import csr_matrix
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap
from torch_geometric.data import Data
from torch_geometric.nn import (APPNP, AGNNConv, ChebConv, GATConv, GCNConv, GraphUNet, JumpingKnowledge,
                                SAGEConv, SGConv)
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.pool.connect import Connect, ConnectOutput
from torch_geometric.transforms import GDC
from torch_geometric.utils import add_self_loops, dropout_edge, remove_self_loops, scatter, to_torch_csr_tensor

from pipeline.errors import ConfigError
from pipeline.models import methods
from pipeline.models.adacad import sparse_dropout
from pipeline.models.methods import (AGNNSettings, APPNPSettings, ChebSettings, GATSettings, GCNSettings,
                                     GDCSettings, JKSettings, MixHopSettings, SAGESettings, SGCSettings, UNetSettings,
                                     independent_of_chunk)
from pipeline.models.registry import REGISTRY, from_settings
from pipeline.models.seeds import NetOutput, StackedSeeds
from pipeline.models.sparse_baselines import build_sparse

# MixHop's sparse products (CSR) say so once per process: known
warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")

# ---------------------------------------------------------------------------- registration

NETWORKS: dict[str, type] = {}  # baseline name -> its one-seed network (in_features, classes, settings, nodes)


def network(name: str):
    """Decorator: the one-seed network of the baseline ``name`` whose entry
    :mod:`pipeline.models.methods` declares, ``(in_features, classes, settings, num_nodes) -> module``."""
    def add(build):
        NETWORKS[name] = build
        return build
    return add


def baseline(name: str, label: str, settings: type, batched: bool = True, range_key: str = ""):
    """Decorator: a baseline added in a file of its own, network and entry in one (the README's
    MLP): registers ``name`` as :func:`pipeline.models.methods.baseline` does, with the
    decorated network."""
    def add(build):
        methods.baseline(name, label, settings, batched, range_key)
        return network(name)(build)
    return add


def make_network(name: str, in_features: int, classes: int, hp: dict, num_nodes: int) -> torch.nn.Module:
    """One seed's network of baseline ``name`` (the registry entry's ``fixed["baseline"]``)."""
    return NETWORKS[name](in_features, classes, from_settings(REGISTRY[name].settings, hp), num_nodes)


class OneSeed(torch.nn.Module):
    """One baseline network bound to its inputs, answering the loop as CAD-Net's network does."""

    def __init__(self, model: torch.nn.Module, inputs: tuple):
        super().__init__()
        self.model, self.inputs = model, inputs

    def to(self, device):
        super().to(device)
        self.inputs = tuple(None if t is None else t.to(device) for t in self.inputs)
        return self

    def forward(self) -> NetOutput:
        log_probs = F.log_softmax(self.model(*self.inputs), dim=-1).unsqueeze(1)
        return _output(log_probs, _penalty(self.model, dict(self.model.named_parameters())).view(1))


class SeedsSideBySide(StackedSeeds):
    """S copies of one baseline network: parameters stacked along a first seed axis (every
    one: ``SEED_AXIS`` stays empty), run by one ``vmap`` over the shared inputs (each seed its
    own dropout masks)."""

    def __init__(self, models: list[torch.nn.Module], inputs: tuple):
        super().__init__()
        params, buffers = stack_module_state(models)
        self.names = list(params)
        self.stacked = torch.nn.ParameterList(torch.nn.Parameter(params[n].detach().clone()) for n in self.names)
        self.buffers_by_name = buffers
        # a parameter-free template to call functionally; kept out of the module tree so that
        # its (meta) parameters are not the optimiser's
        self._template = [copy.deepcopy(models[0]).to("meta")]
        self.inputs = inputs

    def to(self, device):
        super().to(device)
        self.inputs = tuple(None if t is None else t.to(device) for t in self.inputs)
        self.buffers_by_name = {k: v.to(device) for k, v in self.buffers_by_name.items()}
        return self

    def forward(self) -> NetOutput:
        template = self._template[0].train(self.training)

        def one_seed(params):
            logits = functional_call(template, (params, self.buffers_by_name), self.inputs)
            return F.log_softmax(logits, dim=-1), _penalty(template, params)

        log_probs, penalties = vmap(one_seed, randomness="different")(dict(zip(self.names, self.stacked)))
        return _output(log_probs.transpose(0, 1), penalties)  # [S, N, C] -> [N, S, C]


def _penalty(model: torch.nn.Module, params: dict[str, Tensor]) -> Tensor:
    """A baseline's own loss terms (MixHop's kernel regulariser), else 0."""
    return model.penalty(params) if hasattr(model, "penalty") else next(iter(params.values())).new_zeros(())


def _output(log_probs: Tensor, penalties: Tensor) -> NetOutput:
    """A baseline's prediction and loss terms [S]; no adaptive weight (gamma reported as 1)."""
    num_nodes, S = log_probs.shape[:2]
    return NetOutput(log_probs, penalties, log_probs.new_ones(num_nodes, S))


def baseline_inputs(graph: dict, name: str, hp: dict) -> tuple:
    """Dense features, the graph without added self-loops, and (GDC) the rewired graph's
    weights; MixHop: the features' nonzero entries and the symmetric-normalised graph with
    self-loops, as its authors' reader builds them, and its transpose (for the gradient); Graph
    U-Net's sparse implementation: the features sparse."""
    edge_index, _ = remove_self_loops(graph["edge_index"])
    if name == "graph_unet" and hp.get("implementation") == "sparse":
        return graph["x"].coalesce(), edge_index, None
    x = graph["x"].to_dense()
    if name == "mixhop":  # which words occur (its authors' reader), the normalised graph with self-loops
        index, weight = gcn_norm(edge_index, num_nodes=x.size(0), add_self_loops=True)
        adjacency, transposed = (int32_csr(torch.sparse_coo_tensor(i, weight, (x.size(0),) * 2, check_invariants=True)
                                           .coalesce().to_sparse_csr()) for i in (index, index.flip(0)))
        return SparsePattern(x.nonzero().t(), tuple(x.shape)), adjacency, transposed
    if name != "gdc":
        return x, edge_index, None
    cache = graph.setdefault("_cache", {})
    key = ("gdc", hp["ppr_alpha"], hp["diffusion_topk"])
    if key not in cache:  # PyG's GDC with the GDC authors' settings (params.yaml cites them)
        gdc = GDC(self_loop_weight=1, normalization_in="sym", normalization_out="col",
                  diffusion_kwargs=dict(method="ppr", alpha=hp["ppr_alpha"]),
                  sparsification_kwargs=dict(method="topk", k=hp["diffusion_topk"], dim=0), exact=True)
        rewired = gdc(Data(edge_index=edge_index, num_nodes=x.size(0)))
        cache[key] = (rewired.edge_index, rewired.edge_attr)
    return (x, *cache[key])


def build_baseline(graph: dict, hp: dict, seeds: list[int], batched: bool) -> torch.nn.Module:
    """Registry builder of every baseline: seed s starts from the weights its network gets
    after ``torch.manual_seed(s)``; batched, the seeds' networks are stacked."""
    name = hp["baseline"]
    inputs = baseline_inputs(graph, name, hp)
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(make_network(name, graph["x"].size(1), graph["num_classes"], hp, graph["y"].size(0)))
    if batched and independent_of_chunk(hp):
        return build_sparse(name, models, graph["x"], *inputs[1:], seeds)
    if batched:
        return SeedsSideBySide(models, inputs)
    if len(models) != 1:
        raise ValueError("a baseline's reference network trains one seed at a time")
    return OneSeed(models[0], inputs)


# ---------------------------------------------------------------------------- the networks, in Table 2's order

class ConvStack(torch.nn.Module):
    """conv -> ReLU -> dropout -> ... -> conv: GCN, ChebNet and GraphSAGE as in PyG's
    benchmark/citation scripts (gcn.py, cheb.py; SAGE as Shchur et al. run it), two layers
    there. The ranges study (Tables B.12-B.14) gives GCN and SAGE r layers: the extra ones are
    hidden layers of the same width before the last, each with its activation and dropout."""

    def __init__(self, convs: list[torch.nn.Module], p_drop: float):
        super().__init__()
        self.convs, self.p_drop = torch.nn.ModuleList(convs), p_drop

    def forward(self, x, edge_index, edge_weight=None):
        for conv in self.convs[:-1]:
            x = F.relu(self._conv(conv, x, edge_index, edge_weight))
            x = F.dropout(x, self.p_drop, self.training)
        return self._conv(self.convs[-1], x, edge_index, edge_weight)

    @staticmethod
    def _conv(conv, x, edge_index, edge_weight):
        return conv(x, edge_index) if edge_weight is None else conv(x, edge_index, edge_weight)


def layer_widths(in_features: int, classes: int, hidden: int, layers: int) -> list[tuple[int, int]]:
    """(in, out) of each of ``layers`` graph layers: in_features -> hidden -> ... -> classes."""
    sizes = [in_features] + [hidden] * (layers - 1) + [classes]
    return list(zip(sizes[:-1], sizes[1:]))


@network("cheb")
def cheb(in_features: int, classes: int, cfg: ChebSettings, num_nodes: int) -> ConvStack:
    return ConvStack([ChebConv(a, b, cfg.K) for a, b in layer_widths(in_features, classes, cfg.hidden, 2)], cfg.p_drop)


@network("gcn")
def gcn(in_features: int, classes: int, cfg: GCNSettings, num_nodes: int) -> ConvStack:
    return ConvStack([GCNConv(a, b) for a, b in layer_widths(in_features, classes, cfg.hidden, cfg.layers)], cfg.p_drop)


@network("sage")
def sage(in_features: int, classes: int, cfg: SAGESettings, num_nodes: int) -> ConvStack:
    return ConvStack([SAGEConv(a, b) for a, b in layer_widths(in_features, classes, cfg.hidden, cfg.layers)], cfg.p_drop)


@network("jknet")
class JKNet(torch.nn.Module):
    """JK-Net (Xu et al. 2018): ``layers`` GCN layers, their outputs concatenated
    (JumpingKnowledge "cat"), then a linear classifier."""

    def __init__(self, in_features: int, classes: int, cfg: JKSettings, num_nodes: int):
        super().__init__()
        sizes = [in_features] + [cfg.hidden] * cfg.layers
        self.convs = torch.nn.ModuleList(GCNConv(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.jump = JumpingKnowledge("cat")
        self.lin = torch.nn.Linear(cfg.hidden * cfg.layers, classes)
        self.p_drop = cfg.p_drop

    def forward(self, x, edge_index, edge_weight=None):
        outs = []
        for conv in self.convs:
            x = F.dropout(F.relu(conv(x, edge_index)), self.p_drop, self.training)
            outs.append(x)
        return self.lin(self.jump(outs))


class SharedSparseProduct(torch.autograd.Function):
    r"""``A @ H`` for a fixed sparse ``A`` (no gradient) and a dense ``H``, with a ``vmap`` rule:
    the seeds' ``H`` go side by side as columns, :math:`A [H_1 \Vert \dots \Vert H_S]`, one
    product for all seeds. torch 2.13 has no batching rule for ``aten::_sparse_mm``, so under
    ``vmap`` it ran one product per seed with its sort and copies (a per-seed loop: batched
    MixHop was no faster than one seed at a time, reports/bench_mixhop.md). The gradient is
    :math:`A^\top G`, with ``A``'s transpose built once per graph (``transposed``)."""

    @staticmethod
    def forward(adjacency: Tensor, transposed: Tensor, h: Tensor) -> Tensor:
        return torch.sparse.mm(adjacency, h)

    @staticmethod
    def setup_context(ctx, inputs, output):
        ctx.transposed = inputs[1]

    @staticmethod
    def backward(ctx, grad: Tensor):
        return None, None, torch.sparse.mm(ctx.transposed, grad)

    @staticmethod
    def vmap(info, in_dims, adjacency, transposed, h):
        if in_dims[0] is not None or in_dims[1] is not None:
            raise ValueError("SharedSparseProduct: the sparse matrix must be the same for every seed")
        h = h.movedim(in_dims[2], 1)  # [N, S, F]
        product = SharedSparseProduct.apply(adjacency, transposed, h.reshape(h.size(0), -1))
        return product.view(-1, *h.shape[1:]), 1


class SparsePattern:
    """Where a sparse ``[N, F]`` matrix has its entries (``rows``, ``cols``, row-major), laid
    out once as CSR, and as CSR of its transpose (``to_transposed``: the entries' order there),
    so that products with per-seed values need no sort (:class:`SparseRowsTimesWeight`)."""

    def __init__(self, entries: Tensor, shape: tuple[int, int]):
        self.rows, self.cols = entries
        self.shape = shape
        self.to_transposed = torch.argsort(self.cols * shape[0] + self.rows, stable=True)
        self._layouts = {}  # (S, transposed) -> the block-diagonal CSR's indices, which the values never change

    def to(self, device) -> "SparsePattern":
        self.rows, self.cols, self.to_transposed = (t.to(device) for t in (self.rows, self.cols, self.to_transposed))
        self._layouts = {}
        return self

    @property
    def density(self) -> float:
        return self.rows.numel() / (self.shape[0] * self.shape[1])

    def dense(self, values: Tensor) -> Tensor:
        return values.new_zeros(self.shape).index_put((self.rows, self.cols), values)

    def block_diagonal(self, values: Tensor, transposed: bool = False) -> Tensor:
        """The S matrices of ``values`` ``[S, nnz]`` (or their transposes) as one block-diagonal
        CSR matrix, seed s in block s."""
        if transposed:
            values = values[:, self.to_transposed]
        crow, col, size = self._layout(values.size(0), transposed)
        return torch.sparse_csr_tensor(crow, col, values.reshape(-1), size, check_invariants=False)

    def _layout(self, S: int, transposed: bool) -> tuple[Tensor, Tensor, tuple[int, int]]:
        """The block-diagonal CSR's row pointers, columns and size, built once per chunk size:
        PubMed's at S = 25 are 24.7M entries, which every forward and backward reused. int32
        where they fit: the same products, bit for bit; PubMed's input product at S = 25 took
        0.45 s against 0.74 with int64 here, its whole epoch 1-16% less (Cora's: no change)."""
        if (S, transposed) not in self._layouts:
            rows, cols, (N, F) = self.rows, self.cols, self.shape
            if transposed:
                rows, cols, (N, F) = cols[self.to_transposed], rows[self.to_transposed], (F, N)
            nnz = rows.numel()
            blocks = torch.arange(S, device=rows.device).view(-1, 1)
            crow = torch._convert_indices_from_coo_to_csr(rows, N)
            crow = torch.cat([(crow[:-1].view(1, -1) + blocks * nnz).reshape(-1), crow.new_full((1,), S * nnz)])
            col = (cols.view(1, -1) + blocks * F).reshape(-1)
            self._layouts[S, transposed] = *compact_indices(crow, col), (S * N, S * F)
        return self._layouts[S, transposed]


def compact_indices(*indices: Tensor) -> tuple[Tensor, ...]:
    """CSR indices as int32 where every value fits, else as they are (int64)."""
    fits = all(i.numel() == 0 or int(i.max()) < torch.iinfo(torch.int32).max for i in indices)
    return tuple(i.int() for i in indices) if fits else indices


def int32_csr(matrix: Tensor) -> Tensor:
    """A sparse CSR matrix with int32 indices where they fit (see :func:`compact_indices`)."""
    crow, col = compact_indices(matrix.crow_indices(), matrix.col_indices())
    return torch.sparse_csr_tensor(crow, col, matrix.values(), matrix.shape)


class SparseRowsTimesWeight(torch.autograd.Function):
    r"""``X @ W`` for a sparse ``X`` given by its ``pattern`` and ``values`` (no gradient: in
    MixHop they are the input's dropout and normalisation) and a dense ``W``; under ``vmap``
    (``values`` ``[S, nnz]``, ``W`` ``[S, F, H]``) one block-diagonal product for all seeds.
    MixHop's input is binary bag-of-words (Cora 1.3% nonzero): as a dense ``[S, N, F]`` tensor its
    first product was most of a batched epoch, the same work per seed as one seed alone."""

    @staticmethod
    def forward(pattern: SparsePattern, values: Tensor, weight: Tensor) -> Tensor:
        alone = values.dim() == 1
        values, weight = (values[None], weight[None]) if alone else (values, weight)
        out = torch.sparse.mm(pattern.block_diagonal(values), weight.reshape(-1, weight.size(-1)))
        out = out.view(values.size(0), pattern.shape[0], -1)
        return out[0] if alone else out

    @staticmethod
    def setup_context(ctx, inputs, output):
        pattern, values, _ = inputs
        if ctx.needs_input_grad[1]:
            raise NotImplementedError("SparseRowsTimesWeight: no gradient for the sparse values")
        ctx.pattern = pattern
        ctx.save_for_backward(values)

    @staticmethod
    def backward(ctx, grad: Tensor):
        (values,) = ctx.saved_tensors
        alone = values.dim() == 1
        values, grad = (values[None], grad[None]) if alone else (values, grad)
        transposed = ctx.pattern.block_diagonal(values, transposed=True)
        grad_weight = torch.sparse.mm(transposed, grad.reshape(-1, grad.size(-1)))
        grad_weight = grad_weight.view(values.size(0), ctx.pattern.shape[1], -1)
        return None, None, grad_weight[0] if alone else grad_weight

    @staticmethod
    def vmap(info, in_dims, pattern, values, weight):
        _, values_dim, weight_dim = in_dims
        values = values.movedim(values_dim, 0) if values_dim is not None else values.expand(info.batch_size, -1)
        weight = weight.movedim(weight_dim, 0) if weight_dim is not None else weight.expand(info.batch_size, -1, -1)
        return SparseRowsTimesWeight.apply(pattern, values, weight), 0


class MixHopLayer(torch.nn.Module):
    r"""One MixHop layer (Abu-El-Haija et al. 2019, Eq. 4) as its authors' code builds it:

    .. math::
        H' = \Big\Vert_{p \in P} \hat{A}^{p} H W_p

    with :math:`\hat{A} = D^{-1/2}(A + I)D^{-1/2}` (a sparse tensor), one width per power
    (``widths[p]``, 0: the power is left out) and no bias. Written here rather than with PyG's
    ``MixHopConv``, which gives every power the same width and propagates the input before
    projecting it: :math:`\hat{A}^{p}(H W_p)` is the same product at the width of
    :math:`W_p`'s output (60 columns, not Cora's 1,433). One sparse product per step, not
    messages along every edge: under ``vmap`` it ran PubMed's epoch about 2.5x faster."""

    def __init__(self, in_features: int, widths: list[int]):
        super().__init__()
        self.powers = [p for p, width in enumerate(widths) if width > 0]
        self.widths = [widths[p] for p in self.powers]
        self.lins = torch.nn.ModuleList(torch.nn.Linear(in_features, width, bias=False) for width in self.widths)
        for lin in self.lins:  # TF's Dense default, as in the authors' code
            torch.nn.init.xavier_uniform_(lin.weight)

    def weight(self) -> Tensor:
        """[in, sum of widths]: the powers' W_p side by side."""
        return torch.cat([lin.weight for lin in self.lins]).t()

    def forward(self, h: Tensor, adjacency: Tensor, transposed: Tensor, pattern: SparsePattern | None = None) -> Tensor:
        """``adjacency``: the normalised graph (sparse CSR), ``transposed``: its transpose;
        with ``pattern``, ``h`` holds a sparse input's values at the pattern's entries."""
        projected = h @ self.weight() if pattern is None else SparseRowsTimesWeight.apply(pattern, h, self.weight())
        outs = []
        for p, hw in zip(self.powers, projected.split(self.widths, dim=-1)):
            for _ in range(p):
                hw = SharedSparseProduct.apply(adjacency, transposed, hw)
            outs.append(hw)
        return torch.cat(outs, dim=-1)


def dropped_normalised(rows: Tensor, num_nodes: int, p: float, training: bool) -> Tensor:
    """``F.normalize(F.dropout(X, p))`` for a binary X given by the rows of its nonzero entries:
    the authors' sparse_dropout then l2_normalize, as the values at those entries. The dropout
    masks are drawn for those entries alone (Cora's X is 1.3% nonzero; masks over all of it
    took most of an epoch); their 1 / (1 - p) scale cancels in the normalisation, as in theirs."""
    kept = F.dropout(torch.ones(rows.numel(), device=rows.device), p, training)
    norms = scatter(kept.pow(2), rows, dim=0, dim_size=num_nodes, reduce="sum").sqrt().clamp_min(1e-12)
    return kept / norms[rows]


@network("mixhop")
class MixHop(torch.nn.Module):
    """MixHop as its authors' code runs it on the citation datasets (samihaija/mixhop,
    mixhop_trainer.py with train_<dataset>.sh): binary features, dropout and rows L2-normalised;
    a MixHop layer over powers 0, 1, 2 (``hidden_per_power``); batch norm on the batch's own
    statistics, centre only (TF's ``batch_norm`` in training mode, which the authors' code never
    leaves); ReLU; dropout; an output MixHop layer (``output_per_power``) whose class-sized
    segments are summed with softmax weights q (their ``psum_output_layer``).

    Its loss terms (:meth:`penalty`): on every kernel, ``kernel_l2`` * sum w^2 plus
    ``kernel_lasso`` * the sum of each unit's weight norm (their CombinedRegularizer), and
    1e-3 * mean q^2."""

    BATCH_NORM_EPS = 1e-3  # TF's batch_norm default
    # the input product sparse below this share of nonzeros, dense above (measured per seed-epoch,
    # chunks of 25, one thread: PubMed, 10%: sparse 701 ms, dense 909; Photo, 35%: 774 and 666)
    DENSE_INPUT_ABOVE = 0.2
    Q_PENALTY = 1e-3

    def __init__(self, in_features: int, classes: int, cfg: MixHopSettings, num_nodes: int):
        super().__init__()
        hidden, output = cfg.hidden_per_power, cfg.output_per_power
        if sum(output) % classes:
            raise ConfigError(f"method_hparams.mixhop.output_per_power: {output} sums to {sum(output)}, "
                              f"not a multiple of the {classes} classes")
        self.hidden = MixHopLayer(in_features, hidden)
        self.centre = torch.nn.Parameter(torch.zeros(sum(hidden)))
        self.output = MixHopLayer(sum(hidden), output)
        self.q = torch.nn.Parameter(torch.zeros(sum(output) // classes))
        self.classes, self.num_nodes, self.in_features = classes, num_nodes, in_features
        self.input_drop, self.p_drop = cfg.input_drop, cfg.p_drop
        self.kernel_l2, self.kernel_lasso = cfg.kernel_l2, cfg.kernel_lasso

    def forward(self, words: SparsePattern, adjacency, transposed):
        x = dropped_normalised(words.rows, self.num_nodes, self.input_drop, self.training)
        if words.density > self.DENSE_INPUT_ABOVE:
            h = self.hidden(words.dense(x), adjacency, transposed)
        else:
            h = self.hidden(x, adjacency, transposed, pattern=words)
        h = (h - h.mean(0)) / torch.sqrt(h.var(0, unbiased=False) + self.BATCH_NORM_EPS) + self.centre
        h = F.dropout(F.relu(h), self.p_drop, self.training)
        out = self.output(h, adjacency, transposed)
        segments = out.view(out.size(0), -1, self.classes)
        return (segments * torch.softmax(self.q, dim=0).view(1, -1, 1)).sum(1)

    def penalty(self, params: dict[str, Tensor]) -> Tensor:
        """The loss terms of one seed's parameters ``params`` (name -> tensor, as
        ``named_parameters`` gives them)."""
        kernels = [w for name, w in params.items() if name.endswith(".weight")]
        l2 = sum(w.pow(2).sum() for w in kernels)
        lasso = sum(w.norm(dim=1).sum() for w in kernels)  # a unit's incoming weights: TF's kernel column
        return self.kernel_l2 * l2 + self.kernel_lasso * lasso + self.Q_PENALTY * params["q"].pow(2).mean()


@network("sgc")
class SGC(torch.nn.Module):
    """PyG benchmark/citation sgc.py: one SGConv (K propagation steps, then a linear map),
    cached as there: the propagated features do not depend on the weights."""

    def __init__(self, in_features: int, classes: int, cfg: SGCSettings, num_nodes: int):
        super().__init__()
        self.conv = SGConv(in_features, classes, K=cfg.K, cached=True)
        self.product_order = cfg.product_order  # read by its sparse network only

    def forward(self, x, edge_index, edge_weight=None):
        return self.conv(x, edge_index)


# AGNNConv's attention softmax does not run under torch.func.vmap (PyG 2.8.1's scatter broadcast
# fails on a batched 1-D alpha): seed by seed
@network("agnn")
class AGNN(torch.nn.Module):
    """PyG examples/agnn.py: dropout, Linear, ReLU, AGNNConv (fixed), AGNNConv (learned),
    dropout, Linear. With ``prop_layers`` r (the ranges study), r propagation layers: the first
    fixed, the others learned."""

    def __init__(self, in_features: int, classes: int, cfg: AGNNSettings, num_nodes: int):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_features, cfg.hidden)
        props = [AGNNConv(requires_grad=False)] + [AGNNConv(requires_grad=True) for _ in range(cfg.prop_layers - 1)]
        self.props = torch.nn.ModuleList(props)
        self.lin2 = torch.nn.Linear(cfg.hidden, classes)
        self.p_drop = cfg.p_drop

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        x = F.relu(self.lin1(x))
        for prop in self.props:
            x = prop(x, edge_index)
        x = F.dropout(x, self.p_drop, self.training)
        return self.lin2(x)


@network("gat")
class GAT(torch.nn.Module):
    """PyG benchmark/citation gat.py: dropout, GATConv (8 heads), ELU, dropout, GATConv. With
    ``layers`` r (the ranges study), r - 2 more GATConv layers of the same heads and width
    before the last, each followed by ELU and dropout."""

    def __init__(self, in_features: int, classes: int, cfg: GATSettings, num_nodes: int):
        super().__init__()
        p, h, heads = cfg.p_drop, cfg.hidden, cfg.heads
        hidden = [GATConv(in_features, h, heads=heads, dropout=p)]
        hidden += [GATConv(h * heads, h, heads=heads, dropout=p) for _ in range(cfg.layers - 2)]
        self.convs = torch.nn.ModuleList(hidden + [GATConv(h * heads, classes, heads=cfg.output_heads, concat=False,
                                                           dropout=p)])
        self.p_drop = p

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        for conv in self.convs[:-1]:
            x = F.dropout(F.elu(conv(x, edge_index)), self.p_drop, self.training)
        return self.convs[-1](x, edge_index)


def csr_product(a: Tensor, b: Tensor) -> tuple[Tensor, Tensor]:
    """``a @ b`` of two CSR matrices as ``(edge_index, values)``, on the CPU by SciPy, in the order
    and with the sums of torch's own product there (MKL's), which never gives its output's memory
    back (the growth pytorch/pytorch#109445 reports): about 5 MB a training step of Graph U-Net on
    CS, more than 10 GB over one of its seeds. Both are Gustavson's product, row by row: row i
    sums each entry's terms in the order it meets them, through a's entries (i, k) in turn, each
    followed by the entries (k, j) of b's row k; MKL lists a row's columns in the order it first
    reaches them, SciPy (``csr_matmat``, a linked list) in the reverse order, so each row is read
    backwards. Equal to torch's product bit for bit (tests/test_baselines.py); SciPy leaves out an
    entry whose terms sum to exactly 0, which positive weights (Graph U-Net's) never give. Elsewhere
    (CUDA), torch's product."""
    if a.device.type != "cpu":
        product = (a @ b).to_sparse_coo()
        return product.indices(), product.values()
    a_, b_ = (csr_matrix((m.values().numpy(), m.col_indices().numpy(), m.crow_indices().numpy()), shape=m.shape)
              for m in (a, b))
    product = a_ @ b_
    crow = torch.from_numpy(product.indptr).long()
    row = torch.repeat_interleave(crow.diff())
    backwards = crow[:-1][row] + crow[1:][row] - 1 - torch.arange(row.numel())  # each row's entries reversed
    col, values = torch.from_numpy(product.indices).long(), torch.from_numpy(product.data)
    return torch.stack([row, col[backwards]]), values[backwards]


class SquareOnKeptNodes(Connect):
    r"""Graph U-Net's pooled graph (Gao and Ji 2019: the graph's second power, which connects
    nodes two hops apart before a pooling):
    :math:`A' = \big((A + I)^2\big)_{idx, idx}` without its diagonal, for the ``idx`` nodes
    top-k pooling keeps. PyG's ``GraphUNet`` squares :math:`A + I` over all N nodes
    (``augment_adj``), then its ``TopKPooling`` filters the kept rows and columns
    (``FilterEdges``); this takes the product of the kept rows with the kept columns only,
    :math:`(A + I)_{idx, :} (A + I)_{:, idx}`, the same entries in the same order (the masked
    matrices keep their node labels, so the sparse product visits them as the full one does),
    at a fraction of the work where few nodes are kept (2,000 of PubMed's 19,717)."""

    def forward(self, select_output, edge_index: Tensor, edge_attr: Tensor | None = None,
                batch: Tensor | None = None) -> ConnectOutput:
        n, kept = select_output.num_nodes, select_output.node_index
        position = kept.new_full((n,), -1)
        position[kept] = torch.arange(kept.numel(), device=kept.device)
        rows, cols = position[edge_index[0]] >= 0, position[edge_index[1]] >= 0
        index, weight = csr_product(to_torch_csr_tensor(edge_index[:, rows], edge_attr[rows], size=(n, n)),
                                    to_torch_csr_tensor(edge_index[:, cols], edge_attr[cols], size=(n, n)))
        off_diagonal = index[0] != index[1]
        return ConnectOutput(position[index[:, off_diagonal]], weight[off_diagonal],
                             self.get_pooled_batch(select_output, batch))


class KeptNodesGraphUNet(GraphUNet):
    """PyG's ``GraphUNet``, its pooled graphs computed on the kept nodes only
    (:class:`SquareOnKeptNodes`): the same network, its outputs and gradients bit for bit."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for pool in self.pools:
            pool.connect = SquareOnKeptNodes()

    def augment_adj(self, edge_index: Tensor, edge_weight: Tensor, num_nodes: int) -> tuple[Tensor, Tensor]:
        """:math:`A + I`; the pooling squares it on the nodes it keeps."""
        edge_index, edge_weight = remove_self_loops(edge_index, edge_weight)
        return add_self_loops(edge_index, edge_weight, num_nodes=num_nodes)


# top-k pooling keeps a different node set per seed: no stacked form
@network("graph_unet")
class UNet(torch.nn.Module):
    """PyG examples/graph_unet.py: edge dropout, feature dropout, GraphUNet (depth 3, pooling
    ratios 2000/N then 0.5). Sparse features (``implementation: sparse``) drop their stored
    entries only, which is dropout's distribution on the dense matrix (its zeros stay zero), and
    reach PyG's first ``GCNConv``, whose linear map takes them as a sparse product; GraphUNet reads
    nothing else of them once it is given the edges' unit weights it would otherwise build from
    them."""

    def __init__(self, in_features: int, classes: int, cfg: UNetSettings, num_nodes: int):
        super().__init__()
        ratios = [min(1.0, 2000 / num_nodes), 0.5]
        self.unet = KeptNodesGraphUNet(in_features, cfg.hidden, classes, depth=cfg.depth, pool_ratios=ratios)
        self.edge_drop, self.p_drop = cfg.edge_drop, cfg.p_drop

    def forward(self, x, edge_index, edge_weight=None):
        edge_index, _ = dropout_edge(edge_index, p=self.edge_drop, force_undirected=True, training=self.training)
        if x.is_sparse:
            x = sparse_dropout(x, self.p_drop, self.training)
            return self.unet(x, edge_index, edge_weight=torch.ones(edge_index.size(1), dtype=x.dtype, device=x.device))
        x = F.dropout(x, self.p_drop, self.training)
        return self.unet(x, edge_index)


@network("appnp")
class APPNPNet(torch.nn.Module):
    """PyG benchmark/citation appnp.py: dropout, Linear, ReLU, dropout, Linear, APPNP(K, alpha)."""

    def __init__(self, in_features: int, classes: int, cfg: APPNPSettings, num_nodes: int):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_features, cfg.hidden)
        self.lin2 = torch.nn.Linear(cfg.hidden, classes)
        self.prop = APPNP(cfg.K, cfg.ppr_alpha)
        self.p_drop = cfg.p_drop

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        x = F.relu(self.lin1(x))
        x = F.dropout(x, self.p_drop, self.training)
        return self.prop(self.lin2(x), edge_index)


@network("gdc")
def gdc(in_features: int, classes: int, cfg: GDCSettings, num_nodes: int) -> ConvStack:
    """GCN on GDC's weighted graph (:func:`baseline_inputs`), already normalised by the transform."""
    widths = layer_widths(in_features, classes, cfg.hidden, 2)
    return ConvStack([GCNConv(a, b, normalize=False) for a, b in widths], cfg.p_drop)
