"""The timed loop: its stop rule, the one synced clock, queued timing, input wait, median intervals
and the sustained mode.
"""
