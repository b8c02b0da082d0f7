"""``accelbench scale``: how a workload's training scales over processes and machines.

``launcher`` starts torchrun (the engine's torchrun launcher) once per process count and collects
the ranks' results; ``ddp_worker.run_rank`` is what each rank runs; ``backends`` says which
torch.distributed backend and which device a rank uses; its options are in
``accelbench.options.scale``. Nothing is imported here, so that a rank loads only what it needs.
"""
