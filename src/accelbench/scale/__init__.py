"""``accelbench scale``: how a workload's training scales over processes and machines.

``work`` plans one case per process count and fills in the efficiency across them; everything
else is the engine's: the torchrun launcher, chosen in ``engine/launchers/choose.py``, and the
rule that merges the ranks (``engine/launchers/``), and measurement's (``measure/data_parallel.py``:
how every rank measures); its options are in ``accelbench.options.scale``.
"""
