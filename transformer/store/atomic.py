"""Atomic file writes, and the cleaning of what killed ones leave behind: checkpoints and the model store's records.

No torch here: the model store cleans its folder when it opens, at the app's start.
"""

from __future__ import annotations

import os
import stat
import tempfile
import time
from pathlib import Path

try:
    import fcntl
except ImportError:  # not on Windows: see _lock
    fcntl = None

TEMP_SUFFIX = ".tmp"
_TEMP_RANDOM = 8  # mkstemp's random part


def write_atomic(data: bytes, path: str | os.PathLike) -> Path:
    """Write `data` to `path` atomically: a temp file in the same folder, fsync, then os.replace.

    The temp file is locked (flock) while it is written, so a process killed mid-write leaves an unlocked
    `.NAME.XXXXXXXX.tmp`; the next write to the same path removes such leftovers, and the model store removes
    any name's at start-up (`remove_leftover_temps`; never a temp file that another write still holds)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_leftover_temps(path.parent, path.name)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as f:
            _lock(f.fileno(), blocking=True)  # held until the file is closed, after os.replace
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
            os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file ordinary permissions
            os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def is_temp_name(name: str, target: str | None = None) -> bool:
    """Whether `name` is a temp file of `write_atomic` (for the file named `target`, or any file)."""
    if not (name.startswith(".") and name.endswith(TEMP_SUFFIX)):
        return False
    stem = name[1:-len(TEMP_SUFFIX)]
    target_part, dot, random_part = stem.rpartition(".")
    return bool(dot) and len(random_part) == _TEMP_RANDOM and (target is None or target_part == target)


def remove_leftover_temps(folder: str | os.PathLike, target: str | None = None) -> list[Path]:
    """Remove the temp files that killed writes left in `folder` (regular files named like write_atomic's temps,
    for the file named `target` or any, and not locked by a write under way); returns those removed."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        if not is_temp_name(entry.name, target):
            continue
        try:
            if not entry.is_file(follow_symlinks=False):  # never touch links, FIFOs or devices
                continue
            fd = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) and _lock(fd, blocking=False):
                os.unlink(entry.path)
                removed.append(Path(entry.path))
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed


def _lock(fd: int, blocking: bool) -> bool:
    """An exclusive flock on `fd` (True), or False when another open file holds one. Where flock does not
    exist, no lock is taken and leftovers are recognised by age instead (older than an hour)."""
    if fcntl is None:
        return blocking or time.time() - os.fstat(fd).st_mtime > 3600
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
