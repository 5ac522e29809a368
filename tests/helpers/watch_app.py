"""A page for tests/browser/test_browser_live_watch.py: a stand-in run polled the way the Train page's live view polls
its run (ui/panels/train_live.live_poll: draw, then ui/runs.watch_until_next_poll). Each session's run ends at a
moment the page writes down: `?end=poll` 0.1 s into the live view's first poll after the first draw (a poll later
than that is what showing its end would take without the watch), `?end=never` not at all. Beside the clicks counted,
it says how the watch of the run before ended: it "was cut short" (something waited for that run to end), it "ran
out", or it "never began" (a run of the whole page does not watch). With `?first_step=poll` the run takes its first
step 0.1 s into that poll instead, and the page says which poll showed it and whether the watch before it asked for
that poll (the first progress line: runs.watch_until_next_poll reruns the live view's fragment at the first step)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from types import SimpleNamespace

import streamlit as st
from streamlit.runtime.scriptrunner import get_script_run_ctx
from streamlit.runtime.scriptrunner_utils.exceptions import RerunException

from transformer.runs.job import Job
from ui import runs


@dataclass
class StandIn:
    """What watch_until_next_poll asks of a run: its state now, and a wait for that state to change."""

    ends_at: float | None = None  # time.time()
    steps_at: float | None = None  # time.time() of its first step

    def snapshot(self) -> SimpleNamespace:
        return SimpleNamespace(state="finished" if self.ends_at is not None and time.time() >= self.ends_at
                               else "running", step=int(self.steps_at is not None and time.time() >= self.steps_at))

    wait_while = Job.wait_while  # the library's wait, which reads only snapshot()


def live(run: StandIn) -> None:
    polled = time.monotonic()
    st.session_state.polls = st.session_state.get("polls", 0) + 1
    if st.session_state.polls == 2:  # the first poll after the page's own first draw
        if st.query_params.get("end") == "poll" and run.ends_at is None:
            run.ends_at = time.time() + 0.1
        if st.query_params.get("first_step") == "poll" and run.steps_at is None:
            run.steps_at = time.time() + 0.1
    step = run.snapshot().step
    st.markdown(f"poll {st.session_state.polls}")
    if step:
        st.session_state.setdefault("stepped", (st.session_state.polls, st.session_state.get("woken")))
        shown, woken = st.session_state.stepped
        st.markdown(f"step 1 shown by poll {shown}, " + ("which the watch asked for" if woken == shown - 1 else
                                                          "a poll of the timer's"))
    st.session_state.clicks = st.session_state.get("clicks", 0) + st.button("Count", key="count")
    st.markdown(f"clicks {st.session_state.clicks} after a watch that {st.session_state.get('watch', 'never began')}")
    try:
        runs.watch_until_next_poll(run, polled, "running", step)
    except RerunException:
        st.session_state.woken = st.session_state.polls
        raise
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
