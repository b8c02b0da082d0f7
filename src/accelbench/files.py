"""Files any layer may write: the per-user data folder and the atomic write.

At the bottom of the layers (beside ``errors``) because code at every height keeps a file there:
the peak cache (``measure/``), results and the history (``store/``), the machine id
(``sharing/``), the worker's hand-back (``engine/``), reports (``cli/``).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import platformdirs


def data_home() -> Path:
    """The per-user data folder (``ACCELBENCH_HOME`` overrides it, e.g. for tests)."""
    override = os.environ.get("ACCELBENCH_HOME")
    if override:
        return Path(override).expanduser()
    return Path(platformdirs.user_data_dir("accelbench", appauthor=False))


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that ``path`` holds either its old content or the new, never a part."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    umask = os.umask(0)
    os.umask(umask)
    try:
        # mkstemp creates 0600 files; results and reports are ordinary files others may read.
        os.chmod(temporary, 0o666 & ~umask)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
