"""The sidebar every page shares: the active model picker, its model card, and the export format."""

from __future__ import annotations

import streamlit as st

from . import model_registry as registry
from .tables.shared import SHARED

EXPORT_FORMAT = "export_format"


def model_card_lines(bundle) -> list[str]:
    """Short facts about a model, for the sidebar and the checkpoints page."""
    cfg, card = bundle.config, bundle.card
    lines = [
        f"**Task:** {bundle.task.title}",
        f"**Shape:** {cfg.n_enc_layers}+{cfg.n_dec_layers} layers × {cfg.n_heads} heads, d_model {cfg.d_model}",
        f"**Parameters:** {bundle.model.num_parameters():,}",
    ]
    if card.get("exact_match") is not None:
        lines.append(f"**Held-out exact match:** {card['exact_match']:.1%}")
    if card.get("steps"):
        lines.append(f"**Trained:** {card['steps']:,} steps in {card.get('seconds', 0):.0f} s")
    return lines


def render_sidebar() -> None:
    entries = registry.entries()
    with st.sidebar:
        st.subheader("Active model")
        if not entries:
            st.error("No model is available: the pretrained checkpoints in assets/checkpoints are missing. "
                     "Train one on the Train live page.")
            return
        view = SHARED.view()
        view.set("model", registry.active_key())  # a model that is gone (removed, or not kept) gives way
        view.widget(
            "model",
            st.selectbox,
            "Model",
            options=list(entries),
            format_func=lambda k: entries[k].label,
            to_widget=lambda _: registry.active_key(),
            help="Every page uses this model. Pretrained models ship with the app; models you train or "
            "upload are added here for this browser session.",
        )
        bundle = registry.active_bundle()
        st.markdown("  \n".join(model_card_lines(bundle)))
        st.divider()
        st.radio(
            "Chart download format",
            ["png", "svg"],
            horizontal=True,
            key=EXPORT_FORMAT,
            help="The camera icon in each chart's toolbar saves it in this format, ready for slides.",
        )
