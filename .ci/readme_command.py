"""Print one of the README's marked commands, exactly as written, for .ci/run to run.

A command is marked by an HTML comment on its own line, `<!-- ci: NAME -->`, followed (blank lines allowed)
by a fenced ```bash block; the block's lines are printed as they stand. Exits 1 with a message when the
marker is missing, appears twice, or is not followed by a non-empty bash block: CI must never run nothing.

    python3 .ci/readme_command.py start|test [README.md]
"""

from __future__ import annotations

import sys
from pathlib import Path


def block(text: str, name: str) -> str:
    lines = text.splitlines()
    marker = f"<!-- ci: {name} -->"
    where = [i for i, line in enumerate(lines) if line.strip() == marker]
    if len(where) != 1:
        raise SystemExit(f"README: {len(where)} lines read {marker!r}; exactly one must")
    i = where[0] + 1
    while i < len(lines) and not lines[i].strip():
        i += 1
    if i == len(lines) or lines[i].strip() != "```bash":
        raise SystemExit(f"README: {marker!r} must be followed by a ```bash block")
    body = []
    for line in lines[i + 1:]:
        if line.strip() == "```":
            break
        body.append(line)
    else:
        raise SystemExit(f"README: the block after {marker!r} is never closed")
    command = "\n".join(body).strip()
    if not command:
        raise SystemExit(f"README: the block after {marker!r} is empty")
    return command


def main() -> None:
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__.strip().splitlines()[-1].strip())
    readme = Path(sys.argv[2]) if len(sys.argv) == 3 else Path(__file__).resolve().parent.parent / "README.md"
    print(block(readme.read_text(encoding="utf-8"), sys.argv[1]))


if __name__ == "__main__":
    main()
