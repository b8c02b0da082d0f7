"""The launchers: one family, one protocol (:class:`~accelbench.engine.launchers.base.Launcher`:
launch a work item, report its progress, return its typed result), three members:

- ``inline``: the case in this process;
- ``process``: the case in a worker process (``python -m accelbench.engine.launchers.worker SPEC
  RESULT``) under the one supervisor, so a crash, a hang or an out-of-memory kill costs only it;
- ``warm``: consecutive cases in one worker process per device (``worker --serve``, ``--size
  tiny``'s default), each begun as in a fresh process (``fresh.py``), a dead worker's case its
  only loss;
- ``torchrun``: the case's ranks under torchrun (``... worker --rank SPEC``), each running the
  same work, the same ``measure_case``, in a small rank context (``rank.py``: the model wrapper,
  the per-rank seed, barriers around the measured steps, the step count the ranks agree on, the
  no-sync phase); their typed reports are merged by one rule (``ranks.py``).

Every member runs what the subcommand's :class:`~accelbench.engine.work.CaseWork` says; the
spec crossing a process boundary is the typed :class:`~accelbench.engine.spec.CaseSpec`.
Nothing is imported here, so a rank or a worker loads only what it needs.
"""
