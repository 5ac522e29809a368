"""A page for tests/browser/test_browser_live_watch.py: a stand-in run polled the way the Train page's live view polls
its run (ui/panels/train_live.live_poll: draw, then ui/runs.watch_until_next_poll). Each session's run ends at a
moment the page writes down: `?end=poll` 0.1 s into the live view's first poll after the first draw (a poll later
than that is what showing its end would take without the watch), `?end=never` not at all. Beside the clicks counted,
it says how the watch of the run before ended: it "was cut short" (something waited for that run to end), it "ran
out", or it "never began" (a run of the whole page does not watch)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx

from ui import runs


@dataclass
class StandIn:
    """What watch_until_next_poll asks of a run: its state now, and a wait for that state to change."""

    ends_at: float | None = None  # time.time()

    def snapshot(self) -> SimpleNamespace:
        return SimpleNamespace(state="finished" if self.ends_at is not None and time.time() >= self.ends_at
                               else "running")

    def wait_while(self, state: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while (now := self.snapshot().state) == state and time.monotonic() < deadline:
            time.sleep(0.01)
        return now


def live(run: StandIn) -> None:
    polled = time.monotonic()
    st.session_state.polls = st.session_state.get("polls", 0) + 1
    if st.query_params.get("end") == "poll" and run.ends_at is None and st.session_state.polls == 2:
        run.ends_at = time.time() + 0.1  # the first poll after the page's own first draw
    st.markdown(f"poll {st.session_state.polls}")
    st.session_state.clicks = st.session_state.get("clicks", 0) + st.button("Count", key="count")
    st.markdown(f"clicks {st.session_state.clicks} after a watch that {st.session_state.get('watch', 'never began')}")
    runs.watch_until_next_poll(run, polled, "running")
    ctx = get_script_run_ctx()
    if not ctx.fragment_ids_this_run:
        st.session_state.watch = "never began (a run of the whole page)"
    elif runs.watch_ends(polled) > time.monotonic() and runs.asked_again(ctx):
        st.session_state.watch = "was cut short"
    else:
        st.session_state.watch = "ran out"


run = st.session_state.setdefault("run", StandIn())
st.button("Whole page", key="whole")
if run.snapshot().state == "finished":
    st.markdown(f"ended {run.ends_at * 1000:.0f} after poll {st.session_state.polls}")
else:
    st.fragment(live, run_every=runs.POLL_SECONDS)(run)
