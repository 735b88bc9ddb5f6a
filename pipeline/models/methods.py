"""Every method the pipeline trains, as the registry holds it: its typed settings (the schema of
its keys in params.yaml, as nanoGPT's ``GPTConfig``) and its entry (label, paper row, what it
fixes, its range setting, its version), each registered here beside its settings.

The networks live in the modules the entries name (:mod:`~pipeline.models.adacad`,
:mod:`~pipeline.models.baselines`, :mod:`~pipeline.models.sparse_baselines`), imported when a
cell is built. This module imports no torch, as a model's configuration module does not in
Hugging Face's transformers: the check stage names a bad value of params.yaml, and the report
stages draw, without loading torch and PyG.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial

from pipeline.models.registry import choice, integer, number, register, register_as, setting

# ---------------------------------------------------------------------------- CAD-Net and its variants

CADNET = "pipeline.models.adacad:build_cadnet"  # the network every CAD-Net entry builds
# The three parts of AdaCAD's operator (:class:`~pipeline.models.adacad.AdaCAD`) as CAD-Net has them.
ADACAD = {"transition": "cad", "propagation": "steps", "weighting": "adaptive"}
# The settings whose value may differ between the replicas of one batch (the batched network's
# ``per_replica``): they change no parameter's shape, only a scalar of the forward pass.
REPLICA_SETTINGS = ("beta", "lambda_ent", "p_drop")


@dataclass(frozen=True, kw_only=True)
class PPRSettings:
    """Table 3's PPR: GDC's personalised-PageRank closed form, top-k sparsified."""

    ppr_alpha: float = setting(number(0, 1, low_open=True, high_open=True))
    diffusion_topk: int = setting(integer(1))


@dataclass(frozen=True, kw_only=True)
class HeatSettings:
    """Table 3's HK: GDC's heat-kernel closed form, top-k sparsified."""

    heat_t: float = setting(number(0, math.inf, low_open=True))
    diffusion_topk: int = setting(integer(1))


@dataclass(frozen=True, kw_only=True)
class GATTransitionSettings:
    """Table 3's GAT+RW: GAT's attention as the transition."""

    attention_slope: float = setting(number(0, math.inf))


def variant(name: str, **entry) -> None:
    """Registers ``name``: CAD-Net's network with the aggregation's parts that ``entry`` fixes."""
    register(name, builder=CADNET, replica_settings=REPLICA_SETTINGS, **entry)


# CAD-Net as the authors' code runs it (diffusion (T^T)^K Z): reproduces Table 2
variant("cadnet", fixed=ADACAD, label="CAD-Net (AdaCAD)", range_key="K")
# The paper's Eq. (6) direction, T^K Z, reported beside CAD-Net
variant("cadnet_pull", fixed={**ADACAD, "direction": "pull"}, label="CAD-Net, Eq. 6 direction")
# Table 3: only the aggregation changes inside the same network and hyperparameters
variant("rw", fixed={"transition": "rw", "propagation": "steps", "weighting": "none"}, paper=("table3", "rw"),
        label="RW")
# RW diffusing as the paper's Eq. (6) does, Z <- T Z (the rows above diffuse as CAD-Net's code
# does, Z <- T^T Z); the paper's Table 3 does not say which its RW used
variant("rw_pull", fixed={"transition": "rw", "propagation": "steps", "weighting": "none", "direction": "pull"},
        paper=("table3", "rw"), label="RW, Eq. 6 direction")
variant("symna", fixed={"transition": "symna", "propagation": "steps", "weighting": "none"},
        paper=("table3", "symna"), label="symNA")
variant("ppr", fixed={"transition": "symna", "propagation": "ppr", "weighting": "none"}, settings=PPRSettings,
        paper=("table3", "ppr"), label="PPR")
variant("hk", fixed={"transition": "symna", "propagation": "heat", "weighting": "none"}, settings=HeatSettings,
        paper=("table3", "hk"), label="HK")
variant("gat_rw", fixed={"transition": "gat", "propagation": "steps", "weighting": "none"},
        settings=GATTransitionSettings, paper=("table3", "gat_rw"), label="GAT+RW")
variant("tf_rw", fixed={"transition": "tf", "propagation": "steps", "weighting": "none"}, paper=("table3", "tf_rw"),
        label="TF+RW")
variant("cad", fixed={**ADACAD, "beta": 1.0}, paper=("table3", "cad"), label="CAD")
# appendix B.3: CAD-Net trained without the entropy regulariser
variant("cadnet_noent", fixed={**ADACAD, "lambda_ent": 0.0}, paper=("tableB3", "cadnet_noent"),
        label="CAD-Net w/o entropy")


# ---------------------------------------------------------------------------- the baselines of Table 2

BASELINE = "pipeline.models.baselines:build_baseline"  # the builder of every baseline's networks
# The keys of CAD-Net's table (params.yaml hparams.<dataset>) a baseline reads: the protocol
# (graph, features, split, no lr drop); its model and training settings are its own.
PROTOCOL_KEYS = ("self_loops", "normalize_features", "split", "train_per_class", "val_per_class", "lr_drop_every",
                 "lr_drop_factor")
# A baseline's two implementations (its ``implementation`` setting): PyG's network run by vmap,
# or the sparse batched network of :mod:`pipeline.models.sparse_baselines`
IMPLEMENTATIONS = ("vmap", "sparse")
# The version of each sparse network (pipeline.engine.spec; the vmapped one is version 1): bump
# it when a change moves that network's numbers. SGC 2: the propagated features computed once.
SPARSE_VERSIONS = {"gcn": 1, "sgc": 2, "appnp": 1, "gdc": 1, "cheb": 1, "sage": 1, "jknet": 1, "gat": 1, "agnn": 1,
                   "graph_unet": 1}
# SGC's orders of products (its ``product_order`` setting; sparse_baselines.SparseSGC)
PRODUCT_ORDERS = ("propagated_first", "weights_first")
# MixHop's widths: one per power 0, 1, 2 (0 leaves the power out)
WIDTHS_PER_POWER = (lambda v: isinstance(v, list) and len(v) == 3 and sum(v) > 0
                    and all(isinstance(w, int) and not isinstance(w, bool) and w >= 0 for w in v),
                    "3 integers >= 0 (powers 0, 1, 2), not all 0")


@dataclass(frozen=True, kw_only=True)
class Training:
    """What every baseline's block (params.yaml ``method_hparams.<name>``) sets for the loop;
    the values each must keep are those of CAD-Net's table."""

    lr: float = setting()
    weight_decay: float = setting()
    epochs: int = setting()
    early_stop_window: int = setting()


@dataclass(frozen=True, kw_only=True)
class Hidden(Training):
    """A network with one hidden width and one dropout probability."""

    hidden: int = setting()
    p_drop: float = setting()


@dataclass(frozen=True, kw_only=True)
class Sparse:
    """A network which also has the sparse batched implementation
    (:mod:`pipeline.models.sparse_baselines`). ``vmap``, the default, is the one its cells
    without the key were trained with: PyG's network, its seeds sharing their chunk's dropout
    stream under ``vmap`` (AGNN's, which ``vmap`` cannot run: one seed at a time)."""

    implementation: str = setting(choice(*IMPLEMENTATIONS), default="vmap")


def independent_of_chunk(hp: dict) -> bool:
    """Whether a baseline cell's seeds draw their dropout from streams of their own."""
    return hp.get("implementation", "vmap") == "sparse"


def network_version(name: str, hp: dict) -> int:
    """The version of baseline ``name``'s network in the implementation ``hp`` selects: the
    vmapped PyG network's is 1, the sparse network's its entry of ``SPARSE_VERSIONS``."""
    return SPARSE_VERSIONS[name] if independent_of_chunk(hp) else 1


@dataclass(frozen=True, kw_only=True)
class Layered(Hidden):
    """A stack of graph layers; the ranges study (Tables B.12-B.14) sets how many, Table 2's two
    where params.yaml does not."""

    layers: int = setting(integer(1, 64), default=2)


@dataclass(frozen=True, kw_only=True)
class ChebSettings(Sparse, Hidden):
    K: int = setting()  # the Chebyshev filter size (PyG's ChebConv K)


@dataclass(frozen=True, kw_only=True)
class JKSettings(Sparse, Hidden):
    layers: int = setting(integer(1, 64))


@dataclass(frozen=True, kw_only=True)
class MixHopSettings(Training):
    """MixHop as its authors' code builds and trains it."""

    p_drop: float = setting()
    input_drop: float = setting(number(0, 1, high_open=True))
    hidden_per_power: list = setting(WIDTHS_PER_POWER)
    output_per_power: list = setting(WIDTHS_PER_POWER)
    kernel_l2: float = setting(number(0, 1))
    kernel_lasso: float = setting(number(0, 1))
    optimizer: str = setting(choice("adam", "sgd"))
    lr_decrement_every: int = setting(integer(1))
    lr_decrement: float = setting(number(0, 1, high_open=True))


@dataclass(frozen=True, kw_only=True)
class SGCSettings(Sparse, Training):
    K: int = setting()
    # the sparse network's order of products (same function, other rounding): propagated_first,
    # A^K X once then one dense product a step; weights_first, the sparse features times the
    # weights then K sparse propagations a step, cheaper where every node is read and the
    # features are many (docs/notes.md, "The sparse implementation")
    product_order: str = setting(choice(*PRODUCT_ORDERS), default="propagated_first")


@dataclass(frozen=True, kw_only=True)
class GCNSettings(Sparse, Layered):
    """GCN: :class:`Layered`, and its sparse implementation."""


@dataclass(frozen=True, kw_only=True)
class SAGESettings(Sparse, Layered):
    """GraphSAGE: :class:`Layered`, and its sparse implementation."""


@dataclass(frozen=True, kw_only=True)
class AGNNSettings(Sparse, Hidden):
    prop_layers: int = setting(integer(1, 64), default=2)


@dataclass(frozen=True, kw_only=True)
class GATSettings(Sparse, Layered):
    heads: int = setting(integer(1))
    output_heads: int = setting(integer(1))


@dataclass(frozen=True, kw_only=True)
class UNetSettings(Hidden):
    depth: int = setting(integer(1, 16))
    edge_drop: float = setting(number(0, 1, high_open=True))
    # sparse: the features' stored entries only, dropout drawn on them and the first layer a
    # sparse product (baselines.UNet); vmap, the default, PyG's example's dense features. The
    # name is the other baselines' key; Graph U-Net trains one seed at a time in both.
    implementation: str = setting(choice(*IMPLEMENTATIONS), default="vmap")


@dataclass(frozen=True, kw_only=True)
class APPNPSettings(Sparse, Hidden):
    K: int = setting()
    ppr_alpha: float = setting(number(0, 1, low_open=True, high_open=True))


@dataclass(frozen=True, kw_only=True)
class GDCSettings(Sparse, Hidden):
    ppr_alpha: float = setting(number(0, 1, low_open=True, high_open=True))
    diffusion_topk: int = setting(integer(1))


def chebyshev_terms(r: int) -> int:
    """ChebNet's ``K`` at range r. Tables B.12-B.14 give Cheby's range as "K-th order of Chebyshev
    polynomials": a polynomial of order r in the Laplacian, r hops a layer, which PyG's ChebConv
    computes with K = r + 1 terms T_0 .. T_r. Cora's Table 2 network (PyG's run.sh: K 3) is then
    its range 2, as the paper's Table B.13 has it; CiteSeer's and PubMed's (K 2) are range 1."""
    return r + 1


def baseline(name: str, label: str, settings: type, batched: bool = True, range_key: str = "",
             range_value=None) -> None:
    """Registers the baseline ``name`` of Table 2, built by ``baselines.build_baseline`` (its
    one-seed network: ``baselines.NETWORKS[name]``) with its settings from
    ``method_hparams.<name>``; a network with the sparse implementation (its settings are
    :class:`Sparse`) is independent of its chunk there, and has that implementation's version
    (as has Graph U-Net's, its features sparse, which trains one seed at a time in both)."""
    sparse = issubclass(settings, Sparse)  # its sparse network is batched, each seed with streams of its own
    two_implementations = name in SPARSE_VERSIONS
    register(name, builder=BASELINE, fixed={"baseline": name, "lr_drop_every": 0}, settings=settings,
             paper=("table2", name), batched=batched, batched_if=independent_of_chunk if sparse else None, label=label,
             chunk_independent=independent_of_chunk if sparse else False,
             version=partial(network_version, name) if two_implementations else 1, table_keys=PROTOCOL_KEYS,
             range_key=range_key, range_value=range_value)


# In Table 2's order
baseline("cheb", "Cheby", ChebSettings, range_key="K", range_value=chebyshev_terms)
baseline("gcn", "GCN", GCNSettings, range_key="layers")
baseline("sage", "SAGE", SAGESettings, range_key="layers")
baseline("jknet", "JK", JKSettings, range_key="layers")
baseline("mixhop", "MixHop", MixHopSettings)
baseline("sgc", "SGC", SGCSettings, range_key="K")
baseline("agnn", "AGNN", AGNNSettings, batched=False, range_key="prop_layers")
baseline("gat", "GAT", GATSettings, range_key="layers")
baseline("graph_unet", "U-Nets", UNetSettings, batched=False)
baseline("appnp", "APPNP", APPNPSettings, range_key="K")
baseline("gdc", "GDC", GDCSettings)

# MixHop as its authors' scripts were tuned: their train_<dataset>.sh (May 2019) ran a trainer
# whose kernels carried L2 alone (keras l2(l2reg)); the per-unit lasso came with their NGCN code
# (June 2019), as CombinedRegularizer(l2reg, l2reg), while the new --lasso_reg flag (default 0)
# went unused. `mixhop` runs the code as it stands; this entry the code the scripts were run with.
register_as("mixhop", "mixhop_l2", "MixHop, L2 only (May 2019 code)", {"kernel_lasso": 0.0})
