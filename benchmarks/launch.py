"""Starting and ending a Streamlit server of this repository, one way for the tests and the benchmarks: a free port on
loopback, `streamlit run`'s arguments for a headless server there, the wait for its health check, and the end of a
process this side started. Standard library only: the tests import it as `benchmarks.launch`, the benchmark scripts
(with benchmarks/ on their path) as `launch`."""

from __future__ import annotations

import socket
import subprocess
import time
import urllib.request


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_args(script: str, port: int) -> list[str]:
    """`streamlit run`'s arguments for `script`: headless, on 127.0.0.1 at `port` only, no usage statistics."""
    return ["run", script, "--server.headless=true", "--server.address=127.0.0.1", f"--server.port={port}",
            "--browser.gatherUsageStats=false"]


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float, poll: float) -> bool:
    """Ask the server at `url` for its health every `poll` seconds until it answers (True), or until `proc` has ended
    or `timeout` seconds have passed (False; ending it is the caller's)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=2).read() == b"ok":
                return True
        except OSError:
            if time.monotonic() > deadline or proc.poll() is not None:
                return False
            time.sleep(poll)


def end_process(proc: subprocess.Popen, grace: float = 15.0) -> None:
    """End a process this side started: SIGTERM, then SIGKILL after `grace` seconds; reaped either way."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
