"""The address a browser sends with each run it asks for. One that has not yet heard of the last run's address
(a click right after another, on a busy server or a slow link) sends an older one this session wrote: that is
no link, and must not undo the last change (tests/browser/test_browser_slow_link.py shows it in a browser).
An address this session never wrote on the page is a link, and a run of the page still takes it."""

from __future__ import annotations

from helpers.train_page import key


def address_of(at) -> dict[str, str]:
    return dict(at.query_params)


def test_an_older_address_of_this_session_keeps_the_last_change(train_page):
    at = train_page()
    at.number_input(key=key("seed")).set_value(10).run()
    older = address_of(at)
    at.number_input(key=key("seed")).set_value(11).run()
    assert address_of(at)["seed"] == "11"
    at.query_params.clear()
    at.query_params.update(older)  # the browser's address, still seed=10's
    at.number_input(key=key("lr")).set_value(0.004).run()
    assert not at.exception
    assert (at.number_input(key=key("seed")).value, at.number_input(key=key("lr")).value) == (11, 0.004)
    assert {"seed": "11", "lr": "0.004"}.items() <= address_of(at).items()  # and the browser is told so


def test_an_address_this_session_never_wrote_is_a_link(train_page):
    at = train_page()
    at.number_input(key=key("seed")).set_value(10).run()
    at.query_params.clear()
    at.query_params.update({"v": "1", "seed": "42"})
    at.run()
    assert not at.exception
    assert at.number_input(key=key("seed")).value == 42
    assert address_of(at) == {"v": "1", "seed": "42"}
