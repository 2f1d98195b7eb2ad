"""placer: multi-cluster placement engine for Kubernetes AI workloads.

Reads NVIDIA Workload Map (Karta) definitions to decompose any workload into gang-scheduled
components, gathers node-level free capacity from several clusters, chooses clusters with an
OR-Tools CP-SAT model and dispatches the manifests.
"""

__version__ = "0.1.0"
