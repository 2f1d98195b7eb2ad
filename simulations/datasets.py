"""Where the benchmarks' own carried files live: the data of the example fleet builders.

The Helios VC sizes and the PAI machine list (``simulations/data/``, see its README) are read
only by :mod:`simulations.fleets`; the traces users reach through ``placer simulate
--workloads`` (openb, Kalos) are package data of :mod:`placer.traces`, read with its
:func:`placer.traces.datasets.read_csv`.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["DATA_DIR", "HELIOS_DIR", "PAI_DIR"]

DATA_DIR = Path(__file__).resolve().parent / "data"
HELIOS_DIR = DATA_DIR / "helios-venus-vc-gpus"
PAI_DIR = DATA_DIR / "alibaba-pai-gpu-2020-machines"
