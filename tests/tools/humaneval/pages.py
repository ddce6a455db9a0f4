"""What the browser tests do with a page: wait for it, press keys, read it, and what the
session stored (tests/tools/humaneval/test_browser*.py; the browser is conftest.py's)."""

from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tools.humaneval import store

WINDOW = (1100, 900)  # The desktop size every test starts from.


def wait_for_url(driver, ending):
    WebDriverWait(driver, 20).until(lambda d: d.current_url.endswith(ending))


def wait_for(driver, css):
    return WebDriverWait(driver, 20).until(
        lambda d: d.find_elements(By.CSS_SELECTOR, css) and d.find_element(By.CSS_SELECTOR,
                                                                           css))


def press(driver, *keys):
    ActionChains(driver).send_keys(*keys).perform()


def captions(driver):
    return tuple(e.text for e in driver.find_elements(By.CSS_SELECTOR, "p.caption"))


def stored(session, rater):
    with store.Store(session.db_path) as db:
        return [(r["item"], r["answer"]["choice"]) for r in db.ratings() if r["rater"] == rater]


def status(driver):
    box = driver.find_element(By.ID, "status")
    return box.text if box.is_displayed() else ""


def text(driver, css):
    """The text of the element `css` selects, read in one step (the dashboard replaces its
    panel every half second, so a found element may be gone the next moment)."""
    return driver.execute_script(
        "const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)


def box(driver, element):
    return driver.execute_script(
        "const r = arguments[0].getBoundingClientRect();"
        "return [r.left, r.top + window.scrollY, r.width, r.height];", element)
