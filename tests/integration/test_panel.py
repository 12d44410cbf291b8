"""The memory panel end to end in headless Chromium (Debian's chromium and chromium-driver, which the Makefile
installs), driven by selenium: add a memory, search it, edit it, see its supersession chain and restore, forget
it, approve a memory from the review queue; a screenshot of the page with real memories is saved to
artifacts/panel.png."""

from __future__ import annotations

import contextlib
import shutil

import pytest

from tests.conftest import REPO, FakeEmbedder, serving
from vecmem import MemoryBank, Settings
from vecmem.interfaces.opening import find_owner
from vecmem.interfaces.owner import OwnerEndpoint
from vecmem.interfaces.server import create_app

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="chromium and chromium-driver are not installed "
                                "(`make test` installs them with apt-get)")
SCREENSHOT = REPO / "artifacts" / "panel.png"


@pytest.fixture(params=["in process", "through the owner"])
def served(tmp_path, request):
    """The panel's server on the bank itself, or (as `vecmem serve` started while the chat holds the store) on a
    RemoteBank calling the process that owns it (here an owner endpoint in this process)."""
    settings = Settings(home=tmp_path / "home")
    bank = MemoryBank(settings, embedder=FakeEmbedder())
    bank.add("The user prefers green tea in the afternoon", memory_type="preference", importance=0.7)
    old = bank.add("The user works in TypeScript", memory_type="preference")
    new = bank.add("The user works in JavaScript now", memory_type="preference")
    bank.supersede(old.id, new.id)
    bank.add("Deadline for the billing migration is Friday", session_id="work")
    with contextlib.ExitStack() as stack:
        api = bank
        if request.param == "through the owner":
            stack.enter_context(OwnerEndpoint(bank, settings.home, program="python -m vecmem.chat"))
            api = stack.enter_context(contextlib.closing(find_owner(settings)))
        port = stack.enter_context(serving(create_app(api)))
        yield f"http://127.0.0.1:{port}/", bank, old, new
    bank.close()


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    yield driver
    driver.quit()


def test_add_search_edit_chain_restore_forget_in_a_real_browser(served, browser):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import Select, WebDriverWait

    url, bank, old, new = served
    wait = WebDriverWait(browser, 20, ignored_exceptions=[StaleElementReferenceException])  # tables re-render

    def rows(table):
        return browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")

    def row_of(table, text):
        return wait.until(lambda _: next((r for r in rows(table) if text in r.text), False))

    def press(table, text, action):
        def pressed(_):
            row_of(table, text).find_element(By.CSS_SELECTOR, f"[data-action={action}]").click()
            return True
        wait.until(pressed)

    browser.get(url)
    row_of("memories", "green tea")
    assert "memories: 4" in browser.find_element(By.ID, "stats").text
    assert "chat hit rate: not recorded yet" in browser.find_element(By.ID, "stats").text

    browser.find_element(By.ID, "add-content").send_keys("The user keeps two cats called Mochi and Yuzu")
    browser.find_element(By.CSS_SELECTOR, "#add button").click()
    row_of("memories", "Mochi and Yuzu")
    added = next(r for r in bank.list_memories() if "Mochi" in r.content)

    browser.find_element(By.ID, "query").send_keys("cats Mochi")
    browser.find_element(By.CSS_SELECTOR, "#search button").click()
    scores = wait.until(lambda _: [c.text for c in row_of("hits", "Mochi and Yuzu").find_elements(By.TAG_NAME, "td")])
    assert all(text == "–" or 0 <= float(text) <= 1 for text in scores[:6]) and float(scores[0]) > 0  # why it ranked

    press("memories", "Mochi and Yuzu", "edit")
    for answer in ("The user keeps three cats called Mochi, Yuzu and Kiki", "0.9"):
        wait.until(ready.alert_is_present())
        alert = browser.switch_to.alert
        alert.send_keys(answer)
        alert.accept()
    row_of("memories", "Mochi, Yuzu and Kiki")
    assert bank.get(added.id).importance == 0.9 and "Kiki" in bank.get(added.id).content

    press("memories", "JavaScript now", "history")
    press("chain", "TypeScript", "restore")
    wait.until(lambda _: not bank.get(old.id).superseded)
    assert bank.get(new.id).superseded_by == old.id
    row_of("memories", "works in TypeScript")

    pending = bank.add("The user maybe plays the cello", source="extracted", confidence=0.2, status="pending")
    Select(browser.find_element(By.ID, "status")).select_by_value("pending")
    press("memories", "plays the cello", "approve")
    wait.until(lambda _: bank.get(pending.id).status == "live")
    Select(browser.find_element(By.ID, "status")).select_by_value("live")
    row_of("memories", "plays the cello")

    browser.find_element(By.ID, "session").send_keys("work")
    browser.find_element(By.ID, "refresh").click()
    row_of("memories", "billing migration")
    SCREENSHOT.parent.mkdir(exist_ok=True)
    browser.save_screenshot(str(SCREENSHOT))  # real memories, scores of the last search, the chain

    press("memories", "Mochi, Yuzu and Kiki", "forget")
    wait.until(ready.alert_is_present())
    browser.switch_to.alert.accept()
    wait.until(lambda _: not any("Kiki" in r.text for r in rows("memories")))
    assert all("Kiki" not in r.content for r in bank.export())
    assert SCREENSHOT.stat().st_size > 20_000
