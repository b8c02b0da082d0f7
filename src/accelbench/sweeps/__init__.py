"""``accelbench sweep``: throughput per batch size (``run``), saturation and the CPU crossover
(``analysis``)."""
