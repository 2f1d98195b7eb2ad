"""placer's benchmarks and the example fleet builders (see simulations/README.md); the trace
readers and workload generators they use are :mod:`placer.traces`."""
