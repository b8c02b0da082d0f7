"""The one case engine every case-running subcommand (run, sweep, check, probe, scale) goes through.

- ``supervise``: the only supervisor of child processes (own session, output pumped, stderr
  tail kept, timeout kills the whole group, the signal that killed a child named);
- ``launch``: the launcher axis: a subcommand's per-case work (a :class:`CaseWork`), run inline or
  in a worker process (``python -m accelbench.engine.worker``), which dispatches on the spec's ``work``;
- ``driver``: the loop over a plan's cases: each result saved the moment its case ends,
  SIGINT/SIGTERM turned into :class:`Interrupted` with the finished cases kept;
- ``progress``: the one live progress display.
"""
