"""The server as the README starts it (`python -m streamlit run app.py`, this repository's .streamlit/config.toml)
asks nothing of other machines when it starts: Streamlit's headless start looked up the machine's public address
at checkip.amazonaws.com to print it, holding the server's event loop for up to two seconds."""

from __future__ import annotations

import json
import subprocess
import sys

from helpers.repo import ROOT

# In a fresh interpreter in the repository (where Streamlit reads .streamlit/config.toml): what the server prints
# once it listens, with every blocking HTTP request Streamlit makes recorded instead of sent.
PRINT_URL = """
import json
from streamlit import config, net_util
from streamlit.web import bootstrap
config.get_config_options(force_reparse=True)
asked = []
net_util._make_blocking_http_get = lambda url, timeout: asked.append(url)
bootstrap._print_url(False)
print("ASKED " + json.dumps(asked))
"""


def test_the_start_asks_no_other_machine_and_prints_the_local_address():
    out = subprocess.run([sys.executable, "-c", PRINT_URL], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    asked = json.loads(out.rpartition("ASKED ")[2])
    assert asked == [], asked
    assert "http://localhost:8501" in out, out
