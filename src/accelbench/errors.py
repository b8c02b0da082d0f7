"""Errors that accelbench reports to the user as one line and exit code 2."""


class UsageError(Exception):
    """Bad input from the user: a name, a number, a path or a file that cannot be used.

    The message is one line naming the problem and what is allowed. The CLI prints it without a
    traceback and exits with code 2.
    """


class DeviceUnavailableError(UsageError):
    """A device was asked for that this machine or this torch build cannot provide."""
