"""The memory panel end to end in headless Chromium (Debian's chromium and chromium-driver, which the Makefile
installs), driven by selenium: add a memory with tags, search it and see the words it matched, edit its text,
type, tags, importance and scope in the edit dialog, see its dated history and restore, approve from the review
queue, forget; pages and sorting, bulk approve, reject and forget (one failing among them), the version conflict
of the edit dialog, and the Chinese and English UI (a language switch remembered across reloads, the browser's
language by default). Screenshots go to artifacts/: panel.png, panel-en.png, panel-zh.png and panel-edit.png
(Chinese renders where a CJK font is installed: `make browser` installs fonts-noto-cjk when none is)."""

from __future__ import annotations

import contextlib
import re
import shutil
from datetime import UTC, datetime

import pytest

from tests.conftest import REPO, FakeEmbedder, serving
from vecmem import MemoryBank, Settings
from vecmem.interfaces.http.app import create_app
from vecmem.interfaces.owner.endpoint import OwnerEndpoint
from vecmem.interfaces.owner.opening import find_owner

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="chromium and chromium-driver are not installed "
                                "(`make test` installs them with apt-get)")
ARTIFACTS = REPO / "artifacts"


def _seeded(settings):
    bank = MemoryBank(settings, embedder=FakeEmbedder())
    bank.add("The user prefers green tea in the afternoon", memory_type="preference", importance=0.7, tags=["tea"])
    old = bank.add("The user works in TypeScript", memory_type="preference")
    new = bank.add("The user works in JavaScript now", memory_type="preference", resolve=False)  # replaced by hand below
    bank.supersede(old.id, new.id)
    bank.add("Deadline for the billing migration is Friday", session_id="work")
    return bank, old, new


@pytest.fixture(params=["in process", "through the owner"])
def served(tmp_path, request):
    """The panel's server on the bank itself, or (as `vecmem serve` started while the chat holds the store) on a
    RemoteBank calling the process that owns it (here an owner endpoint in this process)."""
    settings = Settings(home=tmp_path / "home")
    bank, old, new = _seeded(settings)
    with contextlib.ExitStack() as stack:
        api = bank
        if request.param == "through the owner":
            stack.enter_context(OwnerEndpoint(bank, settings.home, program="python -m vecmem.chat"))
            api = stack.enter_context(contextlib.closing(find_owner(settings)))
        port = stack.enter_context(serving(create_app(api)))
        yield f"http://127.0.0.1:{port}/", bank, old, new
    bank.close()


@pytest.fixture
def local(tmp_path):
    """The panel's server on a bank in this process."""
    bank, old, new = _seeded(Settings(home=tmp_path / "home"))
    with serving(create_app(bank)) as port:
        yield f"http://127.0.0.1:{port}/", bank, old, new
    bank.close()


def _browser(*flags, language=None):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1500,1100", *flags):
        options.add_argument(flag)
    if language:  # what the browser tells pages it prefers (navigator.languages)
        options.add_argument(f"--lang={language}")
        options.add_experimental_option("prefs", {"intl.accept_languages": language})
    return webdriver.Chrome(service=Service(DRIVER), options=options)


@pytest.fixture
def browser():
    driver = _browser("--lang=en-US")
    yield driver
    driver.quit()


class Page:
    """What a person does on the panel, and what they see."""

    def __init__(self, browser):
        from selenium.common.exceptions import StaleElementReferenceException
        from selenium.webdriver.support.ui import WebDriverWait

        self.browser = browser
        self.wait = WebDriverWait(browser, 20, ignored_exceptions=[StaleElementReferenceException])  # re-renders

    def find(self, css):
        from selenium.webdriver.common.by import By

        return self.browser.find_element(By.CSS_SELECTOR, css)

    def rows(self, table):
        from selenium.webdriver.common.by import By

        return self.browser.find_elements(By.CSS_SELECTOR, f"#{table} tbody tr")

    def row_of(self, table, text):
        return self.wait.until(lambda _: next((r for r in self.rows(table) if text in r.text), False))

    def gone(self, table, text):
        self.wait.until(lambda _: not any(text in r.text for r in self.rows(table)))

    def press(self, table, text, action):
        def pressed(_):
            self.row_of(table, text).find_element("css selector", f"[data-action={action}]").click()
            return True
        self.wait.until(pressed)

    def pick(self, *texts):
        for text in texts:
            self.row_of("memories", text).find_element("css selector", ".pick").click()

    def type_into(self, css, text):
        field = self.find(css)
        field.clear()
        field.send_keys(text)

    def choose(self, css, value):
        from selenium.webdriver.support.ui import Select

        Select(self.find(css)).select_by_value(value)

    def accept_alert(self):
        from selenium.webdriver.support import expected_conditions as ready

        self.wait.until(ready.alert_is_present())
        self.browser.switch_to.alert.accept()

    def column(self, table, index):
        return [row.find_elements("css selector", "td")[index].text for row in self.rows(table)]

    def shoot(self, name, height=1150):
        ARTIFACTS.mkdir(exist_ok=True)
        self.browser.set_window_size(1500, height)
        self.browser.save_screenshot(str(ARTIFACTS / name))
        assert (ARTIFACTS / name).stat().st_size > 20_000


def test_add_search_edit_chain_restore_forget_in_a_real_browser(served, browser):
    url, bank, old, new = served
    page = Page(browser)
    browser.get(url)
    page.row_of("memories", "green tea")
    assert "memories: 4" in page.find("#stats").text
    assert "chat hit rate: not recorded yet" in page.find("#stats").text
    assert page.row_of("memories", "green tea").find_element("css selector", ".tag").text == "tea"

    page.type_into("#add-content", "The user keeps two cats called Mochi and Yuzu")
    page.type_into("#add-tags", "pets, cats")
    page.find("#add button").click()
    page.row_of("memories", "Mochi and Yuzu")
    added = next(r for r in bank.list_memories() if "Mochi" in r.content)
    assert added.tags == ("pets", "cats")

    page.type_into("#query", "cats Mochi")
    page.find("#search button").click()
    hit = page.row_of("hits", "Mochi and Yuzu")
    scores = [c.text for c in hit.find_elements("css selector", "td")][:7]
    assert all(text == "–" or 0 <= float(text) <= 1 for text in scores) and float(scores[0]) > 0  # why it ranked
    assert [chip.text for chip in hit.find_elements("css selector", ".matched .term")] == ["cats", "Mochi"]

    page.press("memories", "Mochi and Yuzu", "edit")  # the edit dialog: text, type, tags, importance, scope
    page.type_into("#edit-content", "The user keeps three cats called Mochi, Yuzu and Kiki")
    page.choose("#edit-type", "fact")
    page.type_into("#edit-tags", "pets, cats, kiki")
    page.type_into("#edit-importance", "9")  # the ten-point scale: 0.9
    page.find("#edit-in-session").click()
    page.type_into("#edit-session", "home")
    page.find("#edit-save").click()
    page.wait.until(lambda _: bank.get(added.id).scope == "home")
    edited = bank.get(added.id)
    assert (edited.content, edited.type, edited.tags, edited.importance) == (
        "The user keeps three cats called Mochi, Yuzu and Kiki", "fact", ("pets", "cats", "kiki"), 0.9)
    row = page.row_of("memories", "Mochi, Yuzu and Kiki")
    assert "session home" in row.text and "kiki" in row.text

    page.press("memories", "Mochi, Yuzu and Kiki", "history")  # dated: when added, when an edit replaced it
    first = page.row_of("chain", "two cats called Mochi")
    year = str(datetime.now(UTC).year)
    assert first.text.startswith("replaced by an edit") and year in first.text
    assert page.row_of("chain", "Kiki").text.startswith("added") and year in page.row_of("chain", "Kiki").text

    page.press("memories", "JavaScript now", "history")
    assert [page.row_of("chain", text).find_element("css selector", ".state").text
            for text in ("TypeScript", "JavaScript")] == ["replaced", "current"]
    page.press("chain", "TypeScript", "restore")
    page.wait.until(lambda _: not bank.get(old.id).superseded)
    assert bank.get(new.id).superseded_by == old.id
    page.row_of("memories", "works in TypeScript")

    pending = bank.add("The user maybe plays the cello", source="extracted", confidence=0.2, status="pending")
    page.choose("#status", "pending")
    page.press("memories", "plays the cello", "approve")
    page.wait.until(lambda _: bank.get(pending.id).status == "live")
    page.choose("#status", "live")
    page.row_of("memories", "plays the cello")

    page.type_into("#session", "home")
    page.find("#refresh").click()
    page.row_of("memories", "Mochi, Yuzu and Kiki")
    page.shoot("panel.png")  # real memories, the scores and matched words of the last search, a chain

    page.press("memories", "Mochi, Yuzu and Kiki", "forget")
    page.accept_alert()
    page.gone("memories", "Kiki")
    assert all("Kiki" not in r.content for r in bank.export())


def test_pages_sorting_and_bulk_actions(local, browser):
    url, bank, _, _ = local
    for number in range(12):
        bank.add(f"Numbered note {number:02d}", importance=round(0.05 + 0.07 * ((number * 5) % 12), 2))
    page = Page(browser)
    browser.get(url)
    page.choose("#page-size", "10")
    page.wait.until(lambda _: page.find("#page-info").text == "1–10 of 15")  # 12 notes and 3 live memories
    assert len(page.rows("memories")) == 10 and page.find("#previous").get_property("disabled")
    page.find("#next").click()
    page.wait.until(lambda _: page.find("#page-info").text == "11–15 of 15")
    assert page.find("#next").get_property("disabled") and len(page.rows("memories")) == 5

    importance = page.find("#memories th[data-sort=importance]")
    importance.click()  # numbers start with the largest
    expected = [r.content for r in bank.page_memories(sort="-importance", limit=10).memories]
    page.wait.until(lambda _: page.column("memories", 1) == expected)
    assert page.find("#page-info").text == "1–10 of 15"  # a new order starts at the first page
    assert page.find("#memories th[data-sort=importance]").get_attribute("aria-sort") == "descending"
    page.find("#memories th[data-sort=importance]").click()
    expected = [r.content for r in bank.page_memories(sort="importance", limit=10).memories]
    page.wait.until(lambda _: page.column("memories", 1) == expected)
    assert page.find("#memories th[data-sort=importance]").get_attribute("aria-sort") == "ascending"
    page.find("#memories th[data-sort=content]").click()  # text starts from A
    page.wait.until(lambda _: page.column("memories", 1)[:2] == ["Deadline for the billing migration is Friday",
                                                                "Numbered note 00"])

    waiting = [bank.add(f"The user maybe likes sport {n}", source="extracted", confidence=0.2, status="pending")
               for n in range(3)]
    page.choose("#status", "pending")
    page.row_of("memories", "sport 2")
    assert not page.find("[data-bulk=approve]").get_property("hidden")
    page.pick("sport 0", "sport 1")
    assert page.find("#selected").text == "2 selected"
    page.find("[data-bulk=approve]").click()
    page.wait.until(lambda _: page.find("#notice").text.startswith("approve selected: 2 done, 0 failed"))
    assert [bank.get(w.id).status for w in waiting] == ["live", "live", "pending"]

    bank.add("The user maybe sails", source="extracted", confidence=0.2, status="pending")
    page.find("#refresh").click()
    page.find("#select-all").click()
    assert page.find("#selected").text == "2 selected"
    bank.reject(waiting[2].id)  # gone before the bulk request reaches it: reported, the other still rejected
    page.find("[data-bulk=reject]").click()
    notice = page.wait.until(lambda _: "1 done, 1 failed" in page.find("#notice").text and page.find("#notice"))
    assert f"{waiting[2].id}: no memory" in notice.find_element("css selector", ".failed").text
    assert bank.review_queue() == []

    page.choose("#status", "live")
    page.choose("#page-size", "25")
    page.pick("sport 0", "sport 1")
    page.find("[data-bulk=forget]").click()
    page.accept_alert()
    page.gone("memories", "sport 0")
    assert not any("sport" in r.content for r in bank.export())


def test_the_edit_dialog_never_overwrites_a_change_made_since(local, browser):
    url, bank, old, new = local
    page = Page(browser)
    browser.get(url)
    page.press("memories", "green tea", "edit")
    tea = next(r for r in bank.list_memories() if "green tea" in r.content)
    assert page.find("#edit-version").text == f"version {tea.version}"
    bank.update(tea.id, content="The user prefers oolong tea in the afternoon")  # another client, meanwhile
    page.type_into("#edit-importance", "0.2")
    page.find("#edit-save").click()
    message = page.wait.until(lambda _: page.find("#edit-message").text)
    assert message.startswith("This memory changed since you opened it (it is at version 2 now)")
    assert bank.get(tea.id).importance == 0.7 and "oolong" in bank.get(tea.id).content  # nothing overwritten
    page.shoot("panel-edit.png", height=1100)
    page.find("#edit-reload").click()
    page.wait.until(lambda _: "oolong" in page.find("#edit-content").get_property("value"))
    page.type_into("#edit-importance", "0.2")
    page.find("#edit-save").click()
    page.wait.until(lambda _: bank.get(tea.id).importance == 0.2)
    assert "oolong" in bank.get(tea.id).content

    page.press("memories", "JavaScript now", "edit")  # it replaced a global memory: it cannot move into a session
    page.find("#edit-in-session").click()
    page.type_into("#edit-session", "work")
    page.find("#edit-save").click()
    message = page.wait.until(lambda _: page.find("#edit-message").text)
    assert message.startswith("Error:") and old.id in message  # the server's reason, naming the memory it replaced
    assert bank.get(new.id).scope == "global"
    page.find("#edit-cancel").click()


def _latin_outside_data(browser):
    """Text the page itself shows (not memories, ids or what the server said) that holds Latin letters."""
    return browser.execute_script("""
      const found = [];
      const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
      for (let node = walker.nextNode(); node; node = walker.nextNode()) {
        const el = node.parentElement;
        if (el.closest(".data, script, style, #language")) continue;
        if (/[A-Za-z]/.test(node.textContent.replace(/vecmem/g, ""))) found.push(node.textContent.trim());
      }
      for (const el of document.querySelectorAll("[placeholder], [title], [aria-label]")) {
        for (const name of ["placeholder", "title", "aria-label"]) {
          const value = el.getAttribute(name);
          if (value && /[A-Za-z]/.test(value.replace(/vecmem/g, ""))) found.push(name + ": " + value);
        }
      }
      return found;""")


def test_a_chinese_and_an_english_ui(local, browser):
    url, bank, _, _ = local
    home = bank.add("用户住在杭州西湖区，喜欢喝龙井茶", importance=0.8, tags=["住址", "茶"])
    bank.update(home.id, content="用户住在杭州西湖区，喜欢喝乌龙茶")
    bank.add("用户的公司用的是 PostgreSQL", memory_type="fact", session_id="工作")
    bank.add("用户可能会弹大提琴", source="extracted", confidence=0.3, status="pending")
    page = Page(browser)
    browser.get(url)
    assert page.find("h1").text == "vecmem memory panel"  # the browser asks for English
    assert browser.execute_script("return TEXT.en && Object.keys(TEXT.en).sort().join()") == \
        browser.execute_script("return Object.keys(TEXT.zh).sort().join()")  # every string in both

    page.choose("#language", "zh")
    page.wait.until(lambda _: page.find("h1").text == "vecmem 记忆面板")
    page.row_of("memories", "乌龙茶")
    assert page.find("html").get_attribute("lang") == "zh-CN"
    page.type_into("#query", "我住在杭州西湖区")
    page.find("#search button").click()
    hit = page.row_of("hits", "乌龙茶")
    assert [chip.text for chip in hit.find_elements("css selector", ".matched .term")] == ["住", "杭州", "西湖区"]
    page.press("memories", "乌龙茶", "history")
    assert re.search(r"\d{4}年\d{1,2}月\d{1,2}日.*被编辑取代", page.row_of("chain", "龙井茶").text)
    assert page.find("#stats").text.startswith("记忆：8")
    assert _latin_outside_data(browser) == []  # every visible string of the page is Chinese
    page.shoot("panel-zh.png")

    page.choose("#status", "pending")
    page.row_of("memories", "大提琴")
    assert _latin_outside_data(browser) == []  # the review queue's buttons and states too
    page.press("memories", "大提琴", "edit")
    assert page.find("#edit-save").text == "保存" and _latin_outside_data(browser) == []
    page.find("#edit-cancel").click()

    browser.refresh()  # remembered
    page.wait.until(lambda _: page.find("h1").text == "vecmem 记忆面板")
    page.choose("#language", "en")
    page.wait.until(lambda _: page.find("h1").text == "vecmem memory panel")
    page.row_of("memories", "乌龙茶")
    page.type_into("#query", "我住在杭州西湖区")
    page.find("#search button").click()
    page.row_of("hits", "乌龙茶")
    assert "matched words" in page.find("#hits thead").text
    page.press("memories", "乌龙茶", "history")
    assert page.row_of("chain", "龙井茶").text.startswith("replaced by an edit")
    page.shoot("panel-en.png")


def test_the_browser_s_language_is_the_default(local):
    url, _, _, _ = local
    chinese = _browser(language="zh-CN")
    try:
        chinese.get(url)
        page = Page(chinese)
        page.wait.until(lambda _: page.find("h1").text == "vecmem 记忆面板")
        page.row_of("memories", "green tea")
        assert page.find("#memories thead").text.split()[:3] == ["内容", "类型", "范围"]
    finally:
        chinese.quit()
