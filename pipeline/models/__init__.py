"""The methods: the AdaCAD operator and CAD-Net (:mod:`~pipeline.models.adacad`, batched in
:mod:`~pipeline.models.adacad_batched`), the baselines of Table 2
(:mod:`~pipeline.models.baselines`), the helpers that run S seeds of any network side by side
(:mod:`~pipeline.models.seeds`), and the registry they register into
(:mod:`~pipeline.models.registry`).

Importing this package imports every module in its folder, so a method registers by being a
file here: adding one touches no other module."""
import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")

from pipeline.models.registry import REGISTRY, TABLE3_ROWS, registered_baselines, with_variants_beside  # noqa: E402, F401

BASELINES = registered_baselines()  # Table 2's baselines, in the order registered (the paper's)
