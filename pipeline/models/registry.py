"""The method registry: every method the pipeline trains is one entry here, registered beside
its network by :func:`register` (as GraphGym's ``register.py`` does).

An entry says how to build the method's network for S seeds at once (the one training loop in
:mod:`pipeline.engine.loop` does the rest), which hyperparameters define it (``fixed``, applied
on top of the dataset's row of CAD-Net's table in ``params.yaml``), the typed schema of the
settings of its own that it reads from ``params.yaml``'s ``method_hparams.<name>``
(``settings``: a dataclass whose fields give their types, the rule a value must keep and the
defaults; as nanoGPT's ``GPTConfig``), and which row of the paper it is compared with
(``pipeline/paper_results.yaml``). The network returns its own loss terms, so the loop knows
nothing about any one method.

Adding a method: its network and one ``@register(...)`` (``@baseline(...)`` for a baseline of
Table 2) in a module of :mod:`pipeline.models`, its own keys (if any) under ``method_hparams``
in ``params.yaml``, its paper numbers in ``paper_results.yaml``, and its name in a study's
``methods`` list. Importing :mod:`pipeline.models` registers every method; this module itself
imports no torch.
"""
from __future__ import annotations

import dataclasses
import importlib
import math
from dataclasses import MISSING, dataclass, field
from typing import Any, Callable


# ---------------------------------------------------------------------------- typed settings


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    """A finite int or float (inf and nan are never a hyperparameter here)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def integer(low: int, high: int | None = None) -> tuple[Callable[[Any], bool], str]:
    """The rule of an integer setting in [low, high] (no upper bound: None)."""
    if high is None:
        return (lambda v: _is_int(v) and v >= low), f"an integer >= {low}"
    return (lambda v: _is_int(v) and low <= v <= high), f"an integer in [{low}, {high}]"


def number(low: float, high: float, low_open: bool = False, high_open: bool = False) -> tuple[Callable[[Any], bool], str]:
    """The rule of a number in the interval from ``low`` to ``high`` (``math.inf``: unbounded)."""
    def inside(v):
        return (_is_num(v) and (v > low if low_open else v >= low) and (v < high if high_open else v <= high))
    if high == math.inf:
        return inside, f"a number {'>' if low_open else '>='} {low:g}"
    interval = f"{'(' if low_open else '['}{low:g}, {high:g}{')' if high_open else ']'}"
    return inside, f"a number in {interval}"


def choice(*options: str) -> tuple[Callable[[Any], bool], str]:
    return (lambda v: v in options), f"one of {list(options)}"


def setting(rule: tuple[Callable[[Any], bool], str] | None = None, default: Any = MISSING):
    """A field of a method's settings schema: ``rule`` (check, what it allows) is the one a
    value in params.yaml must keep; None: the rule of the key of the same name in CAD-Net's
    table (``pipeline.config.TABLE_RULES``: lr, hidden, ...). With a ``default``, params.yaml may
    leave the key out: the cell's settings then do not hold it and its network uses the default
    (so a key added with the value every committed cell had keeps their specs)."""
    return field(default=default, metadata={"rule": rule})


def rules_of(schema: type) -> dict[str, tuple[Callable[[Any], bool], str] | None]:
    return {f.name: f.metadata.get("rule") for f in dataclasses.fields(schema)}


def from_settings(schema: type, hp: dict):
    """The typed settings of one cell: its values of the schema's fields, defaults for those it
    leaves out."""
    return schema(**{f.name: hp[f.name] for f in dataclasses.fields(schema) if f.name in hp})


# ---------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Method:
    name: str
    # "module:function" (or the function): (graph, hp, seeds, batched[, per_replica]) -> the
    # network of ``seeds``, ``hp`` the cell's settings; its module is imported on the first build
    builder: str | Callable
    fixed: dict = field(default_factory=dict)  # hyperparameters that define the method
    settings: type | None = None  # its own keys' schema (a dataclass of :func:`setting` fields)
    paper: tuple[str, str] = ("table2", "cadnet")  # its row in paper_results.yaml
    batched: bool = True  # False: its network is built for one seed and trained seed by seed
    # where not batched: a function of a cell's settings saying it is there (AGNN's sparse network)
    batched_if: Callable[[dict], bool] | None = None
    label: str = ""  # how the paper's tables name it
    # False: batched, a seed's dropout masks come from its chunk's stream (torch.func.vmap), so
    # the chunk size is part of what its result records; or a function of a cell's settings
    # saying so (a baseline with both implementations)
    chunk_independent: bool | Callable[[dict], bool] = True
    # the keys of CAD-Net's table (params.yaml hparams.<dataset>) it reads; None: all of them.
    # The baselines read the protocol's only: their model settings are their own keys.
    table_keys: tuple[str, ...] | None = None
    # whose own keys it reads (params.yaml method_hparams.<hparams_of>); "": its own name's.
    # Keys of that entry which this one fixes are left to ``fixed``.
    hparams_of: str = ""
    # The version of what its network computes (pipeline.engine.spec): bump it when a change to
    # its network or the modules it uses moves its numbers; tests/test_spec.py holds it to that.
    # Or a function of a cell's settings giving it (a baseline with two implementations, each
    # with its own version, so that a new one retrains only the cells that use it).
    version: int | Callable[[dict], int] = 1
    # the setting that is its range in hops, which the ranges study's grid key `range` sets
    # (Tables B.12-B.14: "for Cheby, K-th order of Chebyshev polynomials; for GCN, SAGE, JK, and
    # GAT, additional layers before the last layer; for SGC, AGNN, APPNP, and CAD-Net,
    # increased propagation steps"); "": it has none.
    range_key: str = ""
    # the value of ``range_key`` at range r, where it is not r itself (ChebNet's K: r + 1 terms)
    range_value: Callable[[int], int] | None = None
    # the settings its batched network takes one value per replica of (``build``'s
    # ``per_replica``), so that cells differing only in them (and in their splits) train in one
    # batch; needs ``chunk_independent`` (each replica draws from its own streams)
    replica_settings: tuple[str, ...] = ()

    def _fields(self, with_default: bool) -> tuple[str, ...]:
        if self.settings is None:
            return ()
        return tuple(f.name for f in dataclasses.fields(self.settings) if f.name not in self.fixed
                     and ((f.default is not MISSING) == with_default))

    def build(self, *args, **kwargs):
        """The network of a cell's seeds (:attr:`builder`'s arguments)."""
        builder = self.builder
        if isinstance(builder, str):
            module, function = builder.split(":")
            builder = getattr(importlib.import_module(module), function)
        return builder(*args, **kwargs)

    def batched_for(self, hp: dict) -> bool:
        """Whether a cell with settings ``hp`` trains its seeds as one batch."""
        return self.batched or (self.batched_if is not None and self.batched_if(hp))

    def setting_for_range(self, r: int) -> int:
        """The value of its ``range_key`` that gives range ``r``."""
        return r if self.range_value is None else self.range_value(r)

    def version_for(self, hp: dict) -> int:
        """The version of what its network computes for a cell with settings ``hp``."""
        return self.version(hp) if callable(self.version) else self.version

    def independent_of_chunk(self, hp: dict) -> bool:
        """Whether the seeds of a cell with settings ``hp`` draw from streams of their own."""
        return self.chunk_independent(hp) if callable(self.chunk_independent) else self.chunk_independent

    @property
    def own_keys(self) -> tuple[str, ...]:
        """The keys of its schema that params.yaml must set (those it fixes aside)."""
        return self._fields(with_default=False)

    @property
    def optional_keys(self) -> tuple[str, ...]:
        """The keys of its schema with a default: set in params.yaml or by a study, or left out."""
        return self._fields(with_default=True)


REGISTRY: dict[str, Method] = {}


def register(name: str, builder: str | Callable | None = None, **entry):
    """Registers method ``name``, built by ``builder`` (``entry``: the other fields of
    :class:`Method`). Without a builder, a decorator that registers the function it decorates:
    ``@register("mymethod", label=...)`` above the builder, in the method's own file."""
    if builder is None:
        def add(build: Callable) -> Callable:
            register(name, build, **entry)
            return build
        return add
    if name in REGISTRY:
        raise ValueError(f"method {name!r} is registered twice")
    REGISTRY[name] = Method(name, builder, **entry)


def register_as(base: str, name: str, label: str, fixed: dict, **entry) -> None:
    """Registers ``name``: method ``base`` with ``fixed`` values in place of its own keys of those
    names: the same network, loop and paper row, reading the rest from ``method_hparams.<base>``."""
    of = REGISTRY[base]
    REGISTRY[name] = dataclasses.replace(of, name=name, label=label, fixed={**of.fixed, **fixed},
                                         hparams_of=of.hparams_of or of.name, **entry)


def registered_baselines() -> tuple[str, ...]:
    """The baselines of Table 2, in the order they were registered (the paper's)."""
    return tuple(name for name, m in REGISTRY.items() if "baseline" in m.fixed and not m.hparams_of)


def with_variants_beside(rows: tuple[str, ...], table: str, ran: set[str]) -> list[str]:
    """``rows``, each followed by the methods of ``ran`` outside them that are compared with its
    row of the paper's ``table``: a variant reported beside it (``mixhop_l2`` after ``mixhop``)."""
    return [name for row in rows for name in (row, *(m for m in REGISTRY if m not in rows and m in ran
                                                     and REGISTRY[m].paper == (table, row)))]


# Table 3's rows in the paper's order; AdaCAD is CAD-Net itself (the `cadnet` runs).
TABLE3_ROWS = ("rw", "rw_pull", "symna", "ppr", "hk", "gat_rw", "tf_rw", "cad", "cadnet")
