"""The captioning page in headless chromium: chosen or dropped images give the API's captions,
an unreadable one its message. Fails (never skips) without chromium and chromedriver."""

import os

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tests.tools.captioning import page_screenshot as page
from tools.captioning import Decoding


@pytest.fixture(scope="module")
def url(captioner):
    with page.serving(captioner) as base:
        yield base


def _rows(captions):
    return [(c.lang, c.text, f"{c.log_prob:.3f}") for c in captions]


def test_a_chosen_image_is_captioned_in_the_ticked_languages_by_beam_search(browser, url,
                                                                           captioner,
                                                                           demo_images):
    browser.get(url)
    sample_settings = browser.find_element(By.CSS_SELECTOR, '.settings[data-for="sample"]')
    assert not sample_settings.is_displayed()  # greedy is chosen: no sampling settings
    page.choose_image(browser, os.path.relpath(demo_images[0]))  # As docs/captioning.md's.
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "preview").is_displayed())
    assert browser.find_element(By.ID, "drop-text").text == demo_images[0].rsplit("/", 1)[1]

    page.choose(browser, ("en", "es", "zh"), "beam", {"beam_size": 3, "alpha": 0.6})
    got = page.caption(browser)
    want = captioner.caption(demo_images[:1], ("en", "es", "zh"), Decoding("beam", beam_size=3))
    assert got == _rows(want)
    assert [e.get_attribute("lang") for e in browser.find_elements(
        By.CSS_SELECTOR, "td.caption")] == ["en", "es", "zh"]
    assert "beam search (3 beams, alpha 0.6)" in browser.find_element(By.ID, "status").text


def test_a_chosen_image_is_captioned_in_all_languages_by_sampling(browser, url, captioner,
                                                                  demo_images, tmp_path):
    browser.get(url)
    sample_settings = browser.find_element(By.CSS_SELECTOR, '.settings[data-for="sample"]')
    page.choose_image(browser, os.path.relpath(demo_images[0]))
    WebDriverWait(browser, 10).until(lambda d: d.find_element(By.ID, "preview").is_displayed())
    browser.find_element(By.ID, "all-langs").click()
    assert all(box.is_selected() for box in browser.find_elements(
        By.CSS_SELECTOR, 'input[name="langs"]'))
    page.choose(browser, None, "sample", {"temperature": 0.8, "top_k": 20, "seed": 4})
    assert sample_settings.is_displayed()
    got = page.caption(browser)
    want = captioner.caption(demo_images[:1], "all",
                             Decoding("sample", temperature=0.8, top_k=20, seed=4))
    assert got == _rows(want)

    out = tmp_path / "page.png"
    browser.save_screenshot(str(out))
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_dropped_image_is_captioned(browser, url, captioner, demo_images):
    browser.get(url)
    # A file dropped on the zone (a DataTransfer holding it, as a real drop carries).
    holder = browser.execute_script(
        "const i = document.createElement('input'); i.type = 'file'; i.id = 'holder';"
        "document.body.appendChild(i); return i;")
    holder.send_keys(demo_images[1])
    browser.execute_script(
        "const t = new DataTransfer(); t.items.add(arguments[0].files[0]);"
        "arguments[1].dispatchEvent(new DragEvent('drop', {dataTransfer: t, bubbles: true}));",
        holder, browser.find_element(By.ID, "drop"))
    assert browser.find_element(By.ID, "drop-text").text == demo_images[1].rsplit("/", 1)[1]
    page.choose(browser, ("en",), "greedy")
    assert page.caption(browser) == _rows(captioner.caption(demo_images[1:2], "en"))


def test_an_unreadable_image_is_said(browser, url, tmp_path):
    browser.get(url)
    page.choose(browser, ("en",), "greedy")
    broken = tmp_path / "broken.jpg"
    broken.write_bytes(b"\xff\xd8\xff broken")
    browser.find_element(By.ID, "image").send_keys(str(broken))
    assert page.caption(browser) == []  # the table is hidden
    status = browser.find_element(By.ID, "status")
    assert status.text == "cannot decode image broken.jpg: not an image in a format PIL reads"
    assert "error" in status.get_attribute("class")


def test_the_button_is_disabled_while_captioning(browser, url, demo_images):
    browser.get(url)
    # The server's answer held back 1 s, each request counted.
    browser.execute_script(
        "window.requests = 0; const real = window.fetch;"
        "window.fetch = (...args) => { window.requests += 1;"
        "  return new Promise(r => setTimeout(r, 1000)).then(() => real(...args)); };")
    page.choose_image(browser, os.path.relpath(demo_images[0]))  # As docs/captioning.md's.
    page.choose(browser, ("en",), "greedy")
    submit = browser.find_element(By.ID, "submit")
    submit.click()
    assert not submit.is_enabled() and submit.text == "Captioning…"
    assert browser.find_element(By.ID, "form").get_attribute("aria-busy") == "true"
    browser.execute_script("arguments[0].requestSubmit()", browser.find_element(By.ID, "form"))
    WebDriverWait(browser, 60).until(lambda d: submit.is_enabled())
    assert submit.text == "Caption" and browser.execute_script("return window.requests") == 1
    assert browser.find_elements(By.CSS_SELECTOR, "tr.caption-row")


def _outside(browser):
    """The page's overflow on the current window: [what sticks out], empty when none."""
    return browser.execute_script("""
        const width = window.innerWidth, out = [];
        if (document.documentElement.scrollWidth > width) {
          out.push(`page ${document.documentElement.scrollWidth} px wide in ${width}`);
        }
        const controls = document.querySelectorAll(
          "#drop, #form input, #form button, #form label, legend, #captions td, #status");
        for (const e of controls) {
          const box = e.getBoundingClientRect();
          const shown = box.width > 0 && box.height > 0;
          if (shown && (box.left < 0 || box.right > width + 0.5)) {
            out.push(`${e.tagName}#${e.id || e.name || e.textContent.trim().slice(0, 20)}: `
                     + `${box.left.toFixed(1)}..${box.right.toFixed(1)}`);
          }
        }
        return out;""")


def test_the_page_fits_a_phone(browser, url, demo_images):
    size = browser.get_window_size()
    browser.set_window_size(390, 844)
    try:
        browser.get(url)
        assert browser.execute_script("return window.innerWidth") == 390
        page.choose_image(browser, os.path.relpath(demo_images[0]))  # As docs/captioning.md's.
        browser.find_element(By.ID, "all-langs").click()
        for decoding in ("greedy", "beam", "sample"):  # each with its settings shown
            page.choose(browser, None, decoding)
            assert _outside(browser) == [], decoding
        assert page.caption(browser)  # and with the captions' table
        assert _outside(browser) == []
    finally:
        browser.set_window_size(size["width"], size["height"])
