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
from collections.abc import Callable, Sequence

__all__ = ["lazy_exports"]


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
