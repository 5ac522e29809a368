"""Hostile uploads in a real browser (issue 11), against a live server whose peak memory is read from /proc:
a .pt zip bomb (1 MB inflating to 1 GiB), a checkpoint with a wrong-typed card, a file named like markdown
and HTML, and a valid model whose traced decodes need ~1.5 GB. Each is refused with one clear message (the
bad card and the big model are accepted, with notes), the active model stays for a refusal, nothing renders,
and the server's peak RSS stays under the model budget. Also the upload limit: what the browser lets
through is exactly what the app accepts, and the app's message names that limit.

The server's peak is its VmHWM, reset before each upload by writing 5 to /proc/<pid>/clear_refs (Linux), so
each figure is that upload's own."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest
from helpers.browser import open_app_page, screenshot, settle, wait_quiet
from helpers.hostile import BOMB_MIB, endless, pt_zip_bomb, tiny_bundle, with_card
from helpers.repo import ROOT, needs_reverse

from transformer.network import budget
from transformer.store.checkpoints import bundle_to_bytes
from transformer.tasks.custom import MAX_DATA_BYTES
from ui import uploads

MB = 2**20
BAD_CARD = {"exact_match": "0.5", "steps": "many"}
NOTES = ("card field 'exact_match' was dropped: it must be a number in 0..1",
         "card field 'steps' was dropped: it must be a whole number in 0..1,000,000,000")
MARKUP = "<img src=x.png onerror=alert(1)>**bold**![x](http:example.invalid) :red[r] `c` $x$ <b>b</b>"
RENDERED = "img, strong, b, a, code, span[class*=math], [data-testid=stMarkdownColoredText]"  # none may appear
UPLOADER = f".st-key-{uploads.FILE}"  # the checkpoints page's uploader
WINDOWS = "Object.defineProperty(Navigator.prototype, 'platform', {get: () => 'Win32'});"

pytestmark = [pytest.mark.browser, needs_reverse]


def status_mb(pid: int, field: str) -> float:
    return int(re.search(rf"{field}:\s+(\d+)", Path(f"/proc/{pid}/status").read_text())[1]) / 1024


def reset_peak(pid: int) -> float:
    """The server's VmHWM reset to its current RSS; returns that RSS in MB."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    return status_mb(pid, "VmHWM")


def upload(pg, name: str, data: bytes) -> None:
    pg.locator(f"{UPLOADER} input[type=file]").set_input_files(
        {"name": name, "mimeType": "application/octet-stream", "buffer": data})
    settle(pg, 800, timeout=120_000)


def remove_file(pg) -> None:
    """Remove the checkpoint uploader's file, as its chip's delete button does, and wait for the run it causes."""
    pg.locator(f"{UPLOADER} [data-testid=stFileChipDeleteBtn]").first.click()
    settle(pg, 800, timeout=120_000)


def active_model(pg) -> str:
    return pg.locator("[data-testid=stSidebar] [data-testid=stSelectbox] input[role=combobox]").first.input_value()


def alert(pg, kind: str, wait: bool = True, log: Path | None = None):
    """The page's `kind` alert ("Error", "Success"), once shown (with `wait`): an upload's check may outlast the
    settle's pause on a loaded machine (the huge-trace model's did, in CI). Where none comes, the failure says what
    the page shows instead: its alerts, the uploader's file, a screenshot and the end of the server's `log` (CI met a
    page with no Success)."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    found = pg.locator(f"[data-testid=stAlertContent{kind}]")
    if wait:
        try:
            found.first.wait_for(timeout=120_000)
        except PlaywrightTimeout:
            shown = pg.locator("[data-testid^=stAlertContent], [data-testid=stException]").all_inner_texts()
            uploader = pg.locator(UPLOADER).all_inner_texts()
            shot = screenshot(pg, f"hostile_upload_no_{kind.lower()}")
            tail = log.read_text(errors="replace")[-3000:] if log is not None else ""
            raise AssertionError(f"no {kind} alert in 120 s; the page shows {shown}, the uploader {uploader} "
                                 f"(see {shot.name}); the server's log ends:\n{tail}") from None
    return found


def test_hostile_uploads_cannot_hurt_the_server(fresh_server, page):
    pg, pid, log = page, fresh_server.proc.pid, fresh_server.log
    fetched, dialogs = [], []
    pg.on("request", lambda r: fetched.append(r.url) if "x.png" in r.url or "example.invalid" in r.url else None)
    pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    open_app_page(pg, f"{fresh_server.url}/checkpoints")
    pg.locator("[data-testid=stDataFrame]").first.wait_for()
    assert active_model(pg) == "reverse (pretrained)"
    assert wait_quiet(pid)  # the fresh server's one warm-up (every page's modules, ~100 MB) is no upload's
    figures = {"server after opening the page": (status_mb(pid, "VmRSS"), status_mb(pid, "VmHWM"))}

    # (a) the zip bomb: refused from its zip directory, before torch.load inflates anything
    bomb = pt_zip_bomb()
    assert len(bomb) < 2 * MB
    before = reset_peak(pid)
    upload(pg, "bomb.pt", bomb)
    figures["(a) .pt zip bomb"] = (before, status_mb(pid, "VmHWM"))
    message = alert(pg, "Error", log=log).inner_text()
    unpacked = f"would unpack to {BOMB_MIB:,}.0 MB; the limit is {uploads.UPLOAD_LIMIT / MB:.1f} MB"
    assert "“bomb.pt” was refused" in message and unpacked in message and "Nothing was changed" in message, message
    assert active_model(pg) == "reverse (pretrained)"
    screenshot(pg, "hostile_upload_bomb")

    # (b) a card with wrong-typed fields: accepted, the fields dropped with notes on the page and the sidebar
    before = reset_peak(pid)
    upload(pg, "bad_card.safetensors", with_card(tiny_bundle(), BAD_CARD))
    figures["(b) wrong-typed card"] = (before, status_mb(pid, "VmHWM"))
    message = alert(pg, "Success", log=log).inner_text()
    assert "“bad_card.safetensors” loaded as “bad_card”" in message and "Its model card was cleaned" in message
    assert all(note in message for note in NOTES) and "many" not in message, message
    assert active_model(pg) == "bad_card (uploaded)"
    sidebar = pg.locator("[data-testid=stSidebar] [data-testid=stCaptionContainer]").all_inner_texts()
    assert any(all(note in text.lower() for note in NOTES) for text in sidebar), sidebar
    card = pg.locator("[data-testid=stMain] [data-testid=stCaptionContainer]").all_inner_texts()
    assert any(all(note in text.lower() for note in NOTES) for text in card), card
    assert pg.locator(f"{UPLOADER} input[type=file]").count() == 1  # the uploader stays
    screenshot(pg, "hostile_upload_bad_card")

    # (c) a file named like markdown and HTML: refused, its name shown exactly as written
    before = reset_peak(pid)
    upload(pg, f"{MARKUP}.pt", b"PK\x03\x04 not an archive at all")
    figures["(c) markup file name"] = (before, status_mb(pid, "VmHWM"))
    error = alert(pg, "Error", log=log)
    assert f"“{MARKUP}.pt” was refused" in error.inner_text(), error.inner_text()
    assert error.locator(RENDERED).count() == 0
    assert active_model(pg) == "bad_card (uploaded)"  # a refusal changes nothing
    assert pg.locator("img[src*='x.png']").count() == 0  # anywhere on the page: sidebar, picker, table
    assert pg.locator("strong, b").filter(has_text=re.compile(r"^(bold|b)$")).count() == 0
    assert not fetched and not dialogs, (fetched, dialogs)
    screenshot(pg, "hostile_upload_markup_name")

    # (d) a valid 0.3 MB model whose every traced decode needs ~1.5 GB: accepted with the budget's word, and
    # the pages that trace a decode refuse it before allocating anything. Into an empty uploader: (b) and (c)
    # replace a file, as dropping one on it does; in two CI runs this third replacement showed no outcome (in
    # 30 s, then in 120 s; cause unknown, never seen here), so the file is removed first, and its message with it
    remove_file(pg)
    assert pg.locator(f"{UPLOADER} [data-testid=stFileChip]").count() == 0
    assert alert(pg, "Error", wait=False).count() == 0 and active_model(pg) == "bad_card (uploaded)"
    before = reset_peak(pid)
    upload(pg, "huge_trace.safetensors",
           bundle_to_bytes(endless(tiny_bundle(n_enc_layers=12, n_dec_layers=12, n_heads=16, max_len=1024))))
    message = alert(pg, "Success", log=log).inner_text()
    assert "The pages that trace a decode will refuse it" in message and "about 1.5 GB" in message, message
    for link in ("Step-by-step decoding", "All attention heads"):
        pg.get_by_role("link", name=link).click()
        settle(pg, 800, timeout=120_000)
        error = alert(pg, "Error", log=log).first.inner_text()
        assert "would need about 1.5 GB, mostly attention traces" in error and "the limit is 1.0 GB" in error, error
        assert active_model(pg) == "huge_trace (uploaded)"
    figures["(d) huge-trace model, then the decoding and attention pages"] = (before, status_mb(pid, "VmHWM"))
    screenshot(pg, "hostile_upload_huge_trace_attention")

    limit = budget.model_limit_mb()
    print("\nserver peak RSS (MB), before -> peak during each upload:")
    for case, (start, peak) in figures.items():
        print(f"  {case}: {start:.0f} -> {peak:.0f} MB (+{peak - start:.0f})")
    for case, (start, peak) in figures.items():
        assert peak < limit, (case, peak)
        if case.startswith("("):
            assert peak - start < 100, (case, start, peak)  # nothing inflated, nothing traced


def on_each_platform(browser, url: str):
    """("linux" | "windows", a fresh page at `url`) for a Linux browser and one that says it runs on Windows
    (Streamlit's browser side counts MB by the platform); each page's context is closed after its turn."""
    for platform, script in (("linux", None), ("windows", WINDOWS)):
        context = browser.new_context(viewport={"width": 1400, "height": 900})
        if script:
            context.add_init_script(script)
        pg = context.new_page()
        pg.set_default_timeout(60_000)
        try:
            open_app_page(pg, url)
            assert pg.evaluate("navigator.platform").startswith("Win") == (platform == "windows")
            yield platform, pg
        finally:
            context.close()


def test_the_browser_lets_through_exactly_what_the_app_accepts(fresh_server, _browser):
    """Streamlit 1.67 reads server.maxUploadSize as MB of 2**20 bytes on the server and, in the browser, as MB
    of 10**6 bytes (of 2**20 only where navigator.platform is Windows). The app accepts UPLOAD_LIMIT
    = 20,000,000 bytes: just what any browser lets through; the server's own cap is above it."""
    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert config["server"]["maxUploadSize"] == uploads.UPLOAD_LIMIT_MB
    assert uploads.UPLOAD_LIMIT == uploads.UPLOAD_LIMIT_MB * 10**6 < uploads.UPLOAD_LIMIT_MB * MB
    limit = uploads.UPLOAD_LIMIT
    for platform, pg in on_each_platform(_browser, f"{fresh_server.url}/checkpoints"):
        uploader = pg.locator(UPLOADER)
        uploader.get_by_text("20MB per file").wait_for()  # what the uploader says
        if platform == "linux":  # one byte over: the browser refuses it, the server never sees it
            upload(pg, "over.safetensors", bytes(limit + 1))
            assert "File must be 20.0MB or smaller." in uploader.inner_text(), uploader.inner_text()
            assert alert(pg, "Error", wait=False).count() == 0
            upload(pg, "at_limit.safetensors", bytes(limit))  # exactly the limit: the app reads it
            message = alert(pg, "Error").inner_text()
            assert "“at_limit.safetensors” was refused" in message and "limited to" not in message, message
        else:  # a browser that counts 2**20-byte MB lets it through: the app names the exact limit
            upload(pg, "over.safetensors", bytes(limit + 1))
            message = alert(pg, "Error").inner_text()
            assert (f"the file is {limit + 1:,} bytes; uploads are limited to 20 MB ({limit:,} bytes)"
                    in message), message
            upload(pg, "over_mib.safetensors", bytes(20 * MB + 1))  # its own limit: 20 MiB
            assert "File must be 20.0MB or smaller." in uploader.inner_text(), uploader.inner_text()
        assert active_model(pg) == "reverse (pretrained)"
        screenshot(pg, f"upload_limit_{platform}")


def send_data(pg, uploader, name: str, size: int) -> None:
    """Upload `size` bytes of "ab<tab>ba" lines (cut at `size`) as `name` through `uploader`."""
    data = (b"ab\tba\n" * (size // 6 + 1))[:size]
    uploader.locator("input[type=file]").set_input_files(
        {"name": name, "mimeType": "text/tab-separated-values", "buffer": data})
    settle(pg, 800, timeout=120_000)


def test_the_data_upload_box_names_the_limit_the_app_applies(fresh_server, _browser):
    """The Train page's own-data uploader says 1MB per file, and the app's limit for the data is that same
    1,000,000 bytes: one byte over, the browser refuses the file (Linux) or the app names the limit (a browser
    counting 2**20-byte MB); exactly at the limit, the data is read and checked line by line."""
    limit = MAX_DATA_BYTES
    assert limit == 10**6
    for platform, pg in on_each_platform(_browser, f"{fresh_server.url}/train?task=custom"):
        uploader = pg.locator(".st-key-train_custom_upload")
        uploader.get_by_text("1MB per file").wait_for()  # what the uploader says
        send_data(pg, uploader, "over.tsv", limit + 1)
        if platform == "linux":  # the browser refuses it: the server never sees it
            assert "File must be 1.0MB or smaller." in uploader.inner_text(), uploader.inner_text()
            assert "over.tsv" not in " ".join(alert(pg, "Error").all_inner_texts())
        else:
            message = " ".join(alert(pg, "Error").all_inner_texts())
            assert f"over.tsv: the data is {limit + 1:,} bytes; the limit is 1 MB ({limit:,} bytes)" in message
        send_data(pg, uploader, "at_limit.tsv", limit)  # exactly the limit: read, and its lines checked
        shown = " ".join(alert(pg, "Error").all_inner_texts())
        assert "the limit is" not in shown and "Only 1 usable pair" in shown, shown
        screenshot(pg, f"data_upload_limit_{platform}")
