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


# The three parts of AdaCAD's operator (pipeline.model.AdaCAD) as CAD-Net has them.
ADACAD = {"transition": "cad", "propagation": "steps", "weighting": "adaptive"}
CADNET_BUILDER = "pipeline.model:build_cadnet"

REGISTRY: dict[str, Method] = {m.name: m for m in (
    # CAD-Net as the authors' code runs it (diffusion (T^T)^K Z): reproduces Table 2
    Method("cadnet", CADNET_BUILDER, ADACAD, label="CAD-Net (AdaCAD)"),
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

# Table 3's rows in the paper's order; AdaCAD is CAD-Net itself (the `cadnet` runs).
TABLE3_ROWS = ("rw", "rw_pull", "symna", "ppr", "hk", "gat_rw", "tf_rw", "cad", "cadnet")
