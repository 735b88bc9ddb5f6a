"""The method registry: every method the pipeline trains is one entry here.

An entry says how to build the method's network for S seeds at once (the one training loop in
:mod:`pipeline.train` does the rest), which hyperparameters define it (``fixed``, applied on
top of the dataset's row of CAD-Net's table in ``params.yaml``), which hyperparameters of its
own it reads from ``params.yaml``'s ``method_hparams.<name>``, and which row of the paper it
is compared with (``pipeline/paper_results.yaml``). The network returns its own loss terms,
so the loop knows nothing about any one method.

Adding a method: one entry here, its own keys (if any) under ``method_hparams`` in
``params.yaml``, its paper numbers in ``paper_results.yaml``, and its name in a ``methods``
list. This module imports no torch, so the light stages (stats, plot) can read it.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Method:
    name: str
    builder: str  # "module:function" with signature (graph, hp, seeds, batched) -> network
    fixed: dict = field(default_factory=dict)  # hyperparameters that define the method
    own_keys: tuple[str, ...] = ()  # its own hyperparameters, from method_hparams.<name>
    paper: tuple[str, str] = ("table2", "cadnet")  # its row in paper_results.yaml
    batched: bool = True  # False: its network is built for one seed and trained seed by seed
    label: str = ""  # how the paper's tables name it
    # False: batched, a seed's dropout masks come from its chunk's stream (torch.func.vmap), so
    # the chunk size is part of what its result records
    chunk_independent: bool = True
    # the keys of CAD-Net's table (params.yaml hparams.<dataset>) it reads; None: all of them.
    # The baselines read the protocol's only: their model settings are their own keys.
    table_keys: tuple[str, ...] | None = None
    # whose own keys it reads (params.yaml method_hparams.<hparams_of>); "": its own name's.
    # Keys of that entry which this one fixes are left to ``fixed``.
    hparams_of: str = ""
    # The version of what its network computes (pipeline.engine.spec): bump it when a change to its
    # builder or the modules it uses moves its numbers; tests/test_golden.py holds it to that.
    version: int = 1
    # the setting that is its range in hops, which the ranges study's grid key `range` sets
    # (Tables B.12-B.14: "for Cheby, K-th order of Chebyshev polynomials; for GCN, SAGE, JK, and
    # GAT, additional layers before the last layer; for SGC, AGNN, APPNP, and CAD-Net,
    # increased propagation steps"); "": it has none. Its network reads a key absent from its
    # settings as its Table 2 value (2 layers, 2 propagation layers).
    range_key: str = ""


# The three parts of AdaCAD's operator (pipeline.models.adacad.AdaCAD) as CAD-Net has them.
ADACAD = {"transition": "cad", "propagation": "steps", "weighting": "adaptive"}
CADNET_BUILDER = "pipeline.models.adacad:build_cadnet"

REGISTRY: dict[str, Method] = {m.name: m for m in (
    # CAD-Net as the authors' code runs it (diffusion (T^T)^K Z): reproduces Table 2
    Method("cadnet", CADNET_BUILDER, ADACAD, label="CAD-Net (AdaCAD)", range_key="K"),
    # the paper's Eq. (6) direction, T^K Z, reported beside it
    Method("cadnet_pull", CADNET_BUILDER, {**ADACAD, "direction": "pull"}, label="CAD-Net, Eq. 6 direction"),
    # Table 3: only the aggregation changes inside the same network and hyperparameters
    Method("rw", CADNET_BUILDER, {"transition": "rw", "propagation": "steps", "weighting": "none"},
           paper=("table3", "rw"), label="RW"),
    # RW diffusing as the paper's Eq. (6) does, Z <- T Z (the rows above diffuse as CAD-Net's
    # code does, Z <- T^T Z); the paper's Table 3 does not say which its RW used
    Method("rw_pull", CADNET_BUILDER, {"transition": "rw", "propagation": "steps", "weighting": "none",
                                       "direction": "pull"}, paper=("table3", "rw"), label="RW, Eq. 6 direction"),
    Method("symna", CADNET_BUILDER, {"transition": "symna", "propagation": "steps", "weighting": "none"},
           paper=("table3", "symna"), label="symNA"),
    Method("ppr", CADNET_BUILDER, {"transition": "symna", "propagation": "ppr", "weighting": "none"},
           own_keys=("ppr_alpha", "diffusion_topk"), paper=("table3", "ppr"), label="PPR"),
    Method("hk", CADNET_BUILDER, {"transition": "symna", "propagation": "heat", "weighting": "none"},
           own_keys=("heat_t", "diffusion_topk"), paper=("table3", "hk"), label="HK"),
    Method("gat_rw", CADNET_BUILDER, {"transition": "gat", "propagation": "steps", "weighting": "none"},
           own_keys=("attention_slope",), paper=("table3", "gat_rw"), label="GAT+RW"),
    Method("tf_rw", CADNET_BUILDER, {"transition": "tf", "propagation": "steps", "weighting": "none"},
           paper=("table3", "tf_rw"), label="TF+RW"),
    Method("cad", CADNET_BUILDER, {**ADACAD, "beta": 1.0}, paper=("table3", "cad"), label="CAD"),
    # appendix B.3: CAD-Net trained without the entropy regulariser
    Method("cadnet_noent", CADNET_BUILDER, {**ADACAD, "lambda_ent": 0.0},
           paper=("tableB3", "cadnet_noent"), label="CAD-Net w/o entropy"),
)}

# The baselines of Table 2 (pipeline/models/baselines.py), each with its published settings in
# params.yaml (method_hparams.<name>, with sources), trained by the same loop on the same seeds
# and splits. The split protocol is CAD-Net's table's; the lr is not dropped.
BASELINE_BUILDER = "pipeline.models.baselines:build_baseline"
PROTOCOL_KEYS = ("self_loops", "normalize_features", "split", "train_per_class", "val_per_class", "lr_drop_every",
                 "lr_drop_factor")
TRAINING_KEYS = ("hidden", "p_drop", "lr", "weight_decay", "epochs", "early_stop_window")


# MixHop's widths are per power (own keys), so it has no one `hidden`; SGC has no hidden layer
NOT_READ = {"sgc": ("hidden", "p_drop"), "mixhop": ("hidden",)}


def _baseline(name: str, label: str, own: tuple[str, ...] = (), batched: bool = True, range_key: str = "") -> Method:
    keys = tuple(k for k in TRAINING_KEYS if k not in NOT_READ.get(name, ())) + own
    return Method(name, BASELINE_BUILDER, {"baseline": name, "lr_drop_every": 0}, own_keys=keys, paper=("table2", name),
                  batched=batched, label=label, chunk_independent=False, table_keys=PROTOCOL_KEYS, range_key=range_key)


def _baseline_as(base: Method, name: str, label: str, fixed: dict) -> Method:
    """The baseline ``base`` with ``fixed`` values in place of its own keys of those names: the
    same network, loop and paper row, reading the rest from ``method_hparams.<base>``."""
    return Method(name, base.builder, {**base.fixed, **fixed}, own_keys=tuple(k for k in base.own_keys if k not in fixed),
                  paper=base.paper, batched=base.batched, label=label, chunk_independent=base.chunk_independent,
                  table_keys=base.table_keys, hparams_of=base.name, version=base.version)


REGISTRY.update({m.name: m for m in (
    _baseline("cheb", "Cheby", ("K",), range_key="K"),
    _baseline("gcn", "GCN", range_key="layers"),
    _baseline("sage", "SAGE", range_key="layers"),
    _baseline("jknet", "JK", ("layers",), range_key="layers"),
    _baseline("mixhop", "MixHop", ("input_drop", "hidden_per_power", "output_per_power", "kernel_l2", "kernel_lasso",
                                   "optimizer", "lr_decrement_every", "lr_decrement")),
    _baseline("sgc", "SGC", ("K",), range_key="K"),
    # AGNNConv's attention softmax does not run under torch.func.vmap (PyG 2.8.1's scatter
    # broadcast fails on a batched 1-D alpha): seed by seed
    _baseline("agnn", "AGNN", batched=False, range_key="prop_layers"),
    _baseline("gat", "GAT", ("heads", "output_heads"), range_key="layers"),
    # top-k pooling keeps a different node set per seed: no stacked form
    _baseline("graph_unet", "U-Nets", ("depth", "edge_drop"), batched=False),
    _baseline("appnp", "APPNP", ("K", "ppr_alpha"), range_key="K"),
    _baseline("gdc", "GDC", ("ppr_alpha", "diffusion_topk")),
)})
BASELINES = ("cheb", "gcn", "sage", "jknet", "mixhop", "sgc", "agnn", "gat", "graph_unet", "appnp", "gdc")

# MixHop as its authors' scripts were tuned: their train_<dataset>.sh (May 2019) ran a trainer
# whose kernels carried L2 alone (keras l2(l2reg)); the per-unit lasso came with their NGCN code
# (June 2019), as CombinedRegularizer(l2reg, l2reg), while the new --lasso_reg flag (default 0)
# went unused. `mixhop` runs the code as it stands; this entry the code the scripts were run with.
REGISTRY["mixhop_l2"] = _baseline_as(REGISTRY["mixhop"], "mixhop_l2", "MixHop, L2 only (May 2019 code)",
                                     {"kernel_lasso": 0.0})


def with_variants_beside(rows: tuple[str, ...], table: str, ran: set[str]) -> list[str]:
    """``rows``, each followed by the methods of ``ran`` outside them that are compared with its
    row of the paper's ``table``: a variant reported beside it (``mixhop_l2`` after ``mixhop``)."""
    return [name for row in rows for name in (row, *(m for m in REGISTRY if m not in rows and m in ran
                                                     and REGISTRY[m].paper == (table, row)))]


# Table 3's rows in the paper's order; AdaCAD is CAD-Net itself (the `cadnet` runs).
TABLE3_ROWS = ("rw", "rw_pull", "symna", "ppr", "hk", "gat_rw", "tf_rw", "cad", "cadnet")
