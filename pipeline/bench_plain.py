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
from torch_geometric.utils import dropout_edge, remove_self_loops

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
            nll(F.log_softmax(net(), -1), train).sum().backward()
            optimizer.step()
            net.eval()
            with torch.no_grad():
                log_probs = F.log_softmax(net(), -1)
                nll(log_probs, val), (log_probs[:, val].argmax(-1) == y[val]).float().mean(1)
        if device.type == "cuda":
            torch.cuda.synchronize()
        return 1000 * (time.perf_counter() - start) / epochs / seeds

    return None if run(1) is None else run(epochs)
