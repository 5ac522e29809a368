"""The server as the README starts it (`python -m streamlit run app.py`, this repository's .streamlit/config.toml and
requirements.txt) asks nothing of other machines when it starts: Streamlit's headless start looked up the machine's
public address at checkip.amazonaws.com to print it, holding the server's event loop for up to two seconds. And it
answers a browser's requests without Nagle's algorithm: with the standard library's event loop, every file after the
first on a kept-alive connection waited ~40 ms for the browser's delayed acknowledgement."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

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


# In a fresh interpreter: the event loop Streamlit's server runs on (bootstrap._run_server_loop, as `streamlit run`
# picks it), a listening socket bound as Streamlit binds its own (no protocol named, which is why the standard
# library's loop left Nagle on), one connection to it, and what the server's end of it says; and the HTTP parser
# uvicorn picks.
SERVER_LOOP = """
import asyncio, json, socket
import uvicorn
from streamlit.web import bootstrap
from streamlit.web.server.starlette.starlette_server import _bind_socket

async def main():
    listener = _bind_socket("127.0.0.1", 0, 8)
    accepted = asyncio.get_running_loop().create_future()
    async def on_connection(reader, writer):
        accepted.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()
    server = await asyncio.start_server(on_connection, sock=listener)
    _, client = await asyncio.open_connection(*listener.getsockname())
    nodelay = await accepted
    client.close()
    server.close()
    config = uvicorn.Config(app=None)
    config.load()
    print("SERVED " + json.dumps({"loop": type(asyncio.get_running_loop()).__module__, "nodelay": nodelay,
                                  "http": config.http_protocol_class.__name__}))

bootstrap._run_server_loop(main())
"""


@pytest.mark.skipif(sys.platform == "win32", reason="uvloop has no Windows build (requirements.txt)")
def test_the_server_runs_on_uvloop_with_nagle_off_and_httptools():
    out = subprocess.run([sys.executable, "-c", SERVER_LOOP], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    served = json.loads(out.rpartition("SERVED ")[2])
    assert served["loop"].startswith("uvloop"), served
    assert served["nodelay"], served  # the server's end of a connection: no wait for the browser's acknowledgement
    assert served["http"] == "HttpToolsProtocol", served


READ_AGE = """
from streamlit import config
config.get_config_options(force_reparse=True)
print(config.get_option("global.maxCachedMessageAge"))
"""


def test_a_browser_keeps_big_elements_for_twenty_runs():
    """.streamlit/config.toml's `global.maxCachedMessageAge`: at Streamlit's 2 a double click on a chart (a pick, then
    its clear, two reruns at once) let the browser drop an element the server was already referring to, and it
    stopped with a connection error (Cached ForwardMsg MISS)."""
    out = subprocess.run([sys.executable, "-c", READ_AGE], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout
    assert int(out.split()[-1]) >= 20, out
