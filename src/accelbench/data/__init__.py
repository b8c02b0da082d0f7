"""Batches for workloads: synthetic by default, real data sets from a user's --data-dir."""
