"""The machine's ceilings a figure is read against: the compute peak, memory bandwidth and the
roofline built from them.
"""
