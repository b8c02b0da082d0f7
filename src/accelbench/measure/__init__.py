"""Measurement, in four folders: ``loop/`` (the timed loop, its stop rule, the one clock, the
sustained mode), ``trackers/`` (memory, energy, sensors and the profiler around the measured
region), ``ceilings/`` (compute peak, bandwidth, roofline) and ``generation/`` (prefill and decode
clocks, the field's figures, bytes per token, weight-only quantization, the protocols)."""
