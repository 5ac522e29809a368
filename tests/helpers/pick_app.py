"""A page for tests/browser/test_browser_live_pick.py: a select box bound to view state (ui/state.View.widget) inside
a fragment that renews itself, as the Train page's live view renews its charts. Each renewal writes the head the
state holds, then stays busy a while before and after drawing the box (as the live view reads its run and draws its
charts), longer in all than the time between two renewals, as on a busy machine: so a pick lands while one is under
way."""

from __future__ import annotations

import time

import streamlit as st

from ui.state import Choice, StateTable

RENEW_S = 0.4  # between a renewal's start and the next
BUSY_S = 0.3  # how long each renewal stays busy before drawing the box, and after it

VIEW = StateTable("pick", (Choice("head", 1, options=(1, 2, 3, 4)),)).view()


def live() -> None:
    st.markdown(f"showing head {VIEW.get('head')}, as of {time.time():.1f}")
    time.sleep(BUSY_S)
    VIEW.widget("head", st.selectbox, "Head", [1, 2, 3, 4], format_func=lambda h: f"Head {h}")
    time.sleep(BUSY_S)


st.fragment(live, run_every=RENEW_S)()
