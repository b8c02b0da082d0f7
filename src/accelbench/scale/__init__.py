"""``accelbench scale``: how a workload's training scales over processes and machines.

``launcher`` starts torchrun once per process count and collects the ranks' results;
``ddp_worker`` is what each rank runs; ``backends`` says which torch.distributed backend and which
device a rank uses. Nothing is imported here, so that ``python -m accelbench.scale.ddp_worker``
loads only what a rank needs.
"""

#: Seconds one world size (start-up, warm-up and measurement) may take before it is killed.
DEFAULT_TIMEOUT_S = 600.0
