"""The one supervisor of child processes: a case's worker process and scale's torchrun both run
under it, so a crash, a hang or a kill is seen and reported the same way."""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import IO

#: Called with each line of the child's standard output; True when the line was a message for the
#: parent (progress), which then stays out of the output tail.
LineHandler = Callable[[str], bool]


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


@dataclass
class ChildOutcome:
    #: The child's exit code (negative: the signal that killed it); None when it was killed at the
    #: timeout.
    returncode: int | None
    #: The last lines of its output (stderr, or stdout and stderr together when merged).
    output_tail: list[str]

    @property
    def timed_out(self) -> bool:
        return self.returncode is None

    def death(self) -> str:
        """How the child ended, in words: 'died from SIGSEGV', 'exited with code 3'."""
        code = self.returncode
        if code is None:
            return "was killed at the timeout"
        if code < 0:
            name = signal_name(-code)
            hint = " (the system's out-of-memory killer is the usual sender)" if name == "SIGKILL" else ""
            return f"died from {name}{hint}"
        return f"exited with code {code}"

    def last_line(self) -> str:
        return next((line for line in reversed(self.output_tail) if line.strip()), "")


def kill_group(process: subprocess.Popen[str]) -> None:
    """Kill the child, its process group and every process under it: torchrun starts each rank in
    a session of its own, so killing the group alone would leave the ranks running."""
    import psutil

    try:
        descendants = psutil.Process(process.pid).children(recursive=True)
    except psutil.Error:
        descendants = []
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    for child in descendants:
        with contextlib.suppress(psutil.Error):
            child.kill()
    process.wait()
    psutil.wait_procs(descendants, timeout=5)


def _pump(stream: IO[str], tail: deque[str], on_line: LineHandler | None, echo: bool) -> None:
    for line in stream:
        if on_line is not None and on_line(line):
            continue
        tail.append(line.rstrip())
        if echo:
            sys.stderr.write(line)


def supervise(command: Sequence[str], timeout: float, *, env: dict[str, str] | None = None,
              on_line: LineHandler | None = None, merge_output: bool = False, echo: bool = False,
              tail_lines: int = 30) -> ChildOutcome:
    """Run ``command`` in a session of its own and wait at most ``timeout`` seconds.

    Standard output goes line by line to ``on_line``; what it does not take, and standard error,
    is kept in the tail (and written to our stderr with ``echo``). At the timeout the child and
    everything under it is killed (``returncode`` None). KeyboardInterrupt and other
    BaseExceptions kill them too, then propagate: a stopped parent leaves no orphans.
    """
    process = subprocess.Popen(
        list(command), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT if merge_output else subprocess.PIPE,
        text=True, env=env, start_new_session=True,
    )
    tail: deque[str] = deque(maxlen=tail_lines)
    streams = [(process.stdout, on_line)] + ([] if merge_output else [(process.stderr, None)])
    readers = [threading.Thread(target=_pump, args=(stream, tail, handler, echo), daemon=True)
               for stream, handler in streams]
    for reader in readers:
        reader.start()
    try:
        code: int | None = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(process)
        code = None
    except BaseException:
        kill_group(process)
        raise
    for reader in readers:
        reader.join(timeout=5)
    return ChildOutcome(code, list(tail))


class ServedChild:
    """A child that runs requests one at a time, the same supervisor's way: each ``call`` writes
    one line to its standard input and waits at most ``timeout`` seconds for the line on its
    standard output that says the request is done; a child that dies or overruns meanwhile is
    reported as :func:`supervise` reports it (the timeout kills it and everything under it), and
    is of no further use. Between requests it waits, warm, for the next line; ``close`` ends it
    (end of input, then a kill if it lingers).

    The output tail of an outcome is what the child wrote during that request. KeyboardInterrupt
    and other BaseExceptions kill the child, then propagate.
    """

    def __init__(self, command: Sequence[str], done_prefix: str, *,
                 env: dict[str, str] | None = None, echo: bool = False,
                 tail_lines: int = 30) -> None:
        self.done_prefix, self.echo = done_prefix, echo
        self.process = subprocess.Popen(
            list(command), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env=env, start_new_session=True)
        self._tail: deque[str] = deque(maxlen=tail_lines)
        #: Standard output's lines, then None at its end (the child closed it, or died).
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._readers = [threading.Thread(target=self._read_stdout, daemon=True),
                         threading.Thread(target=_pump, daemon=True,
                                          args=(self.process.stderr, self._tail, None, echo))]
        for reader in self._readers:
            reader.start()

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _read_stdout(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def call(self, request: str, timeout: float,
             on_line: LineHandler | None = None) -> tuple[ChildOutcome, bool]:
        """Send ``request`` (one line) and wait for the child's done line: (the outcome, True)
        then, the child still running (returncode 0); else (how it ended, False), returncode
        None when it was killed at the timeout."""
        self._tail.clear()
        deadline = time.monotonic() + timeout
        try:
            assert self.process.stdin is not None
            try:
                self.process.stdin.write(request.rstrip("\n") + "\n")
                self.process.stdin.flush()
            except (BrokenPipeError, OSError):
                return self._ended(), False  # it died before it could take the request
            while True:
                try:
                    line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    kill_group(self.process)
                    return ChildOutcome(None, list(self._tail)), False
                if line is None:
                    return self._ended(), False
                if line.startswith(self.done_prefix):
                    return ChildOutcome(0, list(self._tail)), True
                if on_line is not None and on_line(line):
                    continue
                self._tail.append(line.rstrip())
        except BaseException:
            kill_group(self.process)
            raise

    def _ended(self) -> ChildOutcome:
        """A child that stopped without finishing its request: its exit code and the lines it
        wrote during the request, up to its end."""
        code = self.process.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        return ChildOutcome(code, list(self._tail))

    def close(self, grace: float = 5.0) -> None:
        """End the child: end of input asks it to exit; one still there after ``grace``
        seconds is killed with everything under it."""
        if self.alive:
            with contextlib.suppress(OSError):
                assert self.process.stdin is not None
                self.process.stdin.close()
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                kill_group(self.process)
        for reader in self._readers:
            reader.join(timeout=5)
