"""The checkpoints page's view: the active model, the model whose card is shown, the evaluation's settings (so a
link draws the same held-out inputs and gives the same figures once Evaluate is pressed), and whether an upload
becomes the active model.
Two more pieces stay out of the URL: the evaluations this session ran and the table's selection version."""

from dataclasses import dataclass

from ui import model_registry as registry
from ui.state import Flag, Int, LinkError, Prop, StateTable, quoted, register
from ui.tables.shared import LANG, MODEL, PRESENTER, ModelProp

SAMPLES = (20, 2000)  # held-out inputs: fewer give a noisy figure, more take a while (2,000: several seconds)


@dataclass(frozen=True)
class InspectProp(ModelProp):
    """A model whose card is shown, written like the active model (`reverse`, `uploaded:1a2b3c4d`);
    None: the active model's."""

    def parse(self, raw: str) -> str:
        key = raw if ":" in raw else f"shipped:{raw}"
        why = None if key in registry.entries() else registry.adopt_kept(key)  # a kept model joins the list
        if why is not None:
            raise LinkError(f"{quoted(raw, 60)}: {why}; showing the active model's card")
        return key


CHECKPOINTS = register(StateTable("checkpoints", (
    MODEL,
    InspectProp("inspect", default=None),
    Int("samples", default=500, lo=SAMPLES[0], hi=SAMPLES[1]),
    Int("seed", default=7, lo=0, hi=2**31 - 1),
    Flag("every_column"),  # the runs table's every column (else the few that fit a narrow window)
    Flag("activate", default=True),  # an accepted upload becomes the active model (the switch by the uploader)
    Prop("evaluations", default=None, url=False),  # {entry key: Evaluation} run in this session
    Int("table_version", default=0, url=False),  # bumped to re-seed the table's row selection
    PRESENTER,
    LANG,
)))
