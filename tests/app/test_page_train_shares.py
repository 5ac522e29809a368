"""The Train page and the fair shares of runs (AppTest): Start past this session's share of live runs says why and
changes nothing; a paused run whose worker went back to the server says so, and Resume goes on from its step."""

from __future__ import annotations

import pytest
from helpers.train_page import job_of, key, shown_step, state, wait_for

from transformer.runs import queue as capacity
from transformer.runs.queue import RunQueue
from ui import model_registry as registry


class OtherRun:
    """A live run of this session that the page does not show (as from another tab of it, were tabs one session)."""

    def ended(self) -> bool:
        return False


@pytest.fixture
def server_queue(monkeypatch):
    queue = RunQueue(limit=2, max_queued=4, per_session=1, per_client=0, max_workers=4, park_after=3600)
    monkeypatch.setattr(capacity, "_server_queue", queue)
    return queue


def test_start_past_the_sessions_share_says_why_and_changes_nothing(train_page, server_queue):
    at = train_page()
    at.session_state[registry.OWNER] = "me"  # this session's owner token (made on first use otherwise)
    server_queue.admit(OtherRun(), "me", None)
    at.button(key="train_start").click().run()
    assert not at.exception
    assert any("Cannot start: this session already has 1 training run started" in e.value for e in at.error), \
        [e.value for e in at.error]
    assert "train_run" not in at.session_state and server_queue.running == 0 and server_queue.workers == 0


def test_a_parked_run_says_its_worker_went_back_and_resumes_from_its_step(train_page, server_queue):
    at = train_page()
    at.number_input(key=key("steps")).set_value(20_000)
    at.checkbox(key=key("stop_early")).uncheck().run()
    at.number_input(key=key("step_count")).set_value(3)
    at.button(key="train_step").click().run()
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 3)
    assert job_of(at).park()
    at.run()
    assert any("went back to the server" in p.proto.text for p in at.get("progress")), \
        [p.proto.text for p in at.get("progress")]
    assert job_of(at).pid is None
    at.button(key="train_step").click().run()  # Step N on a parked run: a new worker from its state
    wait_for(at, lambda a: state(a) == "paused" and shown_step(a) == 6 and not job_of(a).snapshot().parked)
    assert job_of(at).pid is not None and not at.exception
