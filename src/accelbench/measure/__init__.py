"""Measurement: statistics over raw samples, the step clock, memory facts."""
