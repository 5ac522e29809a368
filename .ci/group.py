"""What .ci/run asks about the start command's process group, read from /proc (no `ps` needed).

    python3 .ci/group.py alive PGID       exit 0 when a process of the group is alive (not a zombie)
    python3 .ci/group.py streamlit PGID   exit 0 when a python process of the group runs `streamlit run`
                                          (the bash that runs the README's command holds its text too)
"""

from __future__ import annotations

import sys
from pathlib import Path


def members(group: int):
    """(state, comm, args) of every process in process group `group`."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            stat = (proc / "stat").read_text()
            args = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # it ended meanwhile
            continue
        comm = stat[stat.index("(") + 1:stat.rindex(")")]
        state, _ppid, pgrp = stat[stat.rindex(")") + 2:].split()[:3]
        if int(pgrp) == group:
            yield state, comm, args


def main() -> None:
    what, group = sys.argv[1], int(sys.argv[2])
    if what == "alive":
        found = any(state != "Z" for state, _, _ in members(group))
    elif what == "streamlit":
        found = any(state != "Z" and comm.startswith("python") and "streamlit run" in args
                    for state, comm, args in members(group))
    else:
        raise SystemExit(__doc__)
    sys.exit(0 if found else 1)


if __name__ == "__main__":
    main()
