"""Knocking heads out (ablation) on the decode and all-heads pages: the controls, shared by both pages through
the `knocked` and `knock_mode` props, and the intact model's output beside the ablated one."""

from __future__ import annotations

import streamlit as st

from transformer.analysis.ablation import MODES, Head, all_heads
from transformer.charts import KIND_TITLES
from ui.display import output
from ui.state import View
from ui.widgets import verdict

MODE_NAMES = {"zero": "zeros", "mean": "its mean"}
HELP = ("A knocked-out head still computes its attention (the charts show its weights, marked *knocked out*), "
        "but its output is replaced, at every position, by zeros or by its mean output over 500 held-out "
        "inputs, before the layer mixes the heads. The rest of the model is unchanged: what breaks shows what "
        "the head was needed for.")


def head_name(head: Head) -> str:
    return f"{KIND_TITLES[head.kind].split(' (')[0]} · L{head.layer + 1} H{head.head + 1}"


def picked(view: View, model) -> tuple[tuple[Head, ...], str]:
    """The heads knocked out and how, from the page's view; a link's head the model lacks is refused. The
    controls sit in an expander, open while any head is knocked out."""
    heads = all_heads(model)
    if any(head not in heads for head in view.get("knocked")):
        missing = next(head for head in view.get("knocked") if head not in heads)
        view.refuse("knocked", f"this model has no head {missing}")
    knocked = view.get("knocked")
    title = f"Knock out heads · {len(knocked)} knocked out" if knocked else "Knock out heads"
    with st.expander(title, expanded=bool(knocked), icon=":material/block:"):
        view.widget("knocked", st.multiselect, "Heads to knock out", heads, format_func=head_name,
                    placeholder="Pick heads: the output is decoded again without them",
                    to_widget=list, from_widget=lambda chosen: tuple(sorted(chosen)))
        view.widget("knock_mode", st.segmented_control, "Replace their output by", MODES,
                    format_func=MODE_NAMES.get, required=True)
        st.caption(HELP)
    return view.get("knocked"), view.get("knock_mode")


def compare(intact_output: str, knocked_output: str, answer: str | None, count: int) -> None:
    """The intact model's output beside the ablated one's, and what changed."""
    heads = f"{count} head{'s' if count > 1 else ''}"
    st.markdown(f"**Intact model:** {output(intact_output)} {verdict(intact_output, answer)}  \n"
                f"**With {heads} knocked out:** {output(knocked_output)} {verdict(knocked_output, answer)}")
    if knocked_output == intact_output:
        st.caption("The output did not change: the model does without these heads on this input.")
    else:
        first = next((i for i, (a, b) in enumerate(zip(intact_output, knocked_output)) if a != b),
                     min(len(intact_output), len(knocked_output)))
        st.caption(f"The output changed from character {first + 1} on (counted from 1).")
