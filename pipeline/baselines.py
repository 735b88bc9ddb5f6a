"""The baselines of Table 2, each built from PyG's own layers and trained by the same loop as
CAD-Net (:func:`pipeline.train.train_chunk`: same seeds, same splits, same protocol).

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

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.func import functional_call, stack_module_state, vmap
from torch_geometric.data import Data
from torch_geometric.nn import (APPNP, AGNNConv, ChebConv, GATConv, GCNConv, GraphUNet, JumpingKnowledge,
                                MixHopConv, SAGEConv, SGConv)
from torch_geometric.transforms import GDC
from torch_geometric.utils import dropout_edge, remove_self_loops

from pipeline.batched import BatchedCADNet
from pipeline.model import CADNetOutput


class TwoLayer(torch.nn.Module):
    """conv -> ReLU -> dropout -> conv: GCN, ChebNet and GraphSAGE in PyG's benchmark/citation
    scripts (gcn.py, cheb.py; SAGE as Shchur et al. run it)."""

    def __init__(self, conv1: torch.nn.Module, conv2: torch.nn.Module, p_drop: float):
        super().__init__()
        self.conv1, self.conv2, self.p_drop = conv1, conv2, p_drop

    def forward(self, x, edge_index, edge_weight=None):
        x = F.relu(self._conv(self.conv1, x, edge_index, edge_weight))
        x = F.dropout(x, self.p_drop, self.training)
        return self._conv(self.conv2, x, edge_index, edge_weight)

    @staticmethod
    def _conv(conv, x, edge_index, edge_weight):
        return conv(x, edge_index) if edge_weight is None else conv(x, edge_index, edge_weight)


class GAT(torch.nn.Module):
    """PyG benchmark/citation gat.py: dropout, GATConv (8 heads), ELU, dropout, GATConv."""

    def __init__(self, in_features, classes, hp):
        super().__init__()
        p = hp["p_drop"]
        self.conv1 = GATConv(in_features, hp["hidden"], heads=hp["heads"], dropout=p)
        self.conv2 = GATConv(hp["hidden"] * hp["heads"], classes, heads=hp["output_heads"], concat=False, dropout=p)
        self.p_drop = p

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, self.p_drop, self.training)
        return self.conv2(x, edge_index)


class APPNPNet(torch.nn.Module):
    """PyG benchmark/citation appnp.py: dropout, Linear, ReLU, dropout, Linear, APPNP(K, alpha)."""

    def __init__(self, in_features, classes, hp):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_features, hp["hidden"])
        self.lin2 = torch.nn.Linear(hp["hidden"], classes)
        self.prop = APPNP(hp["K"], hp["ppr_alpha"])
        self.p_drop = hp["p_drop"]

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        x = F.relu(self.lin1(x))
        x = F.dropout(x, self.p_drop, self.training)
        return self.prop(self.lin2(x), edge_index)


class SGC(torch.nn.Module):
    """PyG benchmark/citation sgc.py: one SGConv (K propagation steps, then a linear map),
    cached as there: the propagated features do not depend on the weights."""

    def __init__(self, in_features, classes, hp):
        super().__init__()
        self.conv = SGConv(in_features, classes, K=hp["K"], cached=True)

    def forward(self, x, edge_index, edge_weight=None):
        return self.conv(x, edge_index)


class AGNN(torch.nn.Module):
    """PyG examples/agnn.py: dropout, Linear, ReLU, AGNNConv (fixed), AGNNConv (learned),
    dropout, Linear."""

    def __init__(self, in_features, classes, hp):
        super().__init__()
        self.lin1 = torch.nn.Linear(in_features, hp["hidden"])
        self.prop1 = AGNNConv(requires_grad=False)
        self.prop2 = AGNNConv(requires_grad=True)
        self.lin2 = torch.nn.Linear(hp["hidden"], classes)
        self.p_drop = hp["p_drop"]

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        x = F.relu(self.lin1(x))
        x = self.prop2(self.prop1(x, edge_index), edge_index)
        x = F.dropout(x, self.p_drop, self.training)
        return self.lin2(x)


class JKNet(torch.nn.Module):
    """JK-Net (Xu et al. 2018): ``layers`` GCN layers, their outputs concatenated
    (JumpingKnowledge "cat"), then a linear classifier."""

    def __init__(self, in_features, classes, hp):
        super().__init__()
        sizes = [in_features] + [hp["hidden"]] * hp["layers"]
        self.convs = torch.nn.ModuleList(GCNConv(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.jump = JumpingKnowledge("cat")
        self.lin = torch.nn.Linear(hp["hidden"] * hp["layers"], classes)
        self.p_drop = hp["p_drop"]

    def forward(self, x, edge_index, edge_weight=None):
        outs = []
        for conv in self.convs:
            x = F.dropout(F.relu(conv(x, edge_index)), self.p_drop, self.training)
            outs.append(x)
        return self.lin(self.jump(outs))


class MixHop(torch.nn.Module):
    """MixHop (Abu-El-Haija et al. 2019) with PyG's MixHopConv, powers 0, 1, 2: input dropout,
    ``layers`` MixHop layers with tanh, then a linear classifier (DGL's example of the
    original settings)."""

    def __init__(self, in_features, classes, hp):
        super().__init__()
        sizes = [in_features] + [3 * hp["hidden"]] * hp["layers"]
        self.convs = torch.nn.ModuleList(MixHopConv(a, hp["hidden"], powers=[0, 1, 2]) for a in sizes[:-1])
        self.lin = torch.nn.Linear(3 * hp["hidden"], classes)
        self.p_drop = hp["p_drop"]

    def forward(self, x, edge_index, edge_weight=None):
        x = F.dropout(x, self.p_drop, self.training)
        for conv in self.convs:
            x = torch.tanh(conv(x, edge_index))
        return self.lin(x)


class UNet(torch.nn.Module):
    """PyG examples/graph_unet.py: edge dropout, feature dropout, GraphUNet (depth 3, pooling
    ratios 2000/N then 0.5)."""

    def __init__(self, in_features, classes, hp, num_nodes):
        super().__init__()
        ratios = [min(1.0, 2000 / num_nodes), 0.5]
        self.unet = GraphUNet(in_features, hp["hidden"], classes, depth=hp["depth"], pool_ratios=ratios)
        self.edge_drop, self.p_drop = hp["edge_drop"], hp["p_drop"]

    def forward(self, x, edge_index, edge_weight=None):
        edge_index, _ = dropout_edge(edge_index, p=self.edge_drop, force_undirected=True, training=self.training)
        x = F.dropout(x, self.p_drop, self.training)
        return self.unet(x, edge_index)


def make_network(name: str, in_features: int, classes: int, hp: dict, num_nodes: int) -> torch.nn.Module:
    """One seed's network of baseline ``name`` (the registry entry's ``fixed["baseline"]``)."""
    h, p = hp.get("hidden"), hp.get("p_drop", 0.0)
    if name == "gcn":
        return TwoLayer(GCNConv(in_features, h), GCNConv(h, classes), p)
    if name == "gdc":  # GCN on GDC's weighted graph, already normalised by the transform
        return TwoLayer(GCNConv(in_features, h, normalize=False), GCNConv(h, classes, normalize=False), p)
    if name == "cheb":
        return TwoLayer(ChebConv(in_features, h, hp["K"]), ChebConv(h, classes, hp["K"]), p)
    if name == "sage":
        return TwoLayer(SAGEConv(in_features, h), SAGEConv(h, classes), p)
    networks = {"gat": GAT, "appnp": APPNPNet, "sgc": SGC, "agnn": AGNN, "jknet": JKNet, "mixhop": MixHop}
    if name in networks:
        return networks[name](in_features, classes, hp)
    if name == "graph_unet":
        return UNet(in_features, classes, hp, num_nodes)
    raise ValueError(f"unknown baseline {name!r}")


class OneSeed(torch.nn.Module):
    """One baseline network bound to its inputs, answering the loop as CAD-Net's network does."""

    def __init__(self, model: torch.nn.Module, inputs: tuple):
        super().__init__()
        self.model, self.inputs = model, inputs

    def to(self, device):
        super().to(device)
        self.inputs = tuple(None if t is None else t.to(device) for t in self.inputs)
        return self

    def forward(self) -> CADNetOutput:
        log_probs = F.log_softmax(self.model(*self.inputs), dim=-1).unsqueeze(1)
        return _output(log_probs)


class SeedsSideBySide(torch.nn.Module):
    """S copies of one baseline network: parameters stacked along a first seed axis, run by
    one ``vmap`` over the shared inputs (each seed its own dropout masks)."""

    SEED_AXIS: dict = {}  # every stacked parameter has the seed axis first
    seed_slices = BatchedCADNet.seed_slices
    restore_seed_slices = BatchedCADNet.restore_seed_slices

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

    def forward(self) -> CADNetOutput:
        template = self._template[0].train(self.training)

        def one_seed(params):
            return F.log_softmax(functional_call(template, (params, self.buffers_by_name), self.inputs), dim=-1)

        log_probs = vmap(one_seed, randomness="different")(dict(zip(self.names, self.stacked)))
        return _output(log_probs.transpose(0, 1))  # [S, N, C] -> [N, S, C]


def _output(log_probs: Tensor) -> CADNetOutput:
    """Baselines add no loss term and have no adaptive weight (gamma reported as 1)."""
    num_nodes, S = log_probs.shape[:2]
    return CADNetOutput(log_probs, log_probs.new_zeros(S), log_probs.new_ones(num_nodes, S))


def baseline_inputs(graph: dict, name: str, hp: dict) -> tuple:
    """Dense features, the graph without added self-loops, and (GDC) the rewired graph's weights."""
    x = graph["x"].to_dense()
    edge_index, _ = remove_self_loops(graph["edge_index"])
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
    if batched:
        return SeedsSideBySide(models, inputs)
    if len(models) != 1:
        raise ValueError("a baseline's reference network trains one seed at a time")
    return OneSeed(models[0], inputs)
