"""Generation: prefill and decode clocks, the figures the field defines, decode bytes read per
token, weight-only quantization and the protocols' rounds.
"""
