"""``accelbench check``: is a device computing the right numbers?

- ``core``: one workload trained on the candidate and on a reference (CPU fp64 or fp32) from the
  same seed, the curves compared step by step with tolerances per precision;
- ``check``: the per-case work the engine's driver runs for ``check`` (inline or in a worker);
- ``shown``: how a case's outcome reads (verdict or status, judged steps).
"""
