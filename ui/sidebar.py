"""The sidebar every page shares: the active model picker and its model card, then the language switch and the
presenter switch (both in the URL too: `lang=zh`, `presenter=1`), "Copy link" (the page's URL holds its view) and
the export format."""

from __future__ import annotations

from string import Template

import streamlit as st

from transformer.bundle import ModelFacts
from transformer.i18n import t
from transformer.store.cards import held_out_source

from . import language
from . import model_registry as registry
from .markdown import literal
from .tables.shared import PRESENTER, SHARED
from .widgets import no_model

EXPORT_FORMAT = "export_format"
# Presenter mode for the back row: Streamlit sizes its text in rem, so a larger root size enlarges every text,
# label and widget (formulas too, at the text's size); the main column may use the whole window.
PRESENTER_CSS = """<style>
html { font-size: 21px; }
.katex-display > .katex { font-size: 1em; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding-left: 2rem; padding-right: 2rem; }
</style>"""

# Presenter mode in a window under 1,100 pixels (a 1024x768 projector): the sidebar folds itself away once per page
# load, as a teacher would have to (open, it leaves the page too little room for the larger formulas and charts); its
# » button opens it again, and it stays open while the teacher moves between pages.
# The page's own script, run in the Copy-link frame (same origin: it reaches the page as `window.parent`), not
# through st.html: a script element written by st.html before the model picker stopped a click from opening it.
# It sets the page's `lang` (the browser then picks Simplified Chinese glyphs where a CJK font holds several), and
# in presenter mode in a window under 1,100 pixels folds the sidebar away once per page load (one click on its
# collapse button, then wait while it slides away).
PAGE_SCRIPT = """
  const page = window.parent, root = page.document.documentElement;
  if (root.lang !== "$lang") root.lang = "$lang";
  if ($fold && page.innerWidth < 1100 && !page.apPresenterFolded) {
    const fold = (tries, clicked) => {
      const bar = page.document.querySelector("[data-testid=stSidebar]");
      const button = page.document.querySelector("[data-testid=stSidebarCollapseButton] button");
      if (bar && bar.getBoundingClientRect().right <= 0) return (page.apPresenterFolded = true);
      if (!clicked && button) { button.click(); clicked = true; }
      if (tries > 0) setTimeout(() => fold(tries - 1, clicked), 200);
    };
    fold(25, false);
  }
"""

# Every page: in a window under 1,100 pixels (a 1024x768 projector with the sidebar open) the main column's
# margins shrink from 5rem to 1.5rem, giving tables and charts ~110 pixels more, and formulas are set at the
# text's size instead of KaTeX's 1.21em (the widest, on the masks page, was 793 px in a 676 px column).
NARROW_CSS = """<style>
@media (max-width: 1100px) {
  [data-testid="stMainBlockContainer"] { padding-left: 1.5rem; padding-right: 1.5rem; }
  .katex-display > .katex { font-size: 1em; }
}
</style>"""

COPY_LINK_HTML = """
<button id="copy" title="$tip"><svg width="15"
  height="15" viewBox="0 0 24 24" fill="none" stroke="currentColor" stroke-width="2.2" stroke-linecap="round">
  <path d="M10 13a5 5 0 0 0 7.5.5l3-3a5 5 0 0 0-7-7l-1.7 1.7"/><path d="M14 11a5 5 0 0 0-7.5-.5l-3 3a5 5 0 0 0
  7 7l1.7-1.7"/></svg> $label</button>
<span id="done"></span>
<style>
  body { margin: 0; font-family: "Source Sans Pro", "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei",
         sans-serif; }
  button { font: inherit; font-size: 15px; padding: 6px 12px; white-space: nowrap; border-radius: 8px; cursor: pointer;
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
    document.getElementById("done").textContent = "$done";
    setTimeout(() => { document.getElementById("done").textContent = ""; }, 2500);
  };
$page_script
</script>
"""


def model_card_lines(facts: ModelFacts) -> list[str]:
    """Short facts about a model (`ModelBundle.facts()`, or a checkpoint header's), for the sidebar and the
    checkpoints page."""
    cfg, card = facts.config, facts.card
    lines = [
        t("app.card.task", task=facts.task.title),
        t("app.card.shape", enc=cfg.n_enc_layers, dec=cfg.n_dec_layers, heads=cfg.n_heads, d_model=cfg.d_model),
        t("app.card.parameters", n=facts.parameters),
    ]
    if card.get("exact_match") is not None:
        lines.append(t("app.card.exact_match", share=card["exact_match"], source=held_out_source()))
    if card.get("steps"):
        lines.append(t("app.card.trained", steps=card["steps"], seconds=card.get("seconds", 0)))
    return lines


def card_notes(facts: ModelFacts) -> str | None:
    """A short caption (literal markdown) naming the card fields loading dropped as invalid (the notes name a
    field and what it should hold, never the value), or None for a sound card."""
    if not facts.notes:
        return None
    text = t("app.list_separator").join(facts.notes)
    return ":material/info: " + literal(t("app.sentence", text=f"{text[:1].upper()}{text[1:]}"))


def presenting() -> bool:
    """Whether the presenter switch is on for this session (set by the sidebar, or by a link)."""
    return SHARED.view().get(PRESENTER.name)


def presenter_switch() -> None:
    """The presenter switch; while it is on, the page's text is larger (PRESENTER_CSS) and so are its charts, and in
    a narrow window the sidebar folds itself away (PAGE_SCRIPT)."""
    SHARED.view().widget(PRESENTER.name, st.toggle, t("app.presenter"), help=t("app.presenter_help"))
    if presenting():
        st.html(PRESENTER_CSS)


def render_sidebar() -> None:
    """The active model first (what every page shows; its picker high in the sidebar, where its list has room to
    open), then how the pages show it: language, presenter mode, the view's link, the export format."""
    with st.sidebar:
        st.html(NARROW_CSS)
        model_section()
        st.divider()
        language.switch()
        presenter_switch()
        script = Template(PAGE_SCRIPT).substitute(lang=language.html_lang(), fold=str(presenting()).lower())
        st.iframe(Template(COPY_LINK_HTML).substitute(tip=t("app.copy_link_tip"), label=t("app.copy_link"),
                                                      done=t("app.copied"), page_script=script), height=42)
        st.radio(
            t("app.export_format"),
            ["png", "svg"],
            horizontal=True,
            key=EXPORT_FORMAT,
            help=t("app.export_format_help"),
        )


def model_section() -> None:
    """The active model's picker and its card (or, with no model at all, what to do)."""
    st.subheader(t("app.active_model"))
    entries = registry.entries()
    if not entries:
        st.error(no_model())
        return
    view = SHARED.view()
    view.set("model", registry.active_key())  # a model that is gone (removed, or not kept) gives way
    view.widget(
        "model",
        st.selectbox,
        t("app.model"),
        options=list(entries),
        format_func=lambda k: entries[k].label,
        to_widget=lambda _: registry.active_key(),
        help=t("app.model_help"),
    )
    facts = registry.facts(registry.active_key())  # a shipped model's from its header: no weights loaded
    kept = registry.kept_for(registry.active_key())
    if kept is not None:
        st.caption(":material/schedule: " + t("app.kept_for", n=round(kept / 86400)))
    st.markdown("  \n".join(model_card_lines(facts)))
    if (notes := card_notes(facts)) is not None:
        st.caption(notes)
