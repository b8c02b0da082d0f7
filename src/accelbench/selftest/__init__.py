"""``accelbench selftest``: checks that prove the figures accelbench prints on a device can be
trusted, one module per group (timing, ceilings, precision, memory, parity), each check a
pass/fail line with the figures behind it. :func:`accelbench.selftest.suite.run_selftest` runs
them all."""
