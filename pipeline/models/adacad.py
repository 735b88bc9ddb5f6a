r"""CAD-Net: the maths of the paper, section 3 ("Proposed Method").

Equation numbers are those of the paper's LaTeX source (``../shared/paper``), counted in
order: (1) overview, (4) transition, (5) self-guided class distribution, (6) CAD aggregation,
(7) AdaCAD interpolation, (8) control variable :math:`c_i`, (9) adaptive weight
:math:`\gamma_i`, (10) matrix form (the aggregation, label ``eq:CAD``, is the sixth numbered
equation, as docs/SPEC.md says too).

Every function here accepts node tensors of shape ``[N, C]`` (one model) or ``[N, S, C]``
(``S`` models side by side), node axis first and class axis last. The batched engine
(:mod:`pipeline.models.adacad_batched`) reuses the softmax of Eq. (4), the weights of Eqs. (8)-(9), Eq. (7)
and the entropy; it computes the per-edge products and the diffusion as sparse-matrix
products of its own, which the tests check against the functions here.
"""
from __future__ import annotations

import math

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.data import Data
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.nn.inits import glorot
from torch_geometric.transforms import GDC
from torch_geometric.utils import degree, remove_self_loops, scatter, softmax

from pipeline.models.seeds import NetOutput, PerReplica

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


def adaptive_weight(similarity: Tensor, row: Tensor, num_nodes: int, beta: float | PerReplica) -> Tensor:
    r"""Per-node weight :math:`\gamma_i` of the diffusion result, Eqs. (8) and (9).

    .. math::
        c_i = \frac{1}{\deg(i)} \sum_{j \in \mathcal{N}(i)} \mathbf{p}_i^\top \mathbf{p}_j,
        \qquad \gamma_i = \beta + (1 - \beta)\, c_i

    ``similarity`` holds :math:`\mathbf{p}_i^\top\mathbf{p}_j` per edge and ``row`` each edge's
    source i. A node without edges counts as degree 1 (so :math:`c_i = 0`). As in the authors'
    code, no gradient flows through :math:`\gamma`. Returns ``[N]`` or ``[N, S]``. With one
    :math:`\beta` per replica (:class:`pipeline.models.seeds.PerReplica`), ``row`` numbers node i of
    replica s ``i * S + s``, as the batched engine's graph does.
    """
    with torch.no_grad():
        degree = torch.bincount(row, minlength=num_nodes).clamp(min=1)
        degree = degree.view(-1, *([1] * (similarity.dim() - 1))).to(similarity.dtype)
        c = scatter(similarity, row, dim=0, dim_size=num_nodes, reduce="sum") / degree
        if isinstance(beta, PerReplica):
            nodes = c.numel() // beta.value.numel()
            return beta.value.repeat(nodes) + beta.derived.repeat(nodes) * c
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
        # [E] (one transition for every seed) or [E, S] values against [E, S, C] messages
        return transition.view(*transition.shape, *([1] * (z_j.dim() - transition.dim()))) * z_j

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(K={self.K}, direction={self.direction})"


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




# ---------------------------------------------------------------------------- the operator


@dataclass(frozen=True)
class AdaCADConfig:
    """The parts of the aggregation (params.yaml keys of the same names; each method's
    registration below fixes ``transition``, ``propagation``,
    ``weighting``)."""

    K: int
    beta: float
    direction: str = "push"
    transition: str = "cad"  # cad (Eq. 4), rw, symna, gat, tf
    propagation: str = "steps"  # steps (K steps of T), ppr, heat (GDC's closed forms)
    weighting: str = "adaptive"  # adaptive (Eqs. 8-9) or none (gamma = 1)
    ppr_alpha: float = 0.05
    heat_t: float = 5.0
    diffusion_topk: int = 128
    attention_slope: float = 0.2

    @classmethod
    def from_hparams(cls, hp: dict) -> "AdaCADConfig":
        return cls(**{k: hp[k] for k in cls.__dataclass_fields__ if k in hp})

    @property
    def learned_transition(self) -> bool:
        """Whether T differs per seed and per epoch (cad, gat, tf) or is fixed by the graph."""
        return self.transition in ("cad", "gat", "tf")


class EdgeListGraph:
    """The reference graph for :class:`AdaCAD`: per-edge values by gathering the edge list and
    PyG's softmax, scatter and message passing. Node tensors ``[N, S, ...]``, edge values
    ``[E, S]``; the batched engine's :class:`pipeline.models.adacad_batched.BlockDiagonalGraph` offers the
    same methods on a block-diagonal matrix, and the tests hold the two equal.

    Edge e goes from ``i = edge_index[0, e]`` to ``j = edge_index[1, e]``; transitions are
    normalised over each node i's out-edges (Eq. 4) and the diffusion direction decides where
    the messages go (:data:`FLOW_OF_DIRECTION`).
    """

    def __init__(self, edge_index: Tensor, num_nodes: int, direction: str):
        self.edge_index, self.num_nodes, self.direction = edge_index, num_nodes, direction

    def to(self, device) -> "EdgeListGraph":
        return EdgeListGraph(self.edge_index.to(device), self.num_nodes, self.direction)

    def edge_products(self, a: Tensor, b: Tensor) -> Tensor:
        r""":math:`\mathbf{a}_i^\top \mathbf{b}_j` per edge and seed."""
        row, col = self.edge_index
        return (a[row] * b[col]).sum(-1)

    def at_source(self, x: Tensor) -> Tensor:
        return x[self.edge_index[0]]

    def at_target(self, x: Tensor) -> Tensor:
        return x[self.edge_index[1]]

    def out_softmax(self, scores: Tensor) -> Tensor:
        return transition_from_similarity(scores, self.edge_index[0], self.num_nodes)

    def adaptive_weight(self, similarity: Tensor, beta: float) -> Tensor:
        return adaptive_weight(similarity, self.edge_index[0], self.num_nodes, beta)

    def diffuse(self, z: Tensor, transition: Tensor, K: int) -> Tensor:
        return ClassAttentiveDiffusion(K, self.direction)(z, self.edge_index, transition)


class FixedPropagation(torch.nn.Module):
    r""":math:`Z \mapsto M^{\mathrm{steps}} Z` with one sparse matrix M that every seed shares:
    the graph-only aggregations of Table 3. RW (:math:`T = D^{-1}A`) and symNA
    (:math:`T = D^{-1/2} A D^{-1/2}`) take K steps of T; PPR and HK take one step of GDC's
    sparsified closed-form diffusion. Edge weights follow the same convention as CAD's
    transitions (edge i -> j, ``push``: z_j += w_ij z_i, ``pull``: z_i += w_ij z_j).
    """

    def __init__(self, edge_index: Tensor, weight: Tensor, num_nodes: int, direction: str, steps: int):
        super().__init__()
        row, col = edge_index
        source, target = (row, col) if direction == "push" else (col, row)
        matrix = torch.sparse_coo_tensor(torch.stack([target, source]), weight, (num_nodes, num_nodes))
        self.register_buffer("matrix", matrix.coalesce().to_sparse_csr())
        self.steps = steps

    def forward(self, z: Tensor) -> Tensor:
        n = z.size(0)
        flat = z.reshape(n, -1)
        for _ in range(self.steps):
            flat = torch.sparse.mm(self.matrix, flat)
        return flat.view(z.shape)


def fixed_transition(edge_index: Tensor, num_nodes: int, kind: str) -> Tensor:
    """Per-edge weights of RW (:math:`D^{-1}A`, each node's out-edges sum to 1) or symNA
    (:math:`D^{-1/2} A D^{-1/2}`, PyG's ``gcn_norm`` without added self-loops)."""
    if kind == "rw":
        row = edge_index[0]
        return 1.0 / degree(row, num_nodes).clamp(min=1)[row]
    if kind == "symna":
        return gcn_norm(edge_index, None, num_nodes, add_self_loops=False)[1]
    raise ValueError(f"transition: {kind!r} is not a fixed transition; allowed: rw, symna")


def closed_form_diffusion(edge_index: Tensor, num_nodes: int, cfg: AdaCADConfig) -> tuple[Tensor, Tensor]:
    r"""PPR or heat-kernel diffusion "as in GDC" (Klicpera et al., 2019), with PyG's ``GDC``:
    self-loops of weight 1, the transition ``cfg.transition`` (symNA: GDC's ``sym``, RW: its
    ``row``), the closed form, top-k sparsification per column, column normalisation.

    PPR: :math:`\alpha (I - (1 - \alpha) T)^{-1}` (GDC's exact inverse). Heat:
    :math:`e^{-t} \sum_k t^k T^k / k!`, summed here with sparse products until the terms
    fall below 1e-7 (GDC's exact path takes a dense eigendecomposition, about N^3 work: far
    too slow for PubMed on a CPU); then GDC's own sparsification and normalisation.
    """
    edge_index, _ = remove_self_loops(edge_index)  # GDC adds its own, of weight 1
    normalization_in = {"symna": "sym", "rw": "row"}[cfg.transition]
    sparsify = dict(method="topk", k=min(cfg.diffusion_topk, num_nodes), dim=0)
    if cfg.propagation == "ppr":
        gdc = GDC(self_loop_weight=1, normalization_in=normalization_in, normalization_out="col",
                  diffusion_kwargs=dict(method="ppr", alpha=cfg.ppr_alpha), sparsification_kwargs=sparsify)
        out = gdc(Data(edge_index=edge_index, num_nodes=num_nodes))
        return out.edge_index, out.edge_attr
    gdc = GDC(self_loop_weight=1, normalization_in=normalization_in, normalization_out="col",
              diffusion_kwargs=dict(method="heat", t=cfg.heat_t), sparsification_kwargs=sparsify)
    loops = torch.arange(num_nodes).repeat(2, 1)
    edge_index = torch.cat([edge_index, loops], dim=1)
    edge_index, weight = gdc.transition_matrix(edge_index, torch.ones(edge_index.size(1)), num_nodes,
                                               normalization_in)
    T = torch.sparse_coo_tensor(edge_index, weight, (num_nodes, num_nodes)).coalesce().to_sparse_csr()
    term = torch.eye(num_nodes) * math.exp(-cfg.heat_t)
    heat, k = term.clone(), 0
    while float(term.abs().max()) > 1e-7:
        k += 1
        term = torch.sparse.mm(T, term) * (cfg.heat_t / k)
        heat += term
    edge_index, weight = gdc.sparsify_dense(heat, **sparsify)
    return gdc.transition_matrix(edge_index, weight, num_nodes, "col")


def fixed_propagation(edge_index: Tensor, num_nodes: int, cfg: AdaCADConfig) -> FixedPropagation | None:
    """The shared propagation of a graph-only aggregation; None where T is learned."""
    if cfg.propagation == "steps":
        if cfg.learned_transition:
            return None
        weight = fixed_transition(edge_index, num_nodes, cfg.transition)
        return FixedPropagation(edge_index, weight, num_nodes, cfg.direction, cfg.K)
    if cfg.learned_transition:
        raise ValueError(f"propagation {cfg.propagation!r} needs a fixed transition (rw or symna)")
    diffusion_edges, weight = closed_form_diffusion(edge_index, num_nodes, cfg)
    return FixedPropagation(diffusion_edges, weight, num_nodes, cfg.direction, 1)


class AdaCAD(torch.nn.Module):
    r"""Adaptive aggregation with class-attentive diffusion, section 3 of the paper, with
    pluggable parts (Table 3 swaps them inside the same network).

    Given logits :math:`Z` (``[N, S, C]``: S seeds side by side) and
    :math:`\mathbf{p}_i = \mathrm{softmax}(z_i)` (Eq. 5, :math:`g_\phi` is a softmax):

    - **transition** :math:`T`, normalised over each node's out-edges:
      ``cad`` :math:`T_{ij} = \mathrm{softmax}_{j \in \mathcal{N}(i)}(\mathbf{p}_i^\top\mathbf{p}_j)` (Eq. 4);
      ``rw`` :math:`D^{-1}A`; ``symna`` :math:`D^{-1/2}AD^{-1/2}`;
      ``gat`` :math:`\mathrm{softmax}_j(\mathrm{LeakyReLU}(\mathbf{a}_s^\top z_i + \mathbf{a}_d^\top z_j))`
      (GAT's attention on Z; GAT's weight matrix W folds into the learned vectors);
      ``tf`` :math:`\mathrm{softmax}_j(f_Q(z_i)^\top f_K(z_j))` with learned linear maps
      :math:`f_Q, f_K: \mathbb{R}^C \to \mathbb{R}^C` (no bias, no scaling, as the paper writes it).
    - **propagation** :math:`\Pi`: ``steps`` :math:`\Pi^{(K)} = T^K`, K sparse steps
      (Eqs. 6 and 10); ``ppr`` / ``heat``: GDC's closed-form diffusion of T, sparsified
      (:func:`closed_form_diffusion`). ``direction`` ``push`` applies
      :math:`(\Pi)^\top` (the authors' code), ``pull`` applies :math:`\Pi` (Eq. 6).
    - **weighting** :math:`\Gamma`: ``adaptive``
      :math:`c_i = \frac{1}{\deg(i)}\sum_{j \in \mathcal{N}(i)} \mathbf{p}_i^\top \mathbf{p}_j`,
      :math:`\gamma_i = \beta + (1 - \beta) c_i` (Eqs. 8-9, no gradient); ``none``: :math:`\gamma_i = 1`.

    Output, Eqs. (7) and (10): :math:`Z^{(\mathrm{AdaCAD})} = (I - \Gamma) Z + \Gamma\, \Pi Z`,
    with the entropy :math:`H(\mathbf{p}_i)` of every node (the regulariser of section 3.4).

    The per-edge work runs on a ``graph`` object: :class:`EdgeListGraph` (the reference) or
    :class:`pipeline.models.adacad_batched.BlockDiagonalGraph` (many seeds as one sparse matrix). Learned
    parameters (``gat``, ``tf``) carry the seed axis first: ``[S, ...]``.
    """

    def __init__(self, cfg: AdaCADConfig, num_classes: int, num_seeds: int = 1,
                 fixed: FixedPropagation | None = None):
        super().__init__()
        self.cfg = cfg
        self.beta: float | PerReplica = cfg.beta  # the batched network's replicas may each have their own
        self.fixed = fixed  # shared by every seed; None where T is learned
        if cfg.transition == "gat":
            self.att_source = torch.nn.Parameter(glorot_(torch.empty(num_seeds, num_classes)))
            self.att_target = torch.nn.Parameter(glorot_(torch.empty(num_seeds, num_classes)))
        elif cfg.transition == "tf":
            self.query = torch.nn.Parameter(glorot_(torch.empty(num_seeds, num_classes, num_classes)))
            self.key = torch.nn.Parameter(glorot_(torch.empty(num_seeds, num_classes, num_classes)))

    @property
    def needs_edge_values(self) -> bool:
        """Whether forward() does per-edge, per-seed work (a learned T, or gamma) on ``graph``."""
        return self.fixed is None or self.cfg.weighting == "adaptive"

    def transition(self, logits: Tensor, similarity: Tensor | None, graph) -> Tensor:
        kind = self.cfg.transition
        if kind == "cad":
            scores = similarity  # Eq. (4)
        elif kind == "gat":
            source = (logits * self.att_source).sum(-1)
            target = (logits * self.att_target).sum(-1)
            scores = F.leaky_relu(graph.at_source(source) + graph.at_target(target), self.cfg.attention_slope)
        else:  # tf
            queries = torch.einsum("nsc,scd->nsd", logits, self.query)
            keys = torch.einsum("nsc,scd->nsd", logits, self.key)
            scores = graph.edge_products(queries, keys)
        return graph.out_softmax(scores)

    def forward(self, logits: Tensor, self_term: Tensor, graph) -> tuple[Tensor, Tensor, Tensor]:
        """``logits``: Z before any dropout (it defines P, T and gamma); ``self_term``: the Z
        that is diffused and interpolated (``logits`` after dropout where the table drops the
        logits). Returns ``(z_adacad, entropy per node, gamma)``, ``[N, S, C]``, ``[N, S]``, ``[N, S]``."""
        probs = F.softmax(logits, dim=-1)
        similarity = None
        if self.cfg.weighting == "adaptive" or self.cfg.transition == "cad":
            similarity = graph.edge_products(probs, probs)  # p_i . p_j per edge (Eqs. 4 and 8)
        if self.cfg.weighting == "adaptive":
            gamma = graph.adaptive_weight(similarity, self.beta)
        else:
            gamma = torch.ones(logits.shape[:-1], dtype=logits.dtype, device=logits.device)
        if self.fixed is not None:
            z_cad = self.fixed(self_term)
        else:
            z_cad = graph.diffuse(self_term, self.transition(logits, similarity, graph), self.cfg.K)
        return interpolate(self_term, z_cad, gamma), entropy(probs), gamma


def glorot_(tensor: Tensor) -> Tensor:
    """PyG's Glorot initialisation (as GATConv's attention vectors), per seed."""
    for part in tensor:
        glorot(part if part.dim() > 1 else part.view(1, -1))  # a vector as GAT's [1, C]
    return tensor


# ---------------------------------------------------------------------------- the network


@dataclass(frozen=True)
class CADNetConfig:
    """Everything that shapes the network, passed whole (params.yaml keys of the same names)."""

    in_features: int
    hidden: int
    num_classes: int
    leak_slope: float
    p_drop: float
    dropout_sites: tuple[str, ...]
    lambda_ent: float
    aggregation: AdaCADConfig

    @classmethod
    def from_hparams(cls, hp: dict, in_features: int, num_classes: int) -> "CADNetConfig":
        return cls(in_features, hp["hidden"], num_classes, hp["leak_slope"], hp["p_drop"],
                   tuple(hp["dropout_sites"]), hp["lambda_ent"], AdaCADConfig.from_hparams(hp))


class CADNet(torch.nn.Module):
    r"""The whole network of section 3.4, one seed: a 2-layer MLP :math:`f_\theta` (Eq. 1),
    the aggregation (:class:`AdaCAD`) on its logits, :math:`g_\phi = \mathrm{softmax}`, and the
    loss term it adds to the NLL, :math:`\lambda_{\mathrm{ent}} \cdot \frac{1}{N}\sum_i H(\mathbf{p}_i)`.

    The readable reference; :class:`pipeline.models.adacad_batched.BatchedCADNet` trains many seeds at once
    from the weights of many of these. Outputs carry a seed axis of size 1.
    """

    def __init__(self, cfg: CADNetConfig, fixed: FixedPropagation | None = None):
        super().__init__()
        self.cfg = cfg
        self.embed1 = torch.nn.Linear(cfg.in_features, cfg.hidden)
        self.embed2 = torch.nn.Linear(cfg.hidden, cfg.num_classes)
        self.aggregate = AdaCAD(cfg.aggregation, cfg.num_classes, num_seeds=1, fixed=fixed)

    def _dropout(self, x: Tensor, site: str) -> Tensor:
        if site not in self.cfg.dropout_sites:
            return x
        if x.is_sparse:
            return sparse_dropout(x, self.cfg.p_drop, self.training)
        return F.dropout(x, self.cfg.p_drop, self.training)

    def forward(self, x: Tensor, graph: EdgeListGraph) -> NetOutput:
        x = self._dropout(x, "input")
        hidden = F.leaky_relu(_linear(x, self.embed1), self.cfg.leak_slope)
        hidden = self._dropout(hidden, "hidden")
        logits = self.embed2(hidden).unsqueeze(1)  # one seed: [N, 1, C]
        self_term = self._dropout(logits, "logits")
        z, node_entropy, gamma = self.aggregate(logits, self_term, graph)
        return NetOutput(F.log_softmax(z, dim=-1), self.cfg.lambda_ent * node_entropy.mean(0), gamma)


def _linear(x: Tensor, layer: torch.nn.Linear) -> Tensor:
    """``layer(x)`` for dense or sparse ``x`` (``nn.Linear`` rejects sparse input)."""
    if x.is_sparse:
        return torch.sparse.mm(x, layer.weight.t()) + layer.bias
    return layer(x)


class BoundNet(torch.nn.Module):
    """A one-seed network bound to its inputs, so the training loop calls every method's
    network the same way: ``net()``."""

    def __init__(self, model: torch.nn.Module, *inputs):
        super().__init__()
        self.model, self.inputs = model, inputs

    def to(self, device):  # inputs are plain tensors and graphs, not buffers
        super().to(device)
        self.inputs = tuple(x.to(device) for x in self.inputs)
        return self

    def forward(self):
        return self.model(*self.inputs)


# ---------------------------------------------------------------------------- the registry

# CAD-Net and its variants' builder (their entries: :mod:`pipeline.models.methods`)
def build_cadnet(graph: dict, hp: dict, seeds: list[int], batched: bool,
                 per_replica: dict[str, list[float]] | None = None) -> torch.nn.Module:
    """Registry builder of CAD-Net and its Table 3 variants: seed s starts from the weights a
    :class:`CADNet` gets after ``torch.manual_seed(s)``; the batched network stacks them, with
    ``per_replica``'s values of :data:`REPLICA_SETTINGS` where they differ between its seeds."""
    cfg = CADNetConfig.from_hparams(hp, graph["x"].size(1), graph["num_classes"])
    num_nodes = graph["y"].size(0)
    fixed = _cached(graph, ("fixed_propagation", cfg.aggregation),
                    lambda: fixed_propagation(graph["edge_index"].cpu(), num_nodes, cfg.aggregation))
    models = []
    for seed in seeds:
        torch.manual_seed(seed)
        models.append(CADNet(cfg, fixed))
    if batched:
        from pipeline.models.adacad_batched import BatchedCADNet  # the fast engine; the reference needs none of it

        return BatchedCADNet(models, graph["x"], graph["edge_index"], seeds, per_replica)
    if len(models) != 1 or per_replica:
        raise ValueError("the reference CADNet trains one seed at a time")
    edge_graph = EdgeListGraph(graph["edge_index"], num_nodes, cfg.aggregation.direction)
    return BoundNet(models[0], graph["x"], edge_graph)


def _cached(graph: dict, key, compute):
    """Work that depends only on the graph and the settings (GDC's diffusion: 90 s on PubMed),
    done once per train stage rather than once per chunk."""
    cache = graph.setdefault("_cache", {})
    if key not in cache:
        cache[key] = compute()
    return cache[key]
