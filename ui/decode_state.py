"""Session state and cached results of the step-by-step decoding page.

What the learner chose (input text, step, forced tokens) lives in plain session-state keys, so it survives
a visit to another page (Streamlit drops a widget's own state when its page is not shown); each widget is
seeded from them before it renders and writes back through its callback. Decodes are cached per
(model entry, model version, input, forced tokens), so a step click only re-renders.
"""

from __future__ import annotations

import streamlit as st

from transformer.bundle import ModelBundle
from transformer.decoding import BeamResult, DecodeResult, beam_search, greedy_decode
from transformer.tasks import TaskError


TEXT = "decode_text"  # the input being decoded (read it from other pages for "the current input")
STEP = "decode_step"  # 0-based step shown; None until the decode of a new input picks a middle step
FORCED = "decode_forced"  # {step: token id} forced for the current (model, input)
OWNER = "decode_owner"  # (model key, input) that STEP and FORCED belong to
MODEL = "decode_model"  # the model key TEXT was chosen for
INPUT_BOX, STEP_SLIDER, EXAMPLES = "decode_input_box", "decode_step_slider", "decode_examples"  # widget keys
TOPK = 5


@st.cache_data(max_entries=128, show_spinner=False)
def decode(key: str, version: int, text: str, forced: tuple[tuple[int, int], ...], _bundle: ModelBundle
           ) -> DecodeResult:
    """Traced greedy decode of `text` with `forced` (step, token) pairs; raises the library's ValueErrors."""
    return greedy_decode(_bundle.model, _bundle.tokenizer, text, k=TOPK, force=dict(forced))


@st.cache_data(max_entries=128, show_spinner=False)
def beam(key: str, version: int, text: str, width: int, _bundle: ModelBundle) -> BeamResult:
    return beam_search(_bundle.model, _bundle.tokenizer, text, beam=width)


def expected(bundle: ModelBundle, text: str) -> tuple[str | None, str]:
    """(the task's right answer, "") or (None, why there is none)."""
    try:
        return bundle.task.target(text), ""
    except TaskError as exc:
        return None, str(exc)


def adopt_model(key: str, examples: list[str]) -> None:
    """Start over with the model's first example when the active model changed (or on the first visit)."""
    if st.session_state.get(MODEL) != key:
        st.session_state[MODEL] = key
        st.session_state[TEXT] = examples[0] if examples else ""
    st.session_state[INPUT_BOX] = st.session_state[TEXT]


def set_text(text: str) -> None:
    st.session_state[TEXT] = text


def text_from_box(box: str = INPUT_BOX) -> None:
    """on_change of an input box (widget key `box`): it holds the new input."""
    set_text(st.session_state[box])


def text_from_example(pills: str = EXAMPLES) -> None:
    """on_change of example pills (widget key `pills`; clicking the selected one again deselects it: keep the
    text then)."""
    if st.session_state[pills] is not None:
        set_text(st.session_state[pills])


def own(key: str, text: str) -> None:
    """Forget the step and forced tokens when (model, input) changed: they belonged to another decode."""
    if st.session_state.get(OWNER) != (key, text):
        st.session_state[OWNER] = (key, text)
        st.session_state[STEP] = None
        st.session_state[FORCED] = {}


def forced() -> dict[int, int]:
    return dict(st.session_state.get(FORCED) or {})


def current_step(n_steps: int) -> int:
    """The step to show, clamped to 0..n_steps-1 (a middle step for a fresh decode), seeded into the slider."""
    step = st.session_state.get(STEP)
    step = n_steps // 2 if step is None else min(max(step, 0), n_steps - 1)
    st.session_state[STEP] = step
    st.session_state[STEP_SLIDER] = step + 1
    return step


def go_to(step: int) -> None:
    """on_click of the first/previous/next/last buttons (clamped when the page renders)."""
    st.session_state[STEP] = step


def step_from_slider() -> None:
    st.session_state[STEP] = st.session_state[STEP_SLIDER] - 1


def force(step: int, token: int, model_choice: int) -> None:
    """Emit `token` at `step` and decode on from it; later forcings no longer apply. Choosing the token the
    model itself would pick there removes the forcing at that step."""
    kept = {s: t for s, t in forced().items() if s < step}
    if token != model_choice:
        kept[step] = token
    st.session_state[FORCED] = kept
    st.session_state[STEP] = step


def reset_forcing() -> None:
    st.session_state[FORCED] = {}
