"""Knocking heads out (ablation) on the decode and all-heads pages: the controls, shared by both pages through
the `knocked` and `knock_mode` props, and the intact model's output beside the ablated one."""

from __future__ import annotations

import streamlit as st

from transformer.analysis.ablation import all_heads
from transformer.analysis.knockout import MODES, Head
from transformer.charts import KIND_SHORT
from transformer.i18n import Texts, t
from ui.display import output
from ui.state import View
from ui.widgets import verdict

MODE_NAMES = Texts({"zero": "app.knock.zeros", "mean": "app.knock.mean"})


def head_name(head: Head) -> str:
    return f"{KIND_SHORT[head.kind]} · L{head.layer + 1} H{head.head + 1}"


def picked(view: View, model) -> tuple[tuple[Head, ...], str]:
    """The heads knocked out and how, from the page's view; a link's head the model lacks is refused. The
    controls sit in an expander, open while any head is knocked out."""
    heads = all_heads(model)
    if any(head not in heads for head in view.get("knocked")):
        missing = next(head for head in view.get("knocked") if head not in heads)
        view.refuse("knocked", f"this model has no head {missing}")
    knocked = view.get("knocked")
    title = t("app.knock.title_count", n=len(knocked)) if knocked else t("app.knock.title")
    with st.expander(title, expanded=bool(knocked), icon=":material/block:"):
        view.widget("knocked", st.multiselect, t("app.knock.heads"), heads, format_func=head_name,
                    placeholder=t("app.knock.placeholder"),
                    to_widget=list, from_widget=lambda chosen: tuple(sorted(chosen)))
        view.widget("knock_mode", st.segmented_control, t("app.knock.mode"), MODES,
                    format_func=MODE_NAMES.get, required=True)
        st.caption(t("app.knock.help"))
    return view.get("knocked"), view.get("knock_mode")


def compare(intact_output: str, knocked_output: str, answer: str | None, count: int) -> None:
    """The intact model's output beside the ablated one's, and what changed."""
    st.markdown(t("app.knock.intact", output=output(intact_output), verdict=verdict(intact_output, answer)) + "  \n"
                + t("app.knock.knocked", n=count, output=output(knocked_output),
                    verdict=verdict(knocked_output, answer)))
    if knocked_output == intact_output:
        st.caption(t("app.knock.unchanged"))
    else:
        first = next((i for i, (a, b) in enumerate(zip(intact_output, knocked_output)) if a != b),
                     min(len(intact_output), len(knocked_output)))
        st.caption(t("app.knock.changed_from", n=first + 1))
