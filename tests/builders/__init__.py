"""Shared test builders, as Kueue's ``wrappers.go``: one place that knows what a node, a pod, a
definition or a fleet looks like, so that a test states only what matters to it.

* :mod:`tests.builders.objects` — Kubernetes objects as the API serves them (plain dicts):
  ``node()``, ``pod()``, ``jobset()``, ``custom_object()``, ``karta()``.
* :mod:`tests.builders.fleets` — placer's model: ``node()``, ``cluster()``, ``fleet()``,
  ``pod()`` (a pod's demand), ``workload()``.
* :mod:`tests.builders.waiting` — ``wait_until(condition)`` instead of fixed sleeps.
"""
