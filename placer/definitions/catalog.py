"""The set of definitions placer knows, keyed by the workload kind each one covers.

Sources, later ones winning for the same root group/version/kind (like upstream, where a
cluster's Karta replaces the built-in definition for its kind):

1. the built-in catalog (:meth:`Catalog.builtin`): placer's own definitions, shipped in the
   package (``catalog/`` at the repository root, reached through the ``placer/definitions/builtin``
   link so that editable installs and wheels find the same files);
2. ``--catalog DIR`` directories, in the order given (:meth:`Catalog.load`);
3. definitions added at run time, e.g. Karta objects read from a hub cluster
   (:meth:`Catalog.with_definitions`).

Every definition is validated when it enters a catalog, so interpretation never meets an
invalid one. A catalog also carries the accelerator table (:mod:`placer.accelerators`) that
decomposition counts GPU fractions, shared GPUs and DRA claims with: placer's defaults unless a
fleet file says otherwise (:meth:`Catalog.with_accelerators`).

Lookup (:meth:`Catalog.find`) is by exact apiVersion and kind; when no definition has that
version but exactly one covers the same group and kind, that one is used (upstream's
``describe -f`` fallback).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path

from placer.accelerators import AcceleratorTable, default_accelerators
from placer.definitions.compiled import load_validated
from placer.definitions.jq import trust_expressions
from placer.definitions.model import Definition, GroupVersionKind
from placer.definitions.validate import check_definition, jq_fields
from placer.errors import DefinitionError, NoDefinitionError
from placer.topology import Topologies, default_topologies

__all__ = ["Catalog", "builtin_catalog_dir"]


def builtin_catalog_dir() -> Path:
    """The directory holding the built-in definitions (inside the installed package)."""
    path = Path(str(resources.files("placer.definitions").joinpath("builtin")))
    if not path.is_dir():
        raise DefinitionError(
            f"the built-in catalog is missing ({path})",
            hint="reinstall placer; in a source checkout, placer/definitions/builtin must link "
            "to ../../catalog",
        )
    return path


class Catalog:
    """An immutable set of validated definitions, at most one per root kind."""

    def __init__(
        self,
        definitions: Iterable[Definition] = (),
        *,
        accelerators: AcceleratorTable | None = None,
        topologies: Topologies | None = None,
    ) -> None:
        #: how GPU fractions, shared GPUs and DRA claims are counted (:mod:`placer.accelerators`).
        self.accelerators = accelerators or default_accelerators()
        #: the topology levels definitions and annotations may name (:mod:`placer.topology`).
        self.topologies = topologies or default_topologies()
        by_kind: dict[GroupVersionKind, Definition] = {}
        for definition in definitions:
            target = definition.target
            if target is None:  # pragma: no cover - rejected by validation
                continue
            by_kind[target] = definition
        self._by_kind = by_kind

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def builtin(cls, *, cache: Path | None = None) -> Catalog:
        """placer's own definitions (loaded and validated once per process; through the
        compiled catalog in the directory ``cache``, :mod:`placer.definitions.compiled`)."""
        return _builtin(cache)

    @classmethod
    def load(
        cls,
        extra_dirs: Sequence[str | Path] = (),
        *,
        builtin: bool = True,
        cache: Path | None = None,
    ) -> Catalog:
        """The built-in catalog (unless ``builtin=False``) plus every ``--catalog`` directory,
        through the compiled catalog in the directory ``cache`` when given.

        Raises :class:`~placer.errors.InputError` / :class:`~placer.errors.DefinitionError` for
        unreadable files or invalid definitions, naming the file.
        """
        catalog = cls.builtin(cache=cache) if builtin else cls()
        for directory in extra_dirs:
            catalog = catalog.with_definitions(
                load_validated(Path(directory), origin="file", cache=cache)
            )
        return catalog

    def with_definitions(self, definitions: Iterable[Definition]) -> Catalog:
        """A new catalog where ``definitions`` (validated here) replace those of the same kind."""
        added = [check_definition(d) for d in definitions]
        return Catalog(
            [*self._by_kind.values(), *added],
            accelerators=self.accelerators,
            topologies=self.topologies,
        )

    def with_accelerators(self, table: AcceleratorTable) -> Catalog:
        """The same definitions, counting accelerators with ``table``."""
        return Catalog(self._by_kind.values(), accelerators=table, topologies=self.topologies)

    def with_topologies(self, topologies: Topologies) -> Catalog:
        """The same definitions, knowing the topology levels of ``topologies``."""
        return Catalog(
            self._by_kind.values(), accelerators=self.accelerators, topologies=topologies
        )

    # -- lookup --------------------------------------------------------------------------------

    @property
    def definitions(self) -> tuple[Definition, ...]:
        """All definitions, sorted by name."""
        return tuple(sorted(self._by_kind.values(), key=lambda d: d.name))

    def __len__(self) -> int:
        return len(self._by_kind)

    def find(self, api_version: str, kind: str, *, source: str | None = None) -> Definition:
        """The definition covering ``api_version``/``kind``; raises :class:`NoDefinitionError`."""
        gvk = GroupVersionKind.from_api_version(api_version, kind)
        found = self._by_kind.get(gvk)
        if found is not None:
            return found
        same_kind = [d for k, d in self._by_kind.items() if k.group == gvk.group and k.kind == kind]
        if len(same_kind) == 1:
            return same_kind[0]
        raise NoDefinitionError(api_version, kind, source=source)

    def get(self, name: str) -> Definition:
        """The definition named ``name`` (``metadata.name``); raises :class:`DefinitionError`."""
        for definition in self._by_kind.values():
            if definition.name == name:
                return definition
        raise DefinitionError(
            f"no definition named {name!r}",
            hint="`placer definitions` lists the names",
        )


@lru_cache(maxsize=2)
def _builtin(cache: Path | None) -> Catalog:
    definitions = load_validated(builtin_catalog_dir(), origin="catalog", cache=cache)
    seen: dict[GroupVersionKind, str] = {}
    for definition in definitions:
        target = definition.target
        if target is not None and target in seen:
            raise DefinitionError(
                f"built-in catalog: {definition.name} and {seen[target]} both cover {target}"
            )
        if target is not None:
            seen[target] = definition.name
    catalog = Catalog().with_definitions(definitions)  # validated above: bounded, isolated
    # placer's own reviewed definitions run in-process whatever the size of the object
    trust_expressions([text for d in definitions for _, text in jq_fields(d)])
    return catalog
