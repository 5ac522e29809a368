"""Widgets and checks that several pages show, each written once: the model guard, the input box with the
task's examples, the right/wrong verdict, and the "longer than trained" warning."""

from __future__ import annotations

import streamlit as st
from streamlit.delta_generator import DeltaGenerator

from transformer.bundle import ModelBundle

from . import model_registry as registry
from .state import View

NO_MODEL = ("No model is available yet: the pretrained checkpoints are missing. Train one on the Train live "
            "page or upload one on the Checkpoints page, then come back.")


def require_model() -> tuple[str, ModelBundle]:
    """(registry key, bundle) of the active model; says so and stops the page when there is none."""
    key = registry.active_key()
    if key is None:
        st.warning(NO_MODEL, icon=":material/info:")
        st.stop()
    return key, registry.bundle_for(key)


def current_input(view: View, examples: list[str]) -> str:
    """The shared input text: the one chosen, or the model's first example until one is."""
    text = view.get("input")
    return (examples[0] if examples else "") if text is None else text


def input_picker(view: View, bundle: ModelBundle, help_text: str) -> str:
    """The input box and the task's held-out examples as pills, both bound to the shared `input` prop;
    returns the input to use."""
    examples = bundle.task.examples()
    text = current_input(view, examples)
    box, pills = st.columns([2, 3], vertical_alignment="bottom")
    with box:
        view.widget("input", st.text_input, "Input", to_widget=lambda _: text, max_chars=200, help=help_text)
    with pills:  # the example in use is highlighted; clicking it again deselects it and keeps the text
        view.widget("input", st.pills, "Examples (held out from training)", examples, slot="examples",
                    to_widget=lambda _: text if text in examples else None, from_widget=lambda v: v)
    return text


def verdict(output: str, answer: str | None) -> str:
    """A right/wrong badge (markdown) for `output` against the task's answer; "" when there is none."""
    if answer is None:
        return ""
    return ":green-badge[:material/check: right]" if output == answer else ":red-badge[:material/close: wrong]"


def warn_if_longer_than_trained(task, text: str) -> None:
    if len(text) > task.max_source_chars:
        st.warning(f"The model was trained on inputs of at most {task.max_source_chars} characters; expect "
                   "mistakes on longer ones.", icon=":material/warning:")


COPY_LINK_HTML = """
<button id="copy" title="Copy the link to this view: it opens the same view for anyone"><svg width="15"
  height="15" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round">
  <path d="M10 13a5 5 0 0 0 7.5.5l3-3a5 5 0 0 0-7-7l-1.7 1.7"/><path d="M14 11a5 5 0 0 0-7.5-.5l-3 3a5 5 0 0 0
  7 7l1.7-1.7"/></svg> Copy link</button>
<span id="done"></span>
<style>
  body { margin: 0; font-family: "Source Sans Pro", sans-serif; }
  button { font: inherit; font-size: 15px; padding: 6px 12px; border-radius: 8px; cursor: pointer;
           border: 1px solid rgba(49, 51, 63, 0.2); background: #fff; color: rgb(49, 51, 63);
           display: inline-flex; align-items: center; gap: 6px; }
  button:hover { border-color: #3b5bdb; color: #3b5bdb; }
  #done { font-size: 13px; color: #2b8a3e; margin-left: 6px; }
</style>
<script>
  // The page's URL holds its whole view (ui/state.py keeps it current), so the link is the address itself.
  document.getElementById("copy").onclick = async () => {
    const url = window.parent.location.href;
    try { await navigator.clipboard.writeText(url); }
    catch (e) {  // no clipboard API on plain http from another machine: the old way
      const area = document.createElement("textarea");
      area.value = url; document.body.appendChild(area); area.select();
      document.execCommand("copy"); area.remove();
    }
    document.getElementById("done").textContent = "copied";
    setTimeout(() => { document.getElementById("done").textContent = ""; }, 2500);
  };
</script>
"""


def header(title: str) -> DeltaGenerator:
    """The page title with a "Copy link" button beside it; returns the place for the notes about the link the
    page was opened with (`finish` fills it once the page knows what it could not show)."""
    left, right = st.columns([5, 1], vertical_alignment="center")
    left.title(title)
    with right:
        st.iframe(COPY_LINK_HTML, height=44)
    return st.container()


def finish(view: View, notes: DeltaGenerator) -> None:
    """End of a page run: show what the link could not honour, and write the view into the URL."""
    with notes:
        view.show_notes()
    view.sync_url()
