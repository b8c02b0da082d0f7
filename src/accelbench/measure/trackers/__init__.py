"""The trackers composed around the measured region: memory, energy, sensors and the profiler."""
