"""Lazy package exports (PEP 562), so that a command imports only what it uses.

Every ``placer`` command imports every subcommand module to build its parser; if the package
``__init__`` files imported their submodules eagerly, ``placer get`` would load OR-Tools,
numpy and pandas (about 0.5 s and 70 MiB) for a listing. The heavy packages (the solver,
dispatch, simulation) therefore export their names through :func:`lazy_exports`: the
submodule is imported on first access. Type checkers see ordinary imports (under
``TYPE_CHECKING``), so nothing is lost for them.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType

__all__ = ["lazy_exports", "pandas_deferred"]


def lazy_exports(
    package: str, names: Sequence[str], modules: Sequence[str]
) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package``: each of ``names`` (its ``__all__``) is taken,
    on first access, from the first of ``modules`` that lists it in its own ``__all__``."""
    exported = frozenset(names)

    def attribute(name: str) -> object:
        if name not in exported:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        for dotted in modules:
            module = importlib.import_module(dotted)
            if name in getattr(module, "__all__", ()):
                value = getattr(module, name)
                # bind it on the package: importing a submodule named like the export (the
                # solver's ``verify``) has just set the package attribute to the submodule
                setattr(sys.modules[package], name, value)
                return value
        raise AttributeError(f"module {package!r}: no submodule exports {name!r}")

    return attribute


# --------------------------------------------------------------------------------------------
# OR-Tools' CP-SAT wrapper without pandas

#: pandas names ``ortools.sat.python.cp_model`` uses as types at import time (annotations,
#: ``Union``s); everything else of pandas is imported when first used.
_PANDAS_TYPES = ("DataFrame", "Index", "Series")


class _DeferredType(type):
    """A stand-in for a pandas class: ``isinstance`` answers without importing pandas (an
    object can only be a pandas one if pandas is loaded), calling it builds the real thing."""

    def __instancecheck__(cls, instance: object) -> bool:
        real = _loaded_pandas()
        return real is not None and isinstance(instance, getattr(real, cls.__name__))

    def __subclasscheck__(cls, subclass: type) -> bool:
        real = _loaded_pandas()
        return real is not None and issubclass(subclass, getattr(real, cls.__name__))

    def __call__(cls, *args: object, **kwargs: object) -> object:
        return getattr(_import_pandas(), cls.__name__)(*args, **kwargs)


def _loaded_pandas() -> ModuleType | None:
    module = sys.modules.get("pandas")
    return None if module is None or module.__name__ != "pandas" else module


def _import_pandas() -> ModuleType:
    return importlib.import_module("pandas")


def _pandas_stand_in() -> ModuleType:
    module = ModuleType("placer._lazy.pandas")
    for name in _PANDAS_TYPES:
        setattr(module, name, _DeferredType(name, (), {}))

    def attribute(name: str) -> object:
        return getattr(_import_pandas(), name)

    module.__getattr__ = attribute  # type: ignore[method-assign]
    return module


@contextmanager
def pandas_deferred() -> Iterator[None]:
    """Import OR-Tools' CP-SAT wrapper inside this block: it imports pandas only for its
    pandas-Series helpers (``new_int_var_series``...), which placer does not use, and pandas
    costs about 0.2 s of every ``placer plan`` or ``submit``.

    While the block runs, ``import pandas`` gets a stand-in (unless pandas is loaded already):
    its ``Index``, ``Series`` and ``DataFrame`` answer ``isinstance`` without importing pandas
    (an object can only be a pandas one if pandas is loaded) and import it when called; any
    other attribute imports it. After the block ``import pandas`` is the real one again, so the
    module imported inside keeps the stand-in and behaves as with pandas: nothing is lost, the
    cost is paid only by a caller of those helpers.
    """
    if "pandas" in sys.modules:
        yield
        return
    stand_in = sys.modules["pandas"] = _pandas_stand_in()
    try:
        yield
    finally:
        if sys.modules.get("pandas") is stand_in:
            del sys.modules["pandas"]
