"""The launchers: one family, one protocol (:class:`~accelbench.engine.launchers.base.Launcher`:
launch a work item, report its progress, return its typed result), chosen for a plan in one
place (``choose.py``, from what the options ask; the work never chooses its own), four members:

- ``inline``: the case in this process;
- ``process``: the case in a worker process (``python -m accelbench.engine.launchers.worker SPEC
  RESULT``) under the one supervisor, so a crash, a hang or an out-of-memory kill costs only it
  (with ``resume``, only the piece of the case it was in: a fresh worker goes on with the rest);
- ``warm``: consecutive cases in one worker process per device (``worker --serve``, ``--size
  tiny``'s default), each begun as in a fresh process (``fresh.py``), a dead worker's case its
  only loss;
- ``torchrun``: the case's ranks under torchrun (``... worker --rank SPEC``), each running the
  same work, the same ``measure_case``, measured as a rank (the spec's ``RankPlan``, passed to
  ``measure_case``: ``measure/data_parallel.py``'s model wrapper, per-rank seed, barriers around
  the measured steps, the step count the ranks agree on, the no-sync phase); their typed reports
  are merged by one rule (``ranks.py``).

Every member runs what the subcommand's work says, seen through the launchers' own protocol
(``base.py``'s ``Work``; ``engine/work.py``'s ``CaseWork``, above the launchers, is one); the spec
crossing a process boundary is the typed :class:`~accelbench.engine.spec.CaseSpec`.
Nothing is imported here, so a rank or a worker loads only what it needs.
"""
