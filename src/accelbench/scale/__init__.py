"""``accelbench scale``: how a workload's training scales over processes and machines.

``work`` plans one case per process count and fills in the efficiency across them; everything
else is the engine's: the torchrun launcher, the rank context every rank measures in, and the
rule that merges the ranks (``engine/launchers/``); its options are in ``accelbench.options.scale``.
"""
