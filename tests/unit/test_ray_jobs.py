"""RayJob (transformer/runs/ray_job.py) against a local Ray cluster that this module starts and stops itself.

The cluster is one head node (`ray start --head --block`, 2 CPUs, no dashboard) whose every component is bound
to 127.0.0.1: --node-ip-address=127.0.0.1 alone is not enough on Linux (Ray swaps a loopback node address
for the machine's network address unless RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, its local-only mode; measured
with ray 2.60.0: GCS and raylet then listened on every interface and the runtime-env agent on the network
address). Usage statistics are off (RAY_USAGE_STATS_ENABLED=0 and --disable-usage-stats), so nothing leaves the
machine; test_the_lifecycle checks the listening sockets of every process of the cluster and of this one
while actors run. Token authentication is off (RAY_AUTH_MODE=disabled): a head started where an earlier local
`ray.init()` left a token (~/.ray/auth_token) turned it on, and this process's driver, not sending it, was refused.
The head runs in a session of its own: at the end SIGTERM stops it and its processes, and whatever of that session
is left is killed (only processes this module started).
"""

from __future__ import annotations

import importlib.util
import ipaddress
import json
import os
import pickle
import shutil
import signal
import subprocess
import threading
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from benchmarks.launch import free_port
from helpers.repo import ROOT
from helpers.jobs import finished_at_max_steps, pauses_steps_and_stops, starts_paused_then_steps_and_runs, waiter
from helpers.worker_probes import FailingProbe, TextProbe

from transformer.network.decoding import greedy_decode
from transformer.runs import make_job
from transformer.runs.job import Job
from transformer.runs.probe import Probe
from transformer.runs.process_job import ProcessJob
from transformer.runs.queue import QueueFullError, RunQueue
from transformer.runs.ray_job import CONNECT_TRIES, RAY_ADDRESS_ENV, RayJob, _Connector, _TrainingActor
from transformer.runs.thread_job import TrainingJob
from transformer.training.config import TrainConfig
from transformer.training.trainer import Trainer

if importlib.util.find_spec("ray") is None:  # CI installs it (requirements-dev.txt has requirements-cluster.txt)
    if os.environ.get("CI"):
        raise ImportError("ray is not installed: CI must run this module (pip install -r requirements-cluster.txt)")
    pytest.skip("ray is not installed (pip install -r requirements-cluster.txt)", allow_module_level=True)
ray = None  # imported by the `cluster` fixture, once LOCAL_ENV is set: Ray reads it when it is imported

TINY_MODEL = {"n_enc_layers": 1, "n_dec_layers": 1, "d_model": 16, "n_heads": 2, "d_ff": 32}
TINY_TRAIN = TrainConfig(task="copy", task_params={"min_len": 1, "max_len": 4}, steps=100_000, batch_size=8,
                         lr=3e-3, warmup=5, eval_every=10, eval_samples=8, confirm_samples=16, device="cpu")
BOOT = 120.0  # seconds for an actor to start: a fresh worker process imports ray and torch (far longer when loaded)
wait_for = waiter(BOOT, "the actor")
CPUS = 2
LOCAL_ENV = {"RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled"}


@dataclass
class Cluster:
    head: subprocess.Popen
    address: str  # the GCS, for a driver on a node of the cluster (this process)
    client_address: str  # Ray Client's, for a driver outside the cluster
    temp_dir: str

    def processes(self) -> set[int]:
        """The cluster's processes: those of the head's session."""
        return {pid for pid in _all_pids() if _session(pid) == self.head.pid}


def _all_pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _session(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[3])  # state, ppid, pgrp, session
    except (OSError, ValueError, IndexError):
        return None


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")[:200]
    except OSError:
        return "?"


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    raw = bytes.fromhex(hex_address)  # /proc/net/*: 32-bit words in host (little-endian) order
    return ipaddress.ip_address(b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4)))


def listening_sockets(pids: set[int]) -> list[tuple[int, str, str, int]]:
    """(pid, protocol, address, port) of every TCP socket listening and UDP socket bound by `pids`: what
    `ss -ltnup` shows, read from /proc/net and /proc/PID/fd."""
    owner = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    owner[int(target[8:-1])] = pid
        except OSError:
            continue  # ended meanwhile
    found = []
    for proto, state in (("tcp", "0A"), ("tcp6", "0A"), ("udp", "07"), ("udp6", "07")):  # LISTEN; unconnected
        try:
            lines = Path(f"/proc/net/{proto}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == state and int(fields[9]) in owner:
                host, port = fields[1].split(":")
                found.append((owner[int(fields[9])], proto, str(_address(host)), int(port, 16)))
    return found


def _loopback(text: str) -> bool:
    address = ipaddress.ip_address(text)
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _ray_cli() -> str:
    beside = Path(sys.executable).with_name("ray")
    return str(beside) if beside.is_file() else shutil.which("ray") or "ray"


@pytest.fixture(scope="module")
def cluster():
    """A one-node Ray cluster on 127.0.0.1, this process connected to it through AP_RAY_ADDRESS."""
    global ray
    saved = {key: os.environ.get(key) for key in (*LOCAL_ENV, RAY_ADDRESS_ENV)}
    os.environ.update(LOCAL_ENV)  # before this process imports ray (its driver then stays on loopback too)
    import ray

    temp_dir = tempfile.mkdtemp(prefix="ap-ray-")
    port, client_port = free_port(), free_port()
    log_path = Path(temp_dir, "head.log")
    with open(log_path, "w") as log:
        head = subprocess.Popen(
            [_ray_cli(), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
             f"--ray-client-server-port={client_port}", "--include-dashboard=false", "--dashboard-host=127.0.0.1",
             f"--num-cpus={CPUS}", "--num-gpus=0", "--disable-usage-stats", f"--temp-dir={temp_dir}"],
            env={**os.environ, **LOCAL_ENV}, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    cluster = Cluster(head, f"127.0.0.1:{port}", f"ray://127.0.0.1:{client_port}", temp_dir)
    try:
        wait_for(lambda: head.poll() is not None or "Ray runtime started" in log_path.read_text(), timeout=120,
                 what="the Ray head to start")
        assert head.poll() is None, f"the Ray head did not start:\n{log_path.read_text()[-3000:]}"
        os.environ[RAY_ADDRESS_ENV] = cluster.address
        yield cluster
    finally:
        if ray.is_initialized():
            ray.shutdown()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        ours = cluster.processes()
        wide = [s for s in listening_sockets(ours | {os.getpid()}) if not _loopback(s[2])]  # after every test
        head.send_signal(signal.SIGTERM)  # `ray start --block` stops what it started, then exits
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            head.kill()
            head.wait()
        deadline = time.monotonic() + 15  # Ray Client's per-driver servers end a moment after the head
        while cluster.processes() and time.monotonic() < deadline:
            time.sleep(0.1)
        left = {pid: _command(pid) for pid in cluster.processes()}
        for pid in left:  # (processes of the session this fixture started, and only those)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(temp_dir, ignore_errors=True)
        if left:
            warnings.warn(f"killed what the Ray head left behind after 15 s: {left}", stacklevel=1)
        assert not wide, f"the cluster listened beyond loopback: {wide}"


@pytest.fixture
def make(cluster):
    """RayJobs (through make_job) on their own queue, stopped afterwards; then the cluster's CPUs are free."""
    queue = RunQueue(limit=CPUS, max_queued=4)
    jobs = []

    def build(train: TrainConfig = TINY_TRAIN, **kwargs):
        job = make_job(train, TINY_MODEL, **{"queue": queue, **kwargs})
        assert isinstance(job, RayJob)
        jobs.append(job)
        return job

    yield build
    for job in jobs:
        job.stop(timeout=0)
    for job in jobs:
        assert job.join(timeout=BOOT)
    assert queue.running == queue.waiting == 0
    wait_for(lambda: ray.available_resources().get("CPU") == CPUS, timeout=30, what="the actors to end")


# -- lifecycle ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("backend", ["thread", "process", "ray"])
def test_every_backend_keeps_the_job_interface(backend, request):
    """One script for the three backends of transformer.runs.job.Job: idle, step(n) then paused at n, resume, a
    wait for a step beyond n, a wait for a change of state (its timeout; a pause from another thread), pause where it
    stays, the probe's text changed, the weights at the step shown, stop and join."""
    if backend == "thread":
        job = TrainingJob(Trainer(TINY_TRAIN, TINY_MODEL), probe=Probe("ab"), probe_every=5)
    elif backend == "process":
        job = ProcessJob(TINY_TRAIN, TINY_MODEL, queue=RunQueue(limit=1), probe=Probe("ab"), probe_every=5)
    else:
        job = request.getfixturevalue("make")(probe=Probe("ab"), probe_every=5)
    assert isinstance(job, Job)
    try:
        assert job.snapshot().state == "idle" and job.position() is None
        job.step(3)
        wait_for(lambda: job.snapshot().state == "paused" and job.snapshot().step == 3, what="three steps")
        assert job.position() is None  # a paused run holds no training slot
        job.set_probe_text("ba")
        job.resume()
        began = time.monotonic()
        assert job.wait_while("running", 30, past_step=3) == "running"  # back at its next step, not after 30 s
        assert job.snapshot().step > 3 and time.monotonic() - began < 10
        wait_for(lambda: job.snapshot().step >= 10, what="training on")
        began = time.monotonic()
        assert job.wait_while("running", 0.3) == "running"  # nothing changed: back after its timeout
        assert 0.25 < time.monotonic() - began < 3
        pausing = threading.Timer(0.3, job.pause)  # pause() returns once the step under way has ended
        pausing.start()
        began = time.monotonic()
        assert job.wait_while("running", 30) == "paused"  # back when it changed, not after 30 s
        assert time.monotonic() - began < 10
        pausing.join()
        paused = job.snapshot()
        assert paused.state == "paused" and job.bundle().card["steps"] == paused.step
        time.sleep(0.3)
        assert job.snapshot().step == paused.step
        assert any(result.source == "ba" for step, result in paused.probes if step > 3)
    finally:
        job.stop()
    assert job.join(30) and job.snapshot().state == "stopped"
    assert job.bundle().card["steps"] == job.snapshot().step


def test_the_lifecycle_and_nothing_listens_beyond_loopback(cluster, make):
    job = make(probe=TextProbe("ab", delay=0.02), probe_every=1)  # a slow probe: every step takes 20+ ms
    starts_paused_then_steps_and_runs(job, wait_for)
    assert job.node_ip == "127.0.0.1" and job.pid in cluster.processes()

    # While an actor trains: every socket the cluster (and this process, its driver) listens on is loopback.
    sockets = listening_sockets(cluster.processes() | {os.getpid()})
    assert any(pid == job.pid for pid, *_ in sockets)  # (the check sees the actor's own server)
    assert {proto for _, proto, _, _ in sockets} <= {"tcp", "tcp6"}
    assert [s for s in sockets if not _loopback(s[2])] == []

    pauses_steps_and_stops(job, wait_for)


def test_runs_finish_with_working_weights_and_errors_are_reported(make):
    at_max = make(max_steps=15, probe=Probe("abc"), probe_every=5)  # the app's probe
    failing = make(probe=FailingProbe(at=6), probe_every=3)
    at_max.start()
    failing.start()  # the two run at once: the cluster has two CPUs
    assert at_max.join(timeout=BOOT) and failing.join(timeout=BOOT)

    result = finished_at_max_steps(at_max)
    assert result.cross.flags.writeable  # a copy of its own, not a view of Ray's object store

    snap = failing.snapshot()
    assert (snap.state, snap.finished_reason) == ("error", "error")
    assert "FloatingPointError: probe failed on purpose at step 6" in snap.error
    assert snap.step == 6 and snap.probes == [(0, 0), (3, 3)] and failing.bundle().card["steps"] == 6


def test_a_killed_actor_is_reported_and_its_weights_stay(cluster, make):
    job = make()
    job.start()
    wait_for(lambda: job.snapshot().step >= 12)
    weights_at = job.bundle().card["steps"]  # the actor sends its weights now
    assert job.pid in cluster.processes()  # (a process of the cluster this module started)
    os.kill(job.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    wait_for(lambda: job.snapshot().state == "error", timeout=30, what="the kill to be noticed")
    noticed = time.monotonic() - killed_at
    snap = job.snapshot()
    assert snap.finished_reason == "killed" and snap.step >= weights_at, snap.error
    assert snap.error.startswith("the training actor on the Ray cluster was killed (")
    assert snap.error.endswith("its last snapshot and weights are kept")
    assert snap.history and snap.history[0]["step"] == 10  # the last snapshot is kept
    assert job.join(timeout=5) and job.position() is None
    bundle = job.bundle()  # the last weights the actor sent, without an actor
    assert weights_at <= bundle.card["steps"] <= snap.step
    assert greedy_decode(bundle.model, bundle.tokenizer, "ab").output_pieces
    assert noticed < 10.0


# -- capacity -------------------------------------------------------------------------------------------
def test_runs_beyond_the_limit_wait_in_line_in_order(make):
    queue = RunQueue(limit=1, max_queued=2)
    first, second, third, fourth = (make(queue=queue) for _ in range(4))
    first.start()
    second.start()
    third.start()
    assert [job.position() for job in (first, second, third)] == [0, 1, 2]
    assert [job.snapshot().state for job in (first, second, third)] == ["running", "queued", "queued"]
    assert second._proc is None and third._proc is None  # no actor until its turn
    with pytest.raises(QueueFullError, match="1 training runs are running .* 2 are waiting"):
        fourth.start()
    assert fourth.snapshot().state == "idle"

    wait_for(lambda: first.snapshot().step >= 1)
    first.pause()  # a paused run gives its slot to the next in line
    assert [job.position() for job in (first, second, third)] == [None, 0, 1]
    assert second.snapshot().state == "running" and second._proc is not None
    first.resume()  # and asks again at the back of the line
    assert first.snapshot().state == "queued" and first.position() == 2
    second.stop()
    assert [job.position() for job in (first, third)] == [1, 0] and third.snapshot().state == "running"
    assert second.snapshot().state == "stopped"
    wait_for(lambda: third.snapshot().step >= 1)
    third.pause()
    at = first.snapshot().step
    wait_for(lambda: first.snapshot().step > at)  # its own actor, paused meanwhile, trains on
    assert first.position() == 0
    first.stop()  # a running actor: stop() returns once the run has ended, between steps
    assert first.join(timeout=0) and first.snapshot().state == "stopped" and queue.running == 0
    assert first.bundle().card["steps"] == first.snapshot().step


# -- configuration --------------------------------------------------------------------------------------
def test_make_job_picks_the_backend_from_the_configuration(cluster, monkeypatch):
    queue = RunQueue(limit=1, max_queued=0)
    assert isinstance(make_job(TINY_TRAIN, TINY_MODEL, queue=queue), RayJob)  # AP_RAY_ADDRESS is set here
    monkeypatch.setenv(RAY_ADDRESS_ENV, " ")
    job = make_job(TINY_TRAIN, TINY_MODEL, queue=queue)
    assert type(job) is ProcessJob and job.pid is None  # (never started: no process)
    monkeypatch.setenv(RAY_ADDRESS_ENV, cluster.address)
    monkeypatch.setitem(sys.modules, "ray", None)  # ray not installed: worker processes here, not an error
    assert type(make_job(TINY_TRAIN, TINY_MODEL, queue=queue)) is ProcessJob


def test_a_run_no_node_can_hold_is_refused_at_once(cluster):
    with pytest.raises(ValueError, match=f"no node of the Ray cluster has the 3 CPU .*{CPUS} CPU"):
        RayJob(TINY_TRAIN, TINY_MODEL, threads=3, queue=RunQueue(limit=1))


CLIENT_RUN = """
import json, sys
from transformer.runs.queue import RunQueue
from transformer.network.decoding import greedy_decode
from transformer.runs import make_job
from transformer.runs.ray_job import RayJob
from transformer.training.config import TrainConfig

job = make_job(TrainConfig.from_dict(json.loads(sys.argv[1])), json.loads(sys.argv[2]), max_steps=12,
               queue=RunQueue(limit=1))
assert isinstance(job, RayJob), job
job.start()
assert job.join(timeout=120)
snap, bundle = job.snapshot(), job.bundle()
print(json.dumps({"state": snap.state, "reason": snap.finished_reason, "step": snap.step,
                  "weights": bundle.card["steps"], "node_ip": job.node_ip,
                  "decodes": bool(greedy_decode(bundle.model, bundle.tokenizer, "ab").output_pieces)}))
"""


def test_a_server_outside_the_cluster_trains_through_ray_client(cluster):
    """AP_RAY_ADDRESS=ray://HOST:PORT: a server that is no node of the cluster (here: another process)."""
    run = subprocess.run([sys.executable, "-c", CLIENT_RUN, json.dumps(TINY_TRAIN.to_dict()), json.dumps(TINY_MODEL)],
                         env={**os.environ, RAY_ADDRESS_ENV: cluster.client_address}, cwd=ROOT,
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert json.loads(run.stdout.strip().splitlines()[-1]) == {
        "state": "finished", "reason": "max steps", "step": 12, "weights": 12, "node_ip": "127.0.0.1", "decodes": True}


def test_an_exchange_tried_again_hands_nothing_over_twice():
    """The reader calls exchange() again with the same number when Ray could not say whether a call ran."""
    actor = _TrainingActor(pickle.dumps([]), b"not a pickle")  # a run it cannot read: "failed", then goodbye
    first = actor.exchange(1, [b"step 5"])
    assert [pickle.loads(blob)[0] for blob in first] == ["failed", "goodbye"]
    assert "could not be read on this node" in pickle.loads(first[0])[1]
    assert actor.exchange(1, [b"step 5"]) == first and list(actor.mailbox._inbox) == [b"step 5"]
    assert actor.exchange(2, [b"pause"]) == [] and list(actor.mailbox._inbox) == [b"step 5", b"pause"]


def test_a_connection_that_fails_once_is_tried_again(monkeypatch):
    """Ray's client server sometimes fails to start a session's server; the connector tries ray.init again,
    and reports the last error only when every try failed."""
    import ray

    calls = []

    def flaky_init(**kwargs):
        calls.append(kwargs["address"])
        if len(calls) == 1:
            raise ConnectionAbortedError("Initialization failure from server: Starting Ray client server failed")

    monkeypatch.setattr(ray, "init", flaky_init)
    connector = _Connector("ray://127.0.0.1:1")
    connector.run()
    assert calls == ["ray://127.0.0.1:1"] * 2 and connector.error is None

    def failing_init(**kwargs):
        calls.append(kwargs["address"])
        raise ConnectionAbortedError(f"failure {len(calls)}")

    calls.clear()
    monkeypatch.setattr(ray, "init", failing_init)
    connector = _Connector("ray://127.0.0.1:1")
    connector.run()
    assert len(calls) == CONNECT_TRIES and connector.error == f"ConnectionAbortedError: failure {len(calls)}"
