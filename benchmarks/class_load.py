"""A class on one server, some of it misbehaving (issue 28, item 6). Prints JSON.

One fresh server (loopback, its own model store, stopped by its pid) and --sessions students at once for
--duration seconds, each a session of its own:
- --browsers of them in Chromium (Playwright, one context each, painting every chart): a well-behaved student
  who uploads a checkpoint named like a spreadsheet formula, shares its link and downloads the Compare page's
  CSV (checked: no cell starts like a formula); two mischievous ones who upload an ~8 MB checkpoint and Remove
  it, again and again, to push others' models out of the store; and one who clicks through a decode's steps
  (each click timed until its charts are painted).
- the rest are light clients that speak Streamlit's own websocket protocol (a BackMsg per rerun, the ForwardMsgs
  read until the run ends, the address bar's query string sent back as a browser does; no painting), round robin:
  decoders (a new input every few seconds: a full decode and its charts), trainers (a small run: Start, then the
  live view's fragment polled as the browser polls it, until it finishes), linkers (open the shared upload's link,
  then decode with it), walkers (Start, Pause, then sit idle: their workers should go back to the server),
  churners (Start and Stop five times in a row: a worker each time) and hostile linkers (pages opened by guessed,
  traversing and absurd link values).
Reported: server CPU per script run (full and fragment runs, from the timed server), the server's and its
workers' memory and the most workers alive, queue waits (Start to training) and refusals, the store (the
sharer's model still kept, bytes against the limit, temp files), and errors (exceptions shown, page errors,
server tracebacks, runs that never ended). With the machine: CPU model, torch's CPU capability, threads, load.

    python benchmarks/class_load.py [--sessions 30] [--browsers 4] [--duration 240] [--seed 0]
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import parse_qs, urlparse

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serving import (  # noqa: E402
    CHROMIUM, CHROMIUM_ARGS, IDLE, PLAYER_STEP_JS, ROOT, AppServer, busy_seconds, chromium_missing, cpu_seconds,
    descendants, load_average, percentiles, rss_mb,
)

EVIL = '=HYPERLINK(CONCAT("http:",CHAR(47),CHAR(47),"evil.example"),"Click")'
SMALL_RUN = "v=1&d_model=16&d_ff=32&n_heads=2&batch_size=16&stop_early=0&steps={steps}"
# The class's server: the defaults for a class of 30, but a smaller store (so two mischievous students could
# fill it) and a shorter idle time before a paused run's worker goes back (so it happens within the window).
SERVER_ENV = {"AP_MODEL_STORE_MB": "30", "AP_STORE_SESSION_MB": "20", "AP_PARK_AFTER_S": "30",
              "AP_WORKER_NICE": "10"}  # a class server's setting (docs/SERVING.md)
HOSTILE = [("decode", "v=1&model=../../etc/passwd"), ("decode", "v=1&model=uploaded:" + "A" * 22),
           ("decode", "v=1&model=trained:%00&input=%3Cimg%20src=x%3E"), ("decode", "v=1&step=-1&knocked=zz"),
           ("decode", "v=99&step=99999999999999999999"), ("train", "v=1&steps=1e309&d_model=0&task=../x"),
           ("train", "v=1&probe=" + "x" * 5000), ("checkpoints", "v=1&inspect=..%2F..%2Fx&samples=-5"),
           ("compare", "v=1&a=../../etc/passwd&b=uploaded:zz"), ("errors", "v=1&samples=nan&seed=1e99")]
RUN_TIMEOUT = 180.0  # seconds a light client waits for one script run to end (30 sessions on 2 cores: slow)


class Light:
    """A session driven over Streamlit's websocket protocol: `run` sends one rerun and reads until it ends."""

    def __init__(self, url: str, name: str, report: dict):
        self.url, self.name, self.report = url, name, report
        self.query = ""
        self.widgets: dict[str, str] = {}  # widget key -> id, from the last runs
        self.texts: list[str] = []  # what the last run showed: markdown, alerts, progress
        self.fragments: dict[str, float] = {}  # fragment id -> seconds between its automatic reruns

    async def __aenter__(self):
        import websockets

        # No pings of its own, as a browser: under load a late pong closed the connection, which no browser does;
        # and a browser's patience for the handshake (the websockets library's 10 s ran out at load 20).
        self.ws = await websockets.connect(self.url.replace("http", "ws", 1) + "/_stcore/stream",
                                           subprotocols=["streamlit"], max_size=None, ping_interval=None,
                                           open_timeout=RUN_TIMEOUT)
        return self

    async def __aexit__(self, *exc):
        await self.ws.close()

    async def run(self, page: str, query: str | None = None, click: str | None = None, text: tuple | None = None,
                  fragment: str | None = None) -> float:
        """One rerun of `page` (a link's `query`, else the address bar's), clicking the button keyed `click` or
        typing `text` (key, value) into a text input; returns its seconds (None when it never ended)."""
        from streamlit.proto.BackMsg_pb2 import BackMsg
        from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

        back = BackMsg()
        rerun = back.rerun_script
        rerun.query_string, rerun.page_name = self.query if query is None else query, page
        if fragment:
            rerun.fragment_id, rerun.is_auto_rerun = fragment, True
        if click or text:
            state = rerun.widget_states.widgets.add()
            state.id = self.widgets[click or text[0]]
            if click:
                state.trigger_value = True
            else:
                state.string_value = text[1]
        self.texts = []
        began = time.perf_counter()
        await self.ws.send(back.SerializeToString())
        while True:
            try:
                message = ForwardMsg.FromString(await asyncio.wait_for(self.ws.recv(), RUN_TIMEOUT))
            except Exception as exc:  # noqa: BLE001 - the time limit, or a closed connection
                self.report["errors"].append(f"{self.name}: a run of {page} never ended ({type(exc).__name__})")
                return None
            kind = message.WhichOneof("type")
            if kind == "delta" and message.delta.WhichOneof("type") == "new_element":
                self.element(message.delta.new_element)
            elif kind == "page_info_changed":
                self.query = message.page_info_changed.query_string
            elif kind == "new_session":
                self.fragments = {}
            elif kind == "auto_rerun":
                self.fragments[message.auto_rerun.fragment_id] = message.auto_rerun.interval
            elif kind == "stop_auto_rerun":
                for fragment_id in message.stop_auto_rerun.fragment_ids:
                    self.fragments.pop(fragment_id, None)
            elif kind == "script_finished" and message.script_finished != ForwardMsg.FINISHED_EARLY_FOR_RERUN:
                return time.perf_counter() - began

    def element(self, element) -> None:
        kind = element.WhichOneof("type")
        body = getattr(element, kind)
        if kind == "exception":
            self.report["errors"].append(f"{self.name}: exception shown: {body.type}: {body.message[:120]}")
        if getattr(body, "id", "").startswith("$$ID-"):
            self.widgets[body.id.split("-", 2)[2]] = body.id
        if kind in ("markdown", "alert", "progress"):
            self.texts.append(getattr(body, "body", "") or getattr(body, "text", ""))

    def shows(self, words: str) -> bool:
        return any(words in text for text in self.texts)


# ------------------------------------------------------------------------------------- light roles

async def decoder(s: Light, until: float, rng: random.Random, clicks: list) -> None:
    await s.run("decode", "v=1&input=abcd")
    while time.monotonic() < until:
        await asyncio.sleep(rng.uniform(2, 6))
        word = "".join(rng.choice("abcdefghij") for _ in range(rng.randint(3, 10)))
        if (seconds := await s.run("decode", text=("shared_input_widget", word))) is not None:
            clicks.append(seconds * 1000)


async def trainer(s: Light, until: float, rng: random.Random, report: dict, steps: int = 150) -> None:
    await s.run("train", SMALL_RUN.format(steps=steps))
    clicked = time.monotonic()
    await s.run("train", click="train_start")
    if s.shows("Cannot start"):
        report["runs_refused"].append(next(t for t in s.texts if "Cannot start" in t)[:160])
        return
    started = None
    while time.monotonic() < until and not s.shows("Finished"):
        await poll(s)
        if started is None and s.shows("Training…"):
            started = time.monotonic()
            report["queue_waits_s"].append(round(started - clicked, 2))
    report["runs_finished" if s.shows("Finished") else "runs_unfinished"] += 1


async def poll(s: Light) -> None:
    """What the browser does while the Train page's live view runs: rerun its fragment every so often (the page
    itself when the view is not polling)."""
    fragment, every = next(reversed(s.fragments.items()), (None, 0.75))
    await asyncio.sleep(every)
    await s.run("train", fragment=fragment)


async def linker(s: Light, until: float, rng: random.Random, shared: asyncio.Future, report: dict) -> None:
    key = await asyncio.wait_for(asyncio.shield(shared), max(1.0, until - time.monotonic()))
    await s.run("decode", f"v=1&model={key}&input=abc")
    if s.shows("no longer kept"):
        report["links_evicted"] += 1
    report["links_opened"] += 1
    await decoder(s, until, rng, [])


async def walker(s: Light, until: float, rng: random.Random, report: dict) -> None:
    await s.run("train", SMALL_RUN.format(steps=100_000))
    await s.run("train", click="train_start")
    while not s.shows("Training…") and time.monotonic() < until:  # it may wait in line first
        await poll(s)
    await asyncio.sleep(rng.uniform(3, 6))
    await s.run("train", click="train_pause")
    paused = time.monotonic()
    report["walked_away"] += 1
    await asyncio.sleep(max(0.0, min(until - time.monotonic(), float(SERVER_ENV["AP_PARK_AFTER_S"]) + 20)))
    await s.run("train")  # back at the tab once its worker should have gone back to the server
    back = s.shows("went back to the server")
    report["walkers"].append({"paused_s": round(time.monotonic() - paused, 1), "worker_went_back": back})
    await asyncio.sleep(max(0.0, until - time.monotonic()))  # connected, idle: its tab stays open


async def churner(s: Light, until: float, rng: random.Random, report: dict) -> None:
    """Start and Stop, again and again: every Start a new worker; at most one run of the session lives at a time.
    (A Start clicked while its button is disabled never arrives: Streamlit 1.67 drops a disabled widget's click.)"""
    await s.run("train", SMALL_RUN.format(steps=100_000))
    for _ in range(5):
        await s.run("train", click="train_start")
        report["churn_refused" if s.shows("Cannot start") else "churn_started"] += 1
        await asyncio.sleep(rng.uniform(1, 3))
        await s.run("train", click="train_stop")


async def hostile(s: Light, until: float, rng: random.Random, report: dict) -> None:
    for page, query in HOSTILE:
        if await s.run(page, query) is not None:
            report["hostile_links"] += 1


# ------------------------------------------------------------------------------------ browser roles

async def idle(page) -> None:
    await page.wait_for_selector(IDLE, timeout=300_000)
    await page.wait_for_timeout(300)
    await page.wait_for_selector(IDLE, timeout=300_000)


OUTCOME = "[data-testid=stAlertContentSuccess], [data-testid=stAlertContentError]"


async def upload(page, path: Path, name: str, tag: str, wait_s: float = 300) -> bool:
    """Upload `path` as `name` on the Checkpoints page; True when it was kept, False when refused (the outcome is
    the message that shows `tag`, a plain part of the name)."""
    await page.locator(".st-key-ckpt_upload input[type=file]").set_input_files(
        {"name": name, "mimeType": "application/octet-stream", "buffer": path.read_bytes()})
    outcome = page.locator(OUTCOME).filter(has_text=tag)
    await outcome.first.wait_for(timeout=wait_s * 1000)
    await idle(page)
    return await outcome.first.get_attribute("data-testid") == "stAlertContentSuccess"


async def sharer(page, url: str, path: Path, shared: asyncio.Future, report: dict) -> None:
    """Upload a formula-named checkpoint, share its link, download the Compare page's CSV."""
    await page.goto(f"{url}/checkpoints")
    await idle(page)
    if not await upload(page, path, f"{EVIL}.safetensors", "HYPERLINK"):
        report["errors"].append("sharer: the upload was refused")
        return
    await page.locator("[data-testid=stSidebarNav]").get_by_role("link", name="Step-by-step decoding").click()
    await page.wait_for_url("**/decode**")  # moving within the app keeps the session (a reload would not)
    await idle(page)
    key = parse_qs(urlparse(page.url).query).get("model", [None])[0]
    if key is None:
        report["errors"].append("sharer: the upload's link was not in the address bar")
        return
    report["shared_model"] = key
    shared.set_result(key)
    await page.goto(f"{url}/compare?v=1&a={key}&b=shipped:reverse")
    await idle(page)
    async with page.expect_download() as download:
        await page.locator(".st-key-compare_facts_csv button").click()
    text = Path(await (await download.value).path()).read_text("utf-8")
    cells = [cell for row in csv.reader(io.StringIO(text, newline="")) for cell in row]
    report["csv_formula_cells"] = sum(cell[:1] in ("=", "+", "@", "\t", "\r") for cell in cells)
    report["csv_name_cells"] = [cell for cell in cells if "HYPERLINK" in cell]  # as the classmate's file has it
    report["csv_name_neutralised"] = any(cell.startswith("'=HYPERLINK") for cell in cells)


async def mischief(page, url: str, path: Path, until: float, report: dict) -> None:
    """Upload a big checkpoint and Remove it, again and again (the issue's store-eviction attack)."""
    from playwright.async_api import TimeoutError as NoOutcome

    await page.goto(f"{url}/checkpoints")
    await idle(page)
    round_ = 0
    while time.monotonic() < until:
        round_ += 1
        try:
            kept = await upload(page, path, f"big{round_}.safetensors", f"big{round_}.", wait_s=120)
        except NoOutcome:  # seen under load: no outcome after a Remove; the student reloads (a new session)
            report["uploads_without_outcome"] += 1
            await page.reload()
            await idle(page)
            continue
        if kept:
            report["uploads_kept"] += 1
        else:
            why = await page.locator("[data-testid=stAlertContentError]").filter(has_text=f"big{round_}.").inner_text()
            reason = "own share full" if "your share" in why else "store full" if "storage is full" in why else why
            report["uploads_refused"][reason] = report["uploads_refused"].get(reason, 0) + 1
        if round_ % 3 and kept:  # two of three kept uploads are removed again
            await page.locator(".st-key-ckpt_remove").get_by_role("button", name="Remove").click()
            await idle(page)


async def clicker(page, url: str, until: float, clicks: list) -> None:
    await page.goto(f"{url}/decode")
    await idle(page)
    while time.monotonic() < until:
        result = await page.evaluate(PLAYER_STEP_JS, "next")
        if result["disabled"]:
            await page.evaluate(PLAYER_STEP_JS, "first")
        elif result["ms"] is not None:
            clicks.append(result["ms"])
        await idle(page)
        await asyncio.sleep(2)


# --------------------------------------------------------------------------------------------- the class

def big_checkpoint(folder: Path) -> Path:
    """An ~8 MB checkpoint (a wider reverse model, untrained): a mischievous student's upload."""
    sys.path.insert(0, str(ROOT))
    from transformer.training.config import TrainConfig
    from transformer.training.trainer import Trainer
    from transformer.store.checkpoints import save_bundle

    trainer = Trainer(TrainConfig(task="reverse", device="cpu"), {"d_model": 192, "d_ff": 768, "n_heads": 4,
                                                                  "n_enc_layers": 2, "n_dec_layers": 2})
    return save_bundle(trainer.bundle("big"), folder / "big.safetensors")


def shared_checkpoint(folder: Path) -> Path:
    """The shipped reverse model with its output biases nudged: a trained model the app does not list (an upload of
    the shipped file itself is named as that model and not added, and its link names no new model)."""
    sys.path.insert(0, str(ROOT))
    import torch

    from transformer.store.checkpoints import load_bundle, save_bundle

    bundle = load_bundle(ROOT / "assets" / "checkpoints" / "reverse.safetensors")
    with torch.no_grad():
        bundle.model.generator.proj.bias.add_(0.01)
    return save_bundle(bundle, folder / "shared.safetensors")


async def watch(server: AppServer, peak: dict, stop: asyncio.Event) -> dict:
    """Every half second: the server's memory, its workers' count and memory; and every process's CPU by whose it
    is (the server, its workers, Chromium, this script). Returns the cores each used over the class, and the rest
    of the machine (other work on it)."""
    me, seen = os.getpid(), {}  # pid -> [group, CPU seconds when first seen (0: started meanwhile), last]
    began, busy = time.monotonic(), busy_seconds()
    first = True
    while not stop.is_set():
        workers = server.children()
        peak["server_rss_mb"] = max(peak["server_rss_mb"], server.rss_mb())
        peak["workers"] = max(peak["workers"], len(workers))
        peak["workers_rss_mb"] = max(peak["workers_rss_mb"], round(sum(rss_mb(pid) for pid in workers), 1))
        browser = [pid for pid in descendants(me) if pid != server.pid and pid not in workers]
        groups = [(server.pid, "server"), (me, "this_script"), *((pid, "workers") for pid in workers),
                  *((pid, "browser") for pid in browser)]
        for pid, group in groups:
            used = cpu_seconds(pid)
            entry = seen.setdefault(pid, [group, used if first else 0.0, used])
            entry[2] = max(entry[2], used)
        first = False
        await asyncio.sleep(0.5)
    span = time.monotonic() - began
    cores = {group: 0.0 for group in ("server", "workers", "browser", "this_script")}
    for group, start, last in seen.values():
        cores[group] += (last - start) / span
    cores["machine"] = (busy_seconds() - busy) / span
    cores["others"] = max(0.0, cores["machine"] - sum(v for k, v in cores.items() if k != "machine"))
    return {group: round(value, 2) for group, value in cores.items()}


async def the_class(server: AppServer, args, report: dict, big: Path, share: Path) -> dict:
    from playwright.async_api import async_playwright

    rng = random.Random(args.seed)
    until = time.monotonic() + args.duration
    shared: asyncio.Future = asyncio.get_running_loop().create_future()
    clicks = {"light_decode_ms": [], "browser_step_ms": []}
    roles = ["decoder", "trainer", "decoder", "linker", "trainer", "walker", "decoder", "churner", "hostile"]
    lights = [roles[i % len(roles)] for i in range(args.sessions - args.browsers)]
    report["roles"] = {role: lights.count(role) for role in roles} | {"browser": args.browsers}

    async def light(i: int, role: str) -> None:
        await asyncio.sleep(rng.uniform(0, 10))  # a class arrives within a few seconds
        async with Light(server.url, f"{role}{i}", report) as s:
            own = random.Random(args.seed * 1000 + i)
            if role == "decoder":
                await decoder(s, until, own, clicks["light_decode_ms"])
            elif role == "linker":
                await linker(s, until, own, shared, report)
            else:
                await {"trainer": trainer, "walker": walker, "churner": churner, "hostile": hostile}[role](
                    s, until, own, report)

    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        pages = []
        for _ in range(args.browsers):
            context = await browser.new_context(viewport={"width": 1280, "height": 800}, accept_downloads=True)
            page = await context.new_page()
            page.set_default_timeout(300_000)
            page.on("pageerror", lambda exc: report["errors"].append(f"page error: {exc}"))
            pages.append(page)
        tabs = [sharer(pages[0], server.url, share, shared, report)]
        tabs += [mischief(page, server.url, big, until, report) for page in pages[1:3]]
        tabs += [clicker(page, server.url, until, clicks["browser_step_ms"]) for page in pages[3:]]
        tasks = [light(i, role) for i, role in enumerate(lights)] + tabs
        results = await asyncio.gather(*tasks, return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                report["errors"].append(f"a student's script failed: {type(result).__name__}: {str(result)[:200]}")
        for page in pages:
            report["exceptions_in_browsers"] += await page.locator("[data-testid=stException]").count()
        await browser.close()
    return clicks


def machine() -> dict:
    import torch

    lscpu = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    model = next((line.split(":", 1)[1].strip() for line in lscpu.splitlines() if line.startswith("Model name")),
                 platform.processor())
    return {"cpu": model, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "cores": len(os.sched_getaffinity(0)), "torch_threads_per_worker": 1, "load_average_before": load_average()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=30)
    parser.add_argument("--browsers", type=int, default=4, help="Chromium students (at least 1: the sharer)")
    parser.add_argument("--duration", type=float, default=240.0, help="seconds the class works")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if (missing := chromium_missing()) is not None:
        raise SystemExit(missing)
    counts = ("runs_finished", "runs_unfinished", "links_opened", "links_evicted", "walked_away", "churn_started",
              "churn_refused", "hostile_links", "uploads_kept", "uploads_without_outcome", "exceptions_in_browsers")
    report = {"machine": machine(), "settings": dict(SERVER_ENV), "errors": [], "runs_refused": [],
              "queue_waits_s": [], "uploads_refused": {}, "walkers": [], **dict.fromkeys(counts, 0)}
    folder = Path(tempfile.mkdtemp(prefix="ap-class-"))
    big, share = big_checkpoint(folder), shared_checkpoint(folder)
    report["big_upload_mb"] = round(big.stat().st_size / 2**20, 1)
    server = AppServer(env=SERVER_ENV, timed=True)
    peak = {"server_rss_mb": 0.0, "workers": 0, "workers_rss_mb": 0.0}
    try:
        cpu_before = cpu_seconds(server.pid)
        began = time.monotonic()

        async def go():
            stop = asyncio.Event()
            watcher = asyncio.create_task(watch(server, peak, stop))
            clicks = await the_class(server, args, report, big, share)
            stop.set()
            report["cores_used"] = await watcher
            return clicks

        clicks = asyncio.run(go())
        wall = time.monotonic() - began
        runs = server.script_runs()
        report["server"] = {
            "cpu_cores_used": round((cpu_seconds(server.pid) - cpu_before) / wall, 2), "wall_s": round(wall, 1),
            "script_runs": len(runs),
            "cpu_ms_per_full_run": percentiles([r["cpu_ms"] for r in runs if not r["fragment"]]),
            "cpu_ms_per_fragment_run": percentiles([r["cpu_ms"] for r in runs if r["fragment"]]),
            "wall_ms_per_run": percentiles([r["ms"] for r in runs]), **peak,
            "workers_at_end": len(server.children()), "tracebacks_in_log": server.tracebacks()}
        report["clicks"] = {name: percentiles(values) for name, values in clicks.items()}
        report["queue_waits_s"] = percentiles([1000 * s for s in report["queue_waits_s"]]) | {"unit": "ms"}
        report["store"] = store_state(Path(server.store), report.get("shared_model"))
    finally:
        report["stop"] = server.stop()
    report["load_average_after"] = load_average()
    print(json.dumps(report, indent=1))


def store_state(folder: Path, shared: str | None) -> dict:
    files = [p for p in folder.iterdir() if p.is_file()]
    kept = [p for p in files if p.suffix == ".safetensors" and not p.name.startswith(".")]
    return {"models": len(kept), "mb": round(sum(p.stat().st_size for p in kept) / 2**20, 1),
            "limit_mb": float(SERVER_ENV["AP_MODEL_STORE_MB"]),
            "temp_files": sum(p.name.endswith(".tmp") for p in files),
            "shared_model_kept": shared is not None and (folder / f"{shared.partition(':')[2]}.safetensors").exists()}


if __name__ == "__main__":
    main()
