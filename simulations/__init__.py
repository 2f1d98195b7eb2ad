"""placer's benchmarks, trace readers and workload generators (see simulations/README.md)."""
