r"""The captioning page driven in headless chromium: for the browser test and docs/'s picture.

    python -m tests.tools.captioning.page_screenshot --workdir runs/demo --image IMAGE \
        [--langs en,es,hi,zh] [--decode beam] --out docs/captioning_page.png"""

import argparse
import contextlib
import os
import shutil
import tempfile
import threading

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from tools.captioning import Captioner, web
from tools.humaneval import screenshot, server


@contextlib.contextmanager
def chromium(width=1100, height=900):
    """A headless chromium driven by selenium (an explicit driver: never downloaded)."""
    path, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not path or not driver_path:
        raise RuntimeError("chromium and chromedriver are required: `make test` installs them "
                           "(apt-get install chromium chromium-driver)")
    profile = tempfile.mkdtemp(prefix="captioning-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = path
    for flag in (*screenshot.CHROMIUM_FLAGS, f"--window-size={width},{height}",
                 f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@contextlib.contextmanager
def serving(captioner):
    """The page of `captioner` served by waitress in a thread: yields its base URL."""
    httpd = web.make_server(captioner, port=0)
    thread = threading.Thread(target=httpd.run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.effective_port}"
    finally:
        server.stop(httpd)
        thread.join(timeout=10)


def choose_image(driver, path):
    """Chooses the image file `path` (chromedriver takes absolute paths only)."""
    driver.find_element(By.ID, "image").send_keys(os.path.abspath(path))


def choose(driver, langs, decode, settings=None):
    """Ticks exactly `langs` (None: as they are), picks the decoding, types its settings."""
    for box in driver.find_elements(By.CSS_SELECTOR, 'input[name="langs"]'):
        if langs is not None and box.is_selected() != (box.get_attribute("value") in langs):
            box.click()
    driver.find_element(By.CSS_SELECTOR, f'input[name="decode"][value="{decode}"]').click()
    for name, value in (settings or {}).items():
        field = driver.find_element(By.NAME, name)
        field.clear()
        field.send_keys(str(value))


def caption(driver):
    """Clicks Caption; returns [(lang, caption, log-prob text)] once the table is shown."""
    status = driver.find_element(By.ID, "status")
    driver.execute_script("arguments[0].textContent = ''", status)
    driver.find_element(By.ID, "submit").click()
    WebDriverWait(driver, 60).until(
        lambda d: status.text and not status.text.startswith("Captioning"))
    return [tuple(cell.text for cell in row.find_elements(By.TAG_NAME, "td"))
            for row in driver.find_elements(By.CSS_SELECTOR, "tr.caption-row")
            if row.is_displayed()]


def main(argv=None):
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--langs", default="en,es,hi,zh")
    parser.add_argument("--decode", default="beam")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    with serving(Captioner.from_run(args.workdir)) as url, chromium(1000, 900) as driver:
        driver.get(url)
        choose_image(driver, args.image)
        choose(driver, args.langs.split(","), args.decode)
        caption(driver)  # compiles
        caption(driver)  # shows the time of a compiled decoding
        driver.save_screenshot(args.out)
    print(args.out)


if __name__ == "__main__":
    main()
