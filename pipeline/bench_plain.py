"""The bench's yardstick: plain PyTorch versions of the baselines that have a sparse batched
implementation, S seeds at once, trained as the pipeline trains them; and, for the baselines
trained one seed at a time (Graph U-Net, AGNN), PyG's example of the same network.

Each is the network written directly: the sparse features times a [F, S x hidden] weight, the
normalised adjacency (GDC: its rewired graph) as one sparse CSR matrix times [N, S x width],
dropout drawn by ``F.dropout``. No registry, no per-seed streams, no early stopping. The loop
is the pipeline's shape: a training step on the summed per-seed losses (Adam with amsgrad and
weight decay), then an eval-mode pass with each seed's validation loss and accuracy. Used only
by :mod:`pipeline.bench`; the pipeline never imports it.
"""
from __future__ import annotations

import math
import time

import torch
import torch.nn.functional as F
from torch import Tensor
from torch_geometric.nn import AGNNConv, GraphUNet
from torch_geometric.nn.conv.gcn_conv import gcn_norm
from torch_geometric.utils import add_self_loops, dropout_edge, remove_self_loops, softmax

from pipeline.models.adacad import ENTROPY_EPS
from pipeline.models.baselines import baseline_inputs


def glorot(*shape: int) -> torch.nn.Parameter:
    bound = math.sqrt(6.0 / (shape[-2] + shape[-1]))
    return torch.nn.Parameter(torch.empty(*shape).uniform_(-bound, bound))


def csr(edge_index: Tensor, weight: Tensor, n: int) -> Tensor:
    """M[target, source] = weight, so M @ H sums each node's incoming messages."""
    return torch.sparse_coo_tensor(edge_index.flip(0), weight, (n, n), check_invariants=True).coalesce().to_sparse_csr()


def gcn_adjacency(graph: dict) -> Tensor:
    """D^-1/2 (A + I) D^-1/2 (Kipf & Welling 2017, Eq. 2)."""
    n = graph["y"].size(0)
    edge_index, weight = gcn_norm(remove_self_loops(graph["edge_index"])[0], num_nodes=n, add_self_loops=True)
    return csr(edge_index, weight, n)


def sparse_dropout(x: Tensor, p: float, seeds: int) -> Tensor:
    """[S, N, F] sparse COO: each seed's copy of the features with its own dropout on the non-zeros."""
    index, values = x.indices(), x.values()
    seed_of = torch.arange(seeds, device=x.device).repeat_interleave(values.numel())
    stacked = torch.cat([seed_of.view(1, -1), index.repeat(1, seeds)])
    return torch.sparse_coo_tensor(stacked, F.dropout(values.repeat(seeds), p), (seeds, *x.shape), check_invariants=False)


class PlainGCN(torch.nn.Module):
    """GCN (GDC: on the rewired graph): A relu(A X W1 + b1) W2 + b2, dropout on the hidden layer."""

    def __init__(self, x: Tensor, a: Tensor, hidden: int, classes: int, p_drop: float, seeds: int):
        super().__init__()
        self.x, self.a, self.p, self.S = x, a, p_drop, seeds
        self.w1, self.b1 = glorot(x.size(1), seeds * hidden), torch.nn.Parameter(torch.zeros(seeds * hidden))
        self.w2, self.b2 = glorot(seeds, hidden, classes), torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def forward(self) -> Tensor:  # [S, N, C]
        h = F.relu(self.a @ torch.sparse.mm(self.x, self.w1) + self.b1)
        h = F.dropout(h, self.p, self.training).view(h.size(0), self.S, -1).transpose(0, 1)
        z = torch.bmm(h, self.w2).transpose(0, 1).reshape(h.size(1), -1)
        return (self.a @ z).view(h.size(1), self.S, -1).transpose(0, 1) + self.b2


class PlainSGC(torch.nn.Module):
    """SGC: (A^K X) W + b, the propagated features computed once."""

    def __init__(self, x: Tensor, a: Tensor, K: int, classes: int, seeds: int):
        super().__init__()
        self.xk, self.S = x.to_dense(), seeds
        for _ in range(K):
            self.xk = a @ self.xk
        self.w, self.b = glorot(x.size(1), seeds * classes), torch.nn.Parameter(torch.zeros(seeds * classes))

    def forward(self) -> Tensor:
        return (self.xk @ self.w + self.b).view(self.xk.size(0), self.S, -1).transpose(0, 1)


class PlainAPPNP(torch.nn.Module):
    """APPNP: H = MLP(X) with dropout on X and on the hidden layer, then K steps of
    Z <- (1 - alpha) A Z + alpha H."""

    def __init__(self, x: Tensor, a: Tensor, hidden: int, classes: int, p_drop: float, K: int, alpha: float, seeds: int):
        super().__init__()
        self.x, self.a, self.p, self.K, self.alpha, self.S = x, a, p_drop, K, alpha, seeds
        self.w1, self.b1 = glorot(seeds, x.size(1), hidden), torch.nn.Parameter(torch.zeros(seeds, 1, hidden))
        self.w2, self.b2 = glorot(seeds, hidden, classes), torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def forward(self) -> Tensor:
        if self.training:
            h = torch.bmm(sparse_dropout(self.x, self.p, self.S), self.w1)
        else:  # no dropout: one product with every seed's weights side by side
            h = torch.sparse.mm(self.x, self.w1.permute(1, 0, 2).reshape(self.x.size(1), -1))
            h = h.view(self.x.size(0), self.S, -1).transpose(0, 1)
        h = F.dropout(F.relu(h + self.b1), self.p, self.training)
        h = (torch.bmm(h, self.w2) + self.b2).transpose(0, 1).reshape(self.x.size(0), -1)
        z = h
        for _ in range(self.K):
            z = (1 - self.alpha) * (self.a @ z) + self.alpha * h
        return z.view(self.x.size(0), self.S, -1).transpose(0, 1)


def seeds_first(h: Tensor, seeds: int) -> Tensor:
    """[N, S x D] -> [S, N, D]."""
    return h.view(h.size(0), seeds, -1).transpose(0, 1)


def side_by_side(h: Tensor) -> Tensor:
    """[S, N, D] -> [N, S x D]."""
    return h.transpose(0, 1).reshape(h.size(1), -1)


def chebyshev_terms(lap: Tensor, x: Tensor, K: int) -> list[Tensor]:
    """T_0(L) x .. T_{K-1}(L) x by the recurrence T_k = 2 L T_{k-1} - T_{k-2}."""
    terms = [x] + ([torch.sparse.mm(lap, x)] if K > 1 else [])
    while len(terms) < K:
        terms.append(2 * torch.sparse.mm(lap, terms[-1]) - terms[-2])
    return terms


class PlainCheb(torch.nn.Module):
    """ChebNet as PyG's ChebConv computes it: the terms T_k(L) H at the layer's input width (the
    input's, sparse, propagated once: it has no dropout), then sum_k T_k(L) H W_k + b; ReLU,
    dropout, a second such layer. L = -D^-1/2 A D^-1/2 (ChebConv's scaled Laplacian)."""

    def __init__(self, x: Tensor, lap: Tensor, hidden: int, classes: int, K: int, p_drop: float, seeds: int):
        super().__init__()
        self.lap, self.K, self.p, self.S = lap, K, p_drop, seeds
        self.terms = chebyshev_terms(lap.to_sparse_coo(), x, K)
        self.w1, self.b1 = glorot(K, x.size(1), seeds * hidden), torch.nn.Parameter(torch.zeros(seeds * hidden))
        self.w2, self.b2 = glorot(K, seeds, hidden, classes), torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def forward(self) -> Tensor:
        h = sum(torch.sparse.mm(t, w) for t, w in zip(self.terms, self.w1)) + self.b1
        h = F.dropout(F.relu(h), self.p, self.training)
        terms = chebyshev_terms(self.lap, h, self.K)
        return sum(torch.bmm(seeds_first(t, self.S), w) for t, w in zip(terms, self.w2)) + self.b2


class PlainSAGE(torch.nn.Module):
    """GraphSAGE-mean as PyG's SAGEConv computes it: the neighbours' mean first (the input's once:
    it has no dropout), then mean(H) W_l + b + H W_r; ReLU, dropout, a second such layer."""

    def __init__(self, x: Tensor, mean: Tensor, hidden: int, classes: int, p_drop: float, seeds: int):
        super().__init__()
        self.x, self.mean, self.p, self.S = x, mean, p_drop, seeds
        self.mean_x = torch.sparse.mm(mean.to_sparse_coo(), x)
        self.wl1, self.wr1 = glorot(x.size(1), seeds * hidden), glorot(x.size(1), seeds * hidden)
        self.b1 = torch.nn.Parameter(torch.zeros(seeds * hidden))
        self.wl2, self.wr2 = glorot(seeds, hidden, classes), glorot(seeds, hidden, classes)
        self.b2 = torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def forward(self) -> Tensor:
        h = torch.sparse.mm(self.mean_x, self.wl1) + self.b1 + torch.sparse.mm(self.x, self.wr1)
        h = F.dropout(F.relu(h), self.p, self.training)
        return torch.bmm(seeds_first(self.mean @ h, self.S), self.wl2) + self.b2 + torch.bmm(seeds_first(h, self.S), self.wr2)


class PlainJK(torch.nn.Module):
    """JK-Net: GCN layers A H W + b, each with ReLU and dropout, concatenated, then a Linear."""

    def __init__(self, x: Tensor, a: Tensor, hidden: int, classes: int, p_drop: float, layers: int, seeds: int):
        super().__init__()
        self.x, self.a, self.p, self.S = x, a, p_drop, seeds
        self.w1, self.b1 = glorot(x.size(1), seeds * hidden), torch.nn.Parameter(torch.zeros(seeds * hidden))
        self.ws = torch.nn.ParameterList(glorot(seeds, hidden, hidden) for _ in range(layers - 1))
        self.bs = torch.nn.ParameterList(torch.nn.Parameter(torch.zeros(seeds * hidden)) for _ in range(layers - 1))
        self.w_out, self.b_out = glorot(seeds, layers * hidden, classes), torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def forward(self) -> Tensor:
        h = F.dropout(F.relu(self.a @ torch.sparse.mm(self.x, self.w1) + self.b1), self.p, self.training)
        outs = [seeds_first(h, self.S)]
        for w, b in zip(self.ws, self.bs):
            h = F.dropout(F.relu(self.a @ side_by_side(torch.bmm(outs[-1], w)) + b), self.p, self.training)
            outs.append(seeds_first(h, self.S))
        return torch.bmm(torch.cat(outs, dim=2), self.w_out) + self.b_out


class PlainGAT(torch.nn.Module):
    """GAT as PyG's GATConv computes it, S seeds at once: dropout on X, per head the scores
    a_src . W h_j + a_dst . W h_i on every edge (self-loops added), LeakyReLU(0.2), softmax over
    each node's incoming edges, dropout, the messages alpha_ij W h_j summed at i; heads
    concatenated, ELU, dropout, a second layer with its heads averaged."""

    def __init__(self, x: Tensor, edge_index: Tensor, hidden: int, heads: int, output_heads: int, classes: int,
                 p_drop: float, seeds: int):
        super().__init__()
        self.x, self.p, self.S = x, p_drop, seeds
        self.source, self.target = add_self_loops(remove_self_loops(edge_index)[0], num_nodes=x.size(0))[0]
        self.shapes = [(heads, hidden), (output_heads, classes)]
        self.w1 = glorot(seeds, x.size(1), heads * hidden)
        self.w2 = glorot(seeds, heads * hidden, output_heads * classes)
        self.att_src = torch.nn.ParameterList(glorot(seeds, h, c) for h, c in self.shapes)
        self.att_dst = torch.nn.ParameterList(glorot(seeds, h, c) for h, c in self.shapes)
        self.b1 = torch.nn.Parameter(torch.zeros(seeds, 1, heads * hidden))
        self.b2 = torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def attend(self, layer: int, xw: Tensor) -> Tensor:  # [S, N, H x C] -> [S, N, H, C]
        H, C = self.shapes[layer]
        xw = xw.view(self.S, -1, H, C)
        score_src = (xw * self.att_src[layer].unsqueeze(1)).sum(-1)  # [S, N, H]
        score_dst = (xw * self.att_dst[layer].unsqueeze(1)).sum(-1)
        e = F.leaky_relu(score_src[:, self.source] + score_dst[:, self.target], 0.2)
        alpha = F.dropout(softmax(e, self.target, num_nodes=xw.size(1), dim=1), self.p, self.training)
        return torch.zeros_like(xw).index_add_(1, self.target, xw[:, self.source] * alpha.unsqueeze(-1))

    def forward(self) -> Tensor:
        h = self.attend(0, torch.bmm(sparse_dropout(self.x, self.p, self.S), self.w1) if self.training
                        else seeds_first(torch.sparse.mm(self.x, side_by_side_weight(self.w1)), self.S))
        h = F.dropout(F.elu(h.flatten(2) + self.b1), self.p, self.training)
        return self.attend(1, torch.bmm(h, self.w2)).mean(2) + self.b2


class PlainMixHop(torch.nn.Module):
    """MixHop as its authors build it (baselines.MixHop): binary features with dropout and rows
    L2-normalised, a layer sum_p A^p X W_p side by side over the powers, batch norm on the
    batch's statistics (centre only), ReLU, dropout, an output layer of the same kind, its class
    segments summed with softmax weights q; its kernels' L2 and lasso and q's penalty in the loss
    (:meth:`penalty`)."""

    def __init__(self, x: Tensor, a: Tensor, hp: dict, classes: int, seeds: int):
        super().__init__()
        self.a, self.hp, self.S, self.classes = a, hp, seeds, classes
        self.rows, self.cols = x.indices()
        self.shape = tuple(x.shape)
        hidden, output = hp["hidden_per_power"], hp["output_per_power"]
        self.w1 = glorot(seeds, x.size(1), sum(hidden))
        self.centre = torch.nn.Parameter(torch.zeros(seeds, 1, sum(hidden)))
        self.w2 = glorot(seeds, sum(hidden), sum(output))
        self.q = torch.nn.Parameter(torch.zeros(seeds, 1, 1, sum(output) // classes))

    def mix(self, hw: Tensor, widths: list[int]) -> Tensor:
        """[S, N, sum of widths] -> each power's columns times A^p."""
        parts = []
        for p, (width, part) in enumerate(zip(widths, hw.split(widths, dim=2))):
            if width == 0:  # the power left out
                continue
            for _ in range(p):
                part = seeds_first(self.a @ side_by_side(part), self.S)
            parts.append(part)
        return torch.cat(parts, dim=2)

    def forward(self) -> Tensor:
        kept = F.dropout(torch.ones(self.S, self.rows.numel()), self.hp["input_drop"], self.training)
        norms = torch.zeros(self.S, self.shape[0]).index_add_(1, self.rows, kept.pow(2)).sqrt().clamp_min(1e-12)
        seed_of = torch.arange(self.S).repeat_interleave(self.rows.numel())
        x = torch.sparse_coo_tensor(torch.stack([seed_of, self.rows.repeat(self.S), self.cols.repeat(self.S)]),
                                    (kept / norms[:, self.rows]).reshape(-1), (self.S, *self.shape))
        h = self.mix(torch.bmm(x, self.w1), self.hp["hidden_per_power"])
        h = (h - h.mean(1, keepdim=True)) / torch.sqrt(h.var(1, unbiased=False, keepdim=True) + 1e-3) + self.centre
        h = F.dropout(F.relu(h), self.hp["p_drop"], self.training)
        out = self.mix(torch.bmm(h, self.w2), self.hp["output_per_power"])
        segments = out.view(self.S, out.size(1), -1, self.classes)
        return (segments * torch.softmax(self.q, dim=-1).transpose(2, 3)).sum(2)

    def penalty(self) -> Tensor:
        kernels = (self.w1, self.w2)
        return (self.hp["kernel_l2"] * sum(w.pow(2).sum() for w in kernels)
                + self.hp["kernel_lasso"] * sum(w.norm(dim=1).sum() for w in kernels) + 1e-3 * self.q.pow(2).mean())


class PlainCADNet(torch.nn.Module):
    """CAD-Net as docs/SPEC.md writes it, the authors' direction (each node sends along its
    out-edges): dropout on X, Linear, LeakyReLU, dropout, Linear: Z (Eq. 1); P = softmax(Z)
    (Eq. 5); on every edge i -> j the similarity p_i . p_j, T its softmax over i's out-edges
    (Eq. 4); K steps z_j <- sum_i T_ij z_i (Eq. 6's step transposed); gamma_i = beta + (1 - beta)
    times the mean of i's similarities, without gradient (Eqs. 8-9); (1 - gamma) Z + gamma T^K Z
    (Eq. 7); the mean entropy of P in the loss (:meth:`penalty`). Edge tensors [S, E, C], as
    PyG's messages."""

    def __init__(self, x: Tensor, edge_index: Tensor, hp: dict, classes: int, seeds: int):
        super().__init__()
        self.x, self.hp, self.S = x, hp, seeds
        self.source, self.target = edge_index
        self.degree = torch.bincount(self.source, minlength=x.size(0)).clamp(min=1)
        self.w1 = glorot(seeds, x.size(1), hp["hidden"])
        self.b1 = torch.nn.Parameter(torch.zeros(seeds, 1, hp["hidden"]))
        self.w2, self.b2 = glorot(seeds, hp["hidden"], classes), torch.nn.Parameter(torch.zeros(seeds, 1, classes))

    def dropout(self, h: Tensor, site: str) -> Tensor:
        return F.dropout(h, self.hp["p_drop"], self.training) if site in self.hp["dropout_sites"] else h

    def forward(self) -> Tensor:
        n, beta = self.x.size(0), self.hp["beta"]
        if self.training and "input" in self.hp["dropout_sites"]:
            h = torch.bmm(sparse_dropout(self.x, self.hp["p_drop"], self.S), self.w1)
        else:
            h = seeds_first(torch.sparse.mm(self.x, side_by_side_weight(self.w1)), self.S)
        h = self.dropout(F.leaky_relu(h + self.b1, self.hp["leak_slope"]), "hidden")
        z = torch.bmm(h, self.w2) + self.b2
        probs = z.softmax(-1)
        similarity = (probs[:, self.source] * probs[:, self.target]).sum(-1)  # [S, E]
        transition = softmax(similarity, self.source, num_nodes=n, dim=1).unsqueeze(-1)
        with torch.no_grad():
            gamma = beta + (1 - beta) * similarity.new_zeros(self.S, n).index_add_(1, self.source, similarity) / self.degree
        z = self.dropout(z, "logits")
        diffused = z
        for _ in range(self.hp["K"]):
            diffused = torch.zeros_like(z).index_add_(1, self.target, diffused[:, self.source] * transition)
        self.entropy = -(probs * torch.log(probs + ENTROPY_EPS)).sum(-1).mean(1)
        return (1 - gamma.unsqueeze(-1)) * z + gamma.unsqueeze(-1) * diffused

    def penalty(self) -> Tensor:
        return self.hp["lambda_ent"] * self.entropy.sum()


def side_by_side_weight(w: Tensor) -> Tensor:
    """[S, F, D] -> [F, S x D]."""
    return w.transpose(0, 1).reshape(w.size(1), -1)


class ExampleUNet(torch.nn.Module):
    """PyG's examples/graph_unet.py ``Net``, as written there: edge dropout, dropout on the dense
    features, GraphUNet(depth 3, pooling ratios 2000/N then 0.5). One seed: [1, N, C]."""

    def __init__(self, x: Tensor, edge_index: Tensor, hp: dict, classes: int):
        super().__init__()
        self.x, self.edge_index, self.hp = x, edge_index, hp
        ratios = [min(1.0, 2000 / x.size(0)), 0.5]
        self.unet = GraphUNet(x.size(1), hp["hidden"], classes, depth=hp["depth"], pool_ratios=ratios)

    def forward(self) -> Tensor:
        edge_index, _ = dropout_edge(self.edge_index, p=self.hp["edge_drop"], force_undirected=True,
                                     training=self.training)
        x = F.dropout(self.x, p=self.hp["p_drop"], training=self.training)
        return self.unet(x, edge_index).unsqueeze(0)


class ExampleAGNN(torch.nn.Module):
    """PyG's examples/agnn.py ``Net``, as written there: dropout, Linear, ReLU, AGNNConv
    (fixed), AGNNConv (learned), dropout, Linear. One seed: [1, N, C]."""

    def __init__(self, x: Tensor, edge_index: Tensor, hp: dict, classes: int):
        super().__init__()
        self.x, self.edge_index, self.p = x, edge_index, hp["p_drop"]
        self.lin1 = torch.nn.Linear(x.size(1), hp["hidden"])
        self.prop1, self.prop2 = AGNNConv(requires_grad=False), AGNNConv(requires_grad=True)
        self.lin2 = torch.nn.Linear(hp["hidden"], classes)

    def forward(self) -> Tensor:
        x = F.dropout(self.x, p=self.p, training=self.training)
        x = F.relu(self.lin1(x))
        x = self.prop2(self.prop1(x, self.edge_index), self.edge_index)
        x = F.dropout(x, p=self.p, training=self.training)
        return self.lin2(x).unsqueeze(0)


# PyG's examples of the baselines trained one seed at a time: their yardstick at one seed
EXAMPLES = {"graph_unet": ExampleUNet, "agnn": ExampleAGNN}


def plain_network(method: str, graph: dict, hp: dict, seeds: int) -> torch.nn.Module | None:
    """The plain version of ``method`` (None: it has none yet); for a method of ``EXAMPLES``,
    PyG's example (one seed only)."""
    x, classes = graph["x"].coalesce(), graph["num_classes"]
    if method == "cadnet":
        return PlainCADNet(x, graph["edge_index"], hp, classes, seeds)
    if method in EXAMPLES:
        if seeds != 1:
            return None
        return EXAMPLES[method](x.to_dense(), remove_self_loops(graph["edge_index"])[0], hp, classes)
    if method == "gcn" and hp.get("layers", 2) == 2:
        return PlainGCN(x, gcn_adjacency(graph), hp["hidden"], classes, hp["p_drop"], seeds)
    if method == "gdc":
        _, edge_index, weight = baseline_inputs(graph, "gdc", hp)
        return PlainGCN(x, csr(edge_index, weight, x.size(0)), hp["hidden"], classes, hp["p_drop"], seeds)
    if method == "sgc":
        return PlainSGC(x, gcn_adjacency(graph), hp["K"], classes, seeds)
    if method == "appnp":
        return PlainAPPNP(x, gcn_adjacency(graph), hp["hidden"], classes, hp["p_drop"], hp["K"], hp["ppr_alpha"], seeds)
    n, edge_index = x.size(0), remove_self_loops(graph["edge_index"])[0]
    if method == "cheb":
        index, weight = gcn_norm(edge_index, num_nodes=n, add_self_loops=False)
        return PlainCheb(x, csr(index, -weight, n), hp["hidden"], classes, hp["K"], hp["p_drop"], seeds)
    if method == "sage" and hp.get("layers", 2) == 2:
        degree = torch.bincount(edge_index[1], minlength=n).float()
        mean = csr(edge_index, 1.0 / degree[edge_index[1]], n)
        return PlainSAGE(x, mean, hp["hidden"], classes, hp["p_drop"], seeds)
    if method == "jknet":
        return PlainJK(x, gcn_adjacency(graph), hp["hidden"], classes, hp["p_drop"], hp["layers"], seeds)
    if method in ("mixhop", "mixhop_l2"):
        return PlainMixHop(x, gcn_adjacency(graph), hp, classes, seeds)
    if method == "gat" and hp.get("layers", 2) == 2:
        return PlainGAT(x, edge_index, hp["hidden"], hp["heads"], hp["output_heads"], classes, hp["p_drop"], seeds)
    return None


def seeded_network(method: str, graph: dict, hp: dict, seeds: int, device: torch.device) -> torch.nn.Module | None:
    """The plain version of ``method`` on ``device``, seeded as the pipeline's loop seeds its
    first seed: its weights after ``torch.manual_seed(0)``, its dropout draws from that seed's
    stream after them. A one-seed network then follows the same trajectory as ours, whose cost
    changes as it trains: Graph U-Net's pooling picks other nodes as it learns, and the eval
    pass's two-hop graph grows with their degrees (on Cora, 5 epochs from one stream took 1.7x
    those from another)."""
    torch.manual_seed(0)
    net = plain_network(method, graph, hp, seeds)
    if net is not None:
        net.to(device)
        torch.manual_seed(0)
    return net


def time_plain(method: str, graph: dict, hp: dict, masks: tuple[Tensor, Tensor], epochs: int, seeds: int,
               device: torch.device) -> float | None:
    """ms per seed-epoch of the plain version of ``method`` on ``device`` over its first
    ``epochs`` epochs (:func:`seeded_network`), after a warm-up epoch of a network of its own
    (None: it has none)."""
    graph = {k: v.to(device) if isinstance(v, Tensor) else v for k, v in graph.items() if k != "_cache"}
    y, (train, val) = graph["y"], (m.to(device) for m in masks)

    def nll(log_probs: Tensor, rows: Tensor) -> Tensor:  # [S]: each seed's mean loss on ``rows``
        return -log_probs[:, rows].gather(2, y[rows].expand(seeds, -1).unsqueeze(2)).squeeze(2).mean(1)

    def run(epochs: int) -> float | None:
        net = seeded_network(method, graph, hp, seeds, device)
        if net is None:
            return None
        optimizer = torch.optim.Adam(net.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"], amsgrad=True)
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(epochs):
            net.train()
            optimizer.zero_grad()
            loss = nll(F.log_softmax(net(), -1), train).sum()
            (loss + net.penalty() if hasattr(net, "penalty") else loss).backward()
            optimizer.step()
            net.eval()
            with torch.no_grad():
                log_probs = F.log_softmax(net(), -1)
                nll(log_probs, val), (log_probs[:, val].argmax(-1) == y[val]).float().mean(1)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return 1000 * (time.perf_counter() - start) / epochs / seeds

    return None if run(1) is None else run(epochs)
