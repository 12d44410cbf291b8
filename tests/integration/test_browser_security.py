"""The loopback API against hostile web pages, in headless Chromium (Debian's chromium and chromium-driver):

- a page on another origin (a second HTTP server on another 127.0.0.1 port) fires every state-changing request
  it can, ``fetch`` in ``no-cors`` mode, a CORS ``fetch`` with the custom header, and form posts, and none of
  them restores, approves, rejects, prunes or adds anything: each reached the server and was refused;
- with a resolver rule mapping ``attacker.example`` to 127.0.0.1 (what DNS rebinding achieves), pages at
  ``http://attacker.example:PORT/`` are refused by the Host check, so no memory is shown.
"""

from __future__ import annotations

import collections
import http.server
import shutil
import socket
import threading
from dataclasses import replace

import pytest

from tests.conftest import FakeEmbedder, serving
from vecmem import MemoryBank, Settings
from vecmem.interfaces.http.app import create_app

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="chromium and chromium-driver are not installed "
                                "(`make test` installs them with apt-get)")

ATTACK_PAGE = """<!doctype html><html><body><iframe name="sink"></iframe><script>
const api = "%(api)s";
const posts = ["/memories/%(old)s/restore", "/memories/%(pending)s/approve", "/memories/%(doomed)s/reject",
               "/prune", "/memories/%(archived)s/unarchive"];
async function attack() {
  const tries = [];
  for (const path of posts) {
    tries.push(fetch(api + path, {method: "POST", mode: "no-cors"}));
    tries.push(fetch(api + path, {method: "POST", mode: "no-cors", headers: {"X-Vecmem-Request": "1"}}));
    tries.push(fetch(api + path, {method: "POST", headers: {"X-Vecmem-Request": "1",
                                                           "Content-Type": "application/json"}}));
  }
  tries.push(fetch(api + "/memories", {method: "POST", mode: "no-cors", headers: {"Content-Type": "text/plain"},
                                       body: JSON.stringify({content: "planted by a web page"})}));
  tries.push(fetch(api + "/memories/%(old)s", {method: "DELETE", mode: "no-cors"}));
  await Promise.allSettled(tries);
  for (const path of [...posts, "/memories"]) {
    const form = document.createElement("form");
    form.method = "POST"; form.action = api + path; form.target = "sink"; form.enctype = "text/plain";
    const field = document.createElement("input");
    field.name = '{"content": "planted by a form", "x": "'; field.value = '"}'; form.appendChild(field);
    document.body.appendChild(form);
    await new Promise((done) => { document.querySelector("iframe").onload = done; form.submit();
                                 setTimeout(done, 3000); });
  }
  document.title = "done";
}
attack();
</script></body></html>"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Recorder:
    """ASGI middleware keeping (method, path, status) of every answered request."""

    def __init__(self, app):
        self.app, self.answered = app, []

    async def __call__(self, scope, receive, send):
        async def sending(message):
            if message["type"] == "http.response.start":
                self.answered.append((scope["method"], scope["path"], message["status"]))
            await send(message)
        await self.app(scope, receive, sending)


@pytest.fixture
def api(tmp_path):

    bank = MemoryBank(Settings(home=tmp_path / "home"), embedder=FakeEmbedder())
    old = bank.add("The user works in TypeScript", memory_type="preference")
    new = bank.add("The user works in JavaScript now", memory_type="preference", resolve=False)  # replaced by hand
    bank.supersede(old.id, new.id)
    pending = bank.add("The user maybe plays the cello", source="extracted", confidence=0.2, status="pending")
    doomed = bank.add("The user maybe sails", source="extracted", confidence=0.2, status="pending")
    bank.add("The user once liked jazz", importance=0.1)
    bank.add("The user keeps two cats", importance=0.9)
    bank.settings = replace(bank.settings, cap_per_user=2)
    (archived,) = [candidate.record for candidate in bank.prune()]  # one memory to unarchive
    bank.settings = replace(bank.settings, cap_per_user=1)
    assert bank.prune(dry_run=True)  # so a /prune that got through would archive something
    recorder = Recorder(create_app(bank))
    ids = {"old": old.id, "pending": pending.id, "doomed": doomed.id, "archived": archived.id}
    with serving(recorder) as port:
        yield port, bank, recorder, ids
    bank.close()


@pytest.fixture
def attacker(api):
    """The attack page, served from another origin: another port of 127.0.0.1."""
    port = api[0]
    page = (ATTACK_PAGE % {"api": f"http://127.0.0.1:{port}", **api[3]}).encode()

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


def _browser(*extra):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--disable-background-networking", "--no-first-run", "--window-size=1200,900", *extra):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(DRIVER), options=options)


def _state(bank):
    return sorted((r.id, r.status, r.superseded_by, r.content) for r in bank.export())


def test_a_page_on_another_origin_cannot_change_anything(api, attacker):
    from selenium.webdriver.support.ui import WebDriverWait

    _, bank, recorder, ids = api
    before = _state(bank)
    browser = _browser()
    try:
        browser.get(attacker)
        WebDriverWait(browser, 60).until(lambda b: b.title == "done")
    finally:
        browser.quit()
    assert _state(bank) == before  # nothing restored, approved, rejected, pruned, unarchived, added or forgotten
    state_changing = [(m, p, s) for m, p, s in recorder.answered if m != "GET"]
    reached = {path for _, path, _ in state_changing}
    assert {f"/memories/{ids['old']}/restore", f"/memories/{ids['pending']}/approve", "/prune", "/memories",
            f"/memories/{ids['doomed']}/reject"} <= reached  # the requests did arrive: the server refused them
    assert all(status in (403, 405) for _, _, status in state_changing), state_changing
    assert any(m == "OPTIONS" for m, _, _ in state_changing)  # the CORS try was a preflight, never answered yes
    print(f"cross-origin page: {len(state_changing)} state-changing requests reached the server, statuses "
          f"{sorted(collections.Counter(status for _, _, status in state_changing).items())}")


def test_the_panels_own_origin_still_can(api):
    port, bank, _, ids = api
    browser = _browser()
    try:
        browser.get(f"http://127.0.0.1:{port}/")
        status = browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            f"fetch('/memories/{ids['old']}/restore', {{method: 'POST', headers: {{'X-Vecmem-Request': '1'}}}})"
            ".then((r) => done(r.status));")
    finally:
        browser.quit()
    assert status == 200 and not bank.get(ids["old"]).superseded  # the same request, same-origin, goes through


def test_a_rebound_name_is_refused_by_the_host_check(api):
    from selenium.webdriver.common.by import By

    port, _, recorder, _ = api
    earlier = len(recorder.answered)  # the fixture's own readiness probe
    browser = _browser("--host-resolver-rules=MAP attacker.example 127.0.0.1")
    try:
        for path in ("/", "/memories?user=default", "/export", "/openapi.json"):
            browser.get(f"http://attacker.example:{port}{path}")
            text = browser.find_element(By.TAG_NAME, "body").text
            assert "does not answer for host" in text and "TypeScript" not in text and "cats" not in text, path
    finally:
        browser.quit()
    from_attacker = [status for _, _, status in recorder.answered[earlier:]]
    assert len(from_attacker) >= 4 and set(from_attacker) == {421}
