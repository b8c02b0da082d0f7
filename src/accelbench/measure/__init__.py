"""Measurement: the timed loop and the trackers around it (time, memory, energy, sensors), peaks,
the roofline and the profile."""
