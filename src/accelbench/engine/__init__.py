"""The one case engine every case-running subcommand (run, sweep, check, probe, scale) goes through.

- ``case``: the case model (Case, the plan, the result that names a case before it runs);
- ``spec``: the typed CaseSpec that crosses to a worker process or a torchrun rank;
- ``work``: what a subcommand plugs in, its per-case work (a :class:`CaseWork`);
- ``launchers/``: inline, process, warm and torchrun, one family behind one protocol (launch a
  work item, report progress, return a typed result), the plan's one chosen in ``choose.py``
  from what the options ask; a torchrun rank runs the same ``measure_case``, told by the spec's
  ``RankPlan`` to measure as a rank (``measure/data_parallel.py``), and its ranks' results are
  merged by one rule;
- ``measure_case``: measuring one case in this process (every launcher ends here);
- ``supervise``: the only supervisor of child processes (own session, output pumped, stderr
  tail kept, timeout kills the whole group, the signal that killed a child named);
- ``driver``: the loop over a plan's cases: each result saved the moment its case ends,
  SIGINT/SIGTERM turned into :class:`Interrupted` with the finished cases kept;
- ``progress``: the one live progress display.
"""
