"""The methods: the AdaCAD operator and CAD-Net (:mod:`~pipeline.models.adacad`, batched in
:mod:`~pipeline.models.adacad_batched`), the baselines of Table 2
(:mod:`~pipeline.models.baselines`), the helpers that run S seeds of any network side by side
(:mod:`~pipeline.models.seeds`), and the registry they register into
(:mod:`~pipeline.models.registry`).

``from pipeline.models import REGISTRY`` (or ``BASELINES``) imports every module of this folder
first, so a method registers by being a file here: adding one touches no other module. Those
modules import torch, which the stages that name no method (download, evaluate) do without: the
registry is loaded on first use, not when the package is imported."""
import functools
import importlib
import pkgutil

from pipeline.models import registry as _registry


@functools.cache
def _load_every_method() -> None:
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


def __getattr__(name: str):
    if name == "REGISTRY":
        _load_every_method()
        return _registry.REGISTRY
    if name == "BASELINES":  # Table 2's baselines, in the order registered (the paper's)
        _load_every_method()
        return _registry.registered_baselines()
    if name in ("TABLE3_ROWS", "with_variants_beside"):
        return getattr(_registry, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
