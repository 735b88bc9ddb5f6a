"""The methods: every entry of the registry with its typed settings
(:mod:`~pipeline.models.methods`), the AdaCAD operator and CAD-Net
(:mod:`~pipeline.models.adacad`, batched in :mod:`~pipeline.models.adacad_batched`), the
baselines of Table 2 (:mod:`~pipeline.models.baselines`, sparse in
:mod:`~pipeline.models.sparse_baselines`), the helpers that run S seeds of any network side by
side (:mod:`~pipeline.models.seeds`), and the registry itself (:mod:`~pipeline.models.registry`).

``from pipeline.models import REGISTRY`` (or ``BASELINES``) loads the registry on first use:
methods.py, which imports no torch, then every other file of this folder but the networks'
modules, so that a method added as one file (its network and its decorator) registers itself.
The check stage and the reports read the registry without loading torch and PyG; a cell's
build imports its network's module."""
import functools
import importlib
import pkgutil

from pipeline.models import registry as _registry


# The modules of the shipped methods' networks: their entries (methods.py) name them, and a
# build imports them; the registry loads without them, so without torch.
NETWORK_MODULES = ("adacad", "adacad_batched", "baselines", "seeds", "sparse_baselines")


@functools.cache
def _load_every_method() -> None:
    importlib.import_module(f"{__name__}.methods")
    for module in pkgutil.iter_modules(__path__):  # a method added as one file registers itself
        if module.name not in (*NETWORK_MODULES, "methods", "registry"):
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
