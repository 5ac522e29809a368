"""Training on a Ray cluster: RayJob has ProcessJob's API (start / pause / resume / stop / step(n) / heartbeat /
join / snapshot() / bundle() / set_probe_text / position()), but its worker is a Ray actor that Ray places
on a machine of the cluster (issue 10, item 4). make_job() picks the backend from the configuration.

Configuration
- AP_RAY_ADDRESS: the cluster, as ray.init takes it: "auto" (this machine is a node of the cluster,
  e.g. joined with `ray start --address=HEAD:6379 --num-cpus=0`), "HOST:PORT" (the head's GCS, from a node) or
  "ray://HOST:10001" (Ray Client, from a machine outside the cluster; needs `ray[client]`, which
  requirements-cluster.txt installs). Unset or empty: no Ray.
- AP_RAY_CONNECT_TIMEOUT: seconds a RayJob waits for the first connection (default 60; see connect()).
- `ray` is an optional extra (requirements-cluster.txt); nothing imports it until a RayJob is built.
- make_job(train, model, **kwargs): a RayJob when AP_RAY_ADDRESS is set and ray can be imported, else a
  ProcessJob (and a warning in the log when the address is set but ray is missing). Same arguments.

How it works
- The parent side is ProcessJob's (this class inherits it): states, the RunQueue slot taken on start /
  resume / step and given back on pause / stop / end, commands with sequence numbers, the reader that
  applies progress, the goodbye, a death without one reported as "killed". Only the transport differs.
- The actor (num_cpus = the job's torch threads, default 1; num_gpus=1 for device "cuda"; no restarts)
  runs relay.serve, the ProcessJob worker's own loop (an ordinary TrainingJob, started paused, and
  relay.Relay), in a thread, over an in-memory mailbox instead of a pipe. The messages are those of the
  pipe, as pickled bytes (so no array arrives as a read-only view of Ray's object store).
- One reader thread per job calls the actor's exchange(commands) every POLL_EVERY seconds, at once when
  a command is sent, and every 10 ms while a command waits for its answer: it hands over the commands sent
  since its last call and takes what the relay has published since (progress every PUBLISH_EVERY while
  something changed, with the history rows and probes since the last it sent, as over the pipe; weights
  when they changed). A single-threaded actor runs calls in order, so commands stay in order.
  pause() and stop() return once the relay answered, which it does only when its TrainingJob is between
  steps: the same guarantee as ProcessJob.
- The job's code reaches the cluster with it: connect() gives the Ray job a runtime_env that ships this
  package (py_modules; Ray uploads it to the cluster once per content), and the actor appends this process's
  sys.path entries that exist on its node (how the tests' probes import). A process that was connected to
  Ray before (a notebook's ray.init) ships nothing: there the package must be importable on every node.
  Every node needs the same Python packages (requirements.txt); the probe must be picklable, as for
  ProcessJob.
- A killed actor (SIGKILL, Ray's out-of-memory killer, ray.kill) or a lost node makes the exchange fail
  with Ray's ActorDiedError: the job becomes "error" with finished_reason "killed" and a message saying
  what Ray says happened; the last snapshot and weights stay. An actor Ray cannot start (e.g. its runtime
  environment failed) is an "error" saying so. A node that vanishes without a word is declared dead by
  Ray's health checks (tens of seconds by default), not at once as a closed pipe is.
- The actors are not detached: when the server's Ray connection ends (the server exits or dies), Ray
  ends them. A finished or stopped job's actor is killed once the reader has its goodbye.
- Placement is Ray's (scheduling_strategy "SPREAD": runs are spread over the machines that have a CPU
  free, rather than packed onto the first). The RunQueue
  still decides when a run may start, so AP_MAX_RUNS should not exceed the cluster's CPUs. A paused run
  gives its RunQueue slot back (as ProcessJob's) but its actor keeps the CPU Ray reserved for it; a run
  let in while paused runs hold every CPU waits, at step 0, until Ray can place its actor.

Measured once on the 2-core machine (load average 4-6 from other work) with a local one-node cluster, the
default model on `reverse`, back to back with ProcessJob: connecting 0.9 s; start() to the first step 6.1 s
(ProcessJob 2.3-7.6 s: both start a fresh interpreter that imports torch, the actor ray too); 27-32 steps/s
(ProcessJob 34-35); the server's CPU per running job 1.5% of a core when the reader polled every 0.1 s (0.3%
for ProcessJob's pipe), hence POLL_EVERY. tests/unit/test_ray_jobs.py: a SIGKILLed actor is reported in 0.05-0.2 s.
"""

from __future__ import annotations

import collections
import importlib.util
import logging
import os
import pickle
import sys
import threading
import time

import transformer
from transformer import settings
from transformer.runs import relay
from transformer.runs.job import Ending, State
from transformer.runs.process_job import ProcessJob
from transformer.training.config import TrainConfig

__all__ = ["RAY_ADDRESS_ENV", "RayJob", "connect", "ray_available"]

RAY_ADDRESS_ENV = "AP_RAY_ADDRESS"
NAMESPACE = "attention-playground"
# ray.init attempts per connection: through a ray:// address the cluster's client server now and then fails to
# start the session's own server ("Starting Ray client server failed", once in a CI run); the next try works.
CONNECT_TRIES = 2
POLL_EVERY = 0.25  # seconds between exchanges (each costs the server ~1.5 ms of CPU; measured)
COMMAND_POLL = 0.01  # seconds between exchanges while a command waits for its answer
MAILBOX_LIMIT = 256  # unread messages an actor holds before its relay waits (as a full pipe makes it wait)
PACKAGE_DIR = os.path.dirname(transformer.__file__)  # the whole library ships to the cluster, not this room alone

log = logging.getLogger(__name__)
_connect_lock = threading.Lock()
_actor_class = None
_connector: _Connector | None = None


def ray_available() -> bool:
    """Whether `ray` can be imported here (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def _ray():
    """The `ray` module. Imported on first use only: it is an optional extra (requirements-cluster.txt), and its
    import takes seconds that a server without a cluster should not pay."""
    import ray  # function-local: optional, and slow to import

    return ray


def configured_address() -> str | None:
    """AP_RAY_ADDRESS, stripped; None when unset or empty."""
    return settings.get(RAY_ADDRESS_ENV)


def connect(address: str | None = None, timeout: float | None = None) -> None:
    """Connect this process to the Ray cluster at `address` (default AP_RAY_ADDRESS), once; a process that
    is connected already (e.g. a notebook that called ray.init) keeps its connection. ray.init runs in a
    thread of its own: ConnectionError when it failed, or when it has not succeeded within `timeout` seconds
    (default AP_RAY_CONNECT_TIMEOUT, 60; an unreachable address can make ray.init retry for many minutes,
    and a page must not wait that long; that attempt goes on, and the next call waits for it again)."""
    ray = _ray()
    global _connector
    if ray.is_initialized():
        return
    address = address or configured_address()
    if address is None:
        raise ValueError(f"no Ray cluster to connect to: set {RAY_ADDRESS_ENV} (e.g. 'auto' or 'ray://HOST:10001')")
    if timeout is None:
        timeout = settings.get("AP_RAY_CONNECT_TIMEOUT")
    with _connect_lock:
        if _connector is None or not _connector.is_alive():
            _connector = _Connector(address)
            _connector.start()
        attempt = _connector
    attempt.join(timeout)
    if ray.is_initialized():
        return
    if attempt.is_alive():
        raise ConnectionError(f"the Ray cluster at {attempt.address!r} ({RAY_ADDRESS_ENV}) has not answered "
                              f"within {timeout:g} s; still trying")
    raise ConnectionError(f"could not connect to the Ray cluster at {attempt.address!r} ({RAY_ADDRESS_ENV}): "
                          f"{attempt.error}")


class _Connector(threading.Thread):
    """ray.init, tried up to CONNECT_TRIES times (in a thread: it cannot be interrupted, and it leaves the
    SIGTERM handling of the server's main thread alone)."""

    def __init__(self, address: str):
        super().__init__(name="ray-connect", daemon=True)
        self.address = address
        self.error: str | None = None

    def run(self) -> None:
        ray = _ray()
        for _ in range(CONNECT_TRIES):
            try:
                ray.init(address=self.address, namespace=NAMESPACE, log_to_driver=False,
                         logging_level=logging.WARNING,
                         runtime_env={"py_modules": [PACKAGE_DIR], "excludes": ["__pycache__"]})
                self.error = None
                return
            except Exception as exc:  # noqa: BLE001 - the caller raises the last one as a ConnectionError
                self.error = f"{type(exc).__name__}: {exc}"


def _lost_message(exc: BaseException, step: int) -> str:
    """What the page says about an actor Ray reports dead: Ray's reason, its first sentence, and the step."""
    kept = f"at step {step:,}; its last snapshot and weights are kept"
    lines = [line.strip() for line in str(exc).splitlines()]
    detail = [line for line in lines if line and ":" not in line[:20] and not line.startswith("The actor died unexpec")]
    reason = (detail[0] if detail else lines[0] if lines else type(exc).__name__).split(". ")[0].rstrip(".")
    if "node" in reason.lower() and ("died" in reason.lower() or "dead" in reason.lower()):
        return f"the machine that ran the training actor left the Ray cluster ({reason}) {kept}"
    return f"the training actor on the Ray cluster was killed ({reason}) {kept}"


class _Mailbox:
    """multiprocessing Connection's send_bytes / recv_bytes / poll over two in-memory queues, for
    relay.serve in a Ray actor: the relay's messages wait in `outbox` until the server's next exchange
    takes them; the server's commands wait in `inbox` for the relay."""

    def __init__(self):
        self._cond = threading.Condition()
        self._inbox: collections.deque[bytes] = collections.deque()
        self._outbox: list[bytes] = []

    # the relay's side (relay.serve)
    def send_bytes(self, blob: bytes) -> None:
        with self._cond:
            self._cond.wait_for(lambda: len(self._outbox) < MAILBOX_LIMIT)
            self._outbox.append(blob)

    def poll(self, timeout: float | None = 0.0) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: bool(self._inbox), timeout)

    def recv_bytes(self) -> bytes:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._inbox))
            return self._inbox.popleft()

    # the actor's side (the server's exchange)
    def deliver(self, blobs: list[bytes]) -> None:
        with self._cond:
            self._inbox.extend(blobs)
            self._cond.notify_all()

    def collect(self) -> list[bytes]:
        with self._cond:
            out, self._outbox = self._outbox, []
            self._cond.notify_all()
            return out


class _TrainingActor:
    """The Ray actor: relay.serve in a thread, and the exchange the server's reader calls."""

    def __init__(self, path_blob: bytes, spec_blob: bytes):
        for entry in pickle.loads(path_blob):  # after its own: the server's paths that exist on this node
            if entry and entry not in sys.path and os.path.isdir(entry):
                sys.path.append(entry)
        self.mailbox = _Mailbox()
        self.last_call, self.last_reply = 0, []
        try:
            spec = pickle.loads(spec_blob)  # now: the probe's module may be on one of those paths
        except Exception as exc:  # noqa: BLE001 - e.g. the probe's module is missing on this node
            message = f"the run could not be read on this node: {type(exc).__name__}: {exc}"
            self.mailbox.send_bytes(relay.dumps(("failed", message)))
            self.mailbox.send_bytes(relay.dumps(("goodbye",)))
            return
        threading.Thread(target=relay.serve, args=(self.mailbox, spec), name="training-relay", daemon=True).start()

    def where(self) -> dict:
        """Which process on which node runs this actor."""
        ray = _ray()
        context = ray.get_runtime_context()
        return {"pid": os.getpid(), "node_id": context.get_node_id(), "node_ip": ray.util.get_node_ip_address()}

    def exchange(self, call: int, commands: list[bytes]) -> list[bytes]:
        """Hand the relay the server's commands; return what it published since the last call. A call
        tried again (the same number: its answer was lost) hands nothing over twice and answers again."""
        if call == self.last_call:
            self.last_reply += self.mailbox.collect()
        else:
            self.mailbox.deliver(commands)
            self.last_call, self.last_reply = call, self.mailbox.collect()
        return self.last_reply


def _remote_class():
    global _actor_class
    ray = _ray()
    if _actor_class is None:
        _actor_class = ray.remote(_TrainingActor)
    return _actor_class


class RayJob(ProcessJob):
    """A training run in a Ray actor that Ray places on the cluster; ProcessJob's API (see the module
    docstring). The same arguments as ProcessJob, plus `address` (default AP_RAY_ADDRESS): building one
    connects this process to the cluster (ConnectionError when none answers; ValueError when no node of
    the cluster could ever hold its actor)."""
    PARKS = False  # a paused run's actor keeps its place on the cluster (see the module docstring)

    def __init__(self, train: TrainConfig, model: dict | None = None, *args, address: str | None = None,
                 **kwargs):
        kwargs.pop("launcher", None)  # ProcessJob's way of getting a process; Ray starts the actor
        super().__init__(train, model, *args, **kwargs)
        connect(address)
        self._resources = {"num_cpus": self.threads, "num_gpus": 1 if self.train.device == "cuda" else 0}
        self._check_fits()
        self._outgoing: list[bytes] = []  # commands for the actor, taken by the reader's next exchange
        self._wake = threading.Event()  # a command waits: the reader exchanges now
        self._where: dict | None = None

    @property
    def pid(self) -> int | None:
        """The actor's process id on its node (None until Ray has started it)."""
        where = self._where
        return None if where is None else where["pid"]

    @property
    def node_ip(self) -> str | None:
        """The address of the node Ray placed the actor on (None until Ray has started it)."""
        where = self._where
        return None if where is None else where["node_ip"]

    def _check_fits(self) -> None:
        ray = _ray()
        nodes = [node.get("Resources", {}) for node in ray.nodes() if node.get("Alive")]
        need = {"CPU": self._resources["num_cpus"], "GPU": self._resources["num_gpus"]}
        if not any(all(res.get(key, 0) >= amount for key, amount in need.items() if amount) for res in nodes):
            have = ", ".join(f"{res.get('CPU', 0):g} CPU / {res.get('GPU', 0):g} GPU" for res in nodes) or "none"
            raise ValueError(f"no node of the Ray cluster has the {need['CPU']} CPU and {need['GPU']} GPU a run "
                             f"needs (its nodes: {have})")

    # -- the transport (ProcessJob's hooks) --------------------------------------------------------------
    def _send(self, message) -> None:
        self._outgoing.append(relay.dumps(message))  # (under self._lock, as ProcessJob sends)
        self._wake.set()

    def _terminate(self) -> None:
        ray = _ray()
        try:
            ray.kill(self._proc, no_restart=True)
        except Exception:  # noqa: BLE001 - gone already: the reader reports it
            pass

    def _spawn(self) -> None:
        try:
            actor = _remote_class().options(
                max_restarts=0, max_task_retries=0, scheduling_strategy="SPREAD", **self._resources,
            ).remote(relay.dumps(list(sys.path)), relay.dumps(self._spec()))
        except Exception as exc:  # noqa: BLE001 - e.g. the cluster is gone: the page must hear why
            self._status, self._reason = State.ERROR, Ending.ERROR
            self._error = f"the Ray cluster could not take the run: {type(exc).__name__}: {exc}"
            self._ended.set()
            return
        self._proc = actor
        threading.Thread(target=self._exchange_loop, args=(actor,), name="training-ray-reader", daemon=True).start()

    # -- the reader thread ----------------------------------------------------------------------------
    def _exchange_loop(self, actor) -> None:
        ray = _ray()
        ActorDiedError, ActorUnavailableError, RayError = (  # ray's exception classes
            ray.exceptions.ActorDiedError, ray.exceptions.ActorUnavailableError, ray.exceptions.RayError)

        lost: BaseException | None = None
        try:
            try:
                self._where = ray.get(actor.where.remote())  # returns once Ray has placed and started it
            except RayError as exc:
                return self._failed(f"the Ray cluster could not start the training actor: {_first_line(exc)}")
            call = 0
            while not self._goodbye:
                call += 1
                with self._lock:
                    outgoing, self._outgoing = self._outgoing, []
                while True:
                    try:
                        blobs = ray.get(actor.exchange.remote(call, outgoing))
                        break
                    except ActorUnavailableError:  # unreachable for now (Ray says so when it is dead): the
                        time.sleep(relay.PUBLISH_EVERY)  # same call again, which the actor runs at most once
                for blob in blobs:
                    self._receive(pickle.loads(blob))
                if self._goodbye:
                    break
                with self._lock:
                    waiting = self._acked < self._sent or self._stopping
                self._wake.wait(COMMAND_POLL if waiting else POLL_EVERY)
                self._wake.clear()
        except ActorDiedError as exc:
            lost = exc
        except RayError as exc:  # e.g. the exchange itself failed: a message that cannot be read
            self._failed(f"the training actor failed: {_first_line(exc)}")
        except Exception as exc:  # noqa: BLE001 - e.g. ray.shutdown() in this process: say so, do not hang
            self._failed(f"lost the Ray cluster: {type(exc).__name__}: {exc}")
        finally:
            self._terminate()  # ended (goodbye) or failed: its CPU goes back to the cluster
            self._mark_ended(lambda step: _lost_message(lost, step))

    def _failed(self, message: str) -> None:
        with self._lock:
            if self._status != State.ERROR and not self._goodbye and not self._stopping:
                self._status, self._reason, self._error = State.ERROR, Ending.ERROR, message


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0] if text else ''}"

