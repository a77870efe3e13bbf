#!/usr/bin/env python3
"""The dashboard in a real browser (Debian's headless Chromium driven by Selenium), against a
real `orchestrate serve --http` that DashboardBrowserTests started.

    dashboard_browser.py URL ARTIFACTS_DIR

URL is what `serve` printed (`http://127.0.0.1:PORT/?token=…`). The script opens it, submits
runs through the API (one whose label is hostile markup, moving bytes slowly under a rate cap),
sees the run appear and its progress advance without the page reloading, presses Pause, Resume
and Cancel and waits for the page to show each; then a session file's progress, the filters,
Stop/Start of a named queue, Pause/Resume on the schedules view, every other view, the console, and a tab that has no token. It saves a screenshot of each view in ARTIFACTS_DIR and
prints `CANCELLED RUN_ID` for the Swift test to check in the store. Exits non-zero on any
failure, with what went wrong.
"""
import atexit
import json
import shutil
import sys
import tempfile
import time
import urllib.parse
import urllib.request

from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

HOSTILE = "<script>alert(1)</script>"
HOSTILE_FILE = "<img src=x onerror=alert(2)>"
SLOW = """version: 1
name: slow-transfer
steps:
  prepare: { uses: test.noop }
  transfer: { uses: test.metered, with: { bytes: 200000000, chunk: 65536 }, needs: [prepare] }
  checksum: { uses: exec, with: { command: [sh, -c, 'echo "checksum of <i>clip</i> ok"'] }, needs: [prepare] }
  publish: { uses: test.noop, needs: [transfer, checksum] }
"""
FAILING = """version: 1
name: flaky-upload
steps:
  upload: { uses: test.fail, with: { kind: permanent, message: "the server said 403" } }
"""
SESSION = """version: 1
name: inbox
steps:
  accept: { uses: test.items, with: { file: "FILE", item_ms: 120000 } }
"""
HOSTILE_PATH = "/data/<b onmouseover=alert(3)>clip</b>.mov"
QUICK = "version: 1\nname: quick\nsteps:\n  a: { uses: test.noop }\n"
SCHEDULE = "nightly-upload"  # registered by DashboardBrowserTests before this starts


def main():
    url, artifacts = sys.argv[1], sys.argv[2]
    parsed = urllib.parse.urlparse(url)
    base = f"{parsed.scheme}://{parsed.netloc}"
    token = urllib.parse.parse_qs(parsed.query)["token"][0]

    def api(method, path, body=None):
        request = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                         headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=20) as response:
            return json.loads(response.read())

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,900"]:
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.set_script_timeout(20)
    try:
        run(driver, api, url, artifacts)
    except Exception:
        driver.save_screenshot(f"{artifacts}/failure.png")
        print("page text at the failure:\n" + driver.find_element(By.TAG_NAME, "body").text[:3000], file=sys.stderr)
        raise
    finally:
        driver.quit()


def wait(what, condition, timeout=30):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            value = condition()
            if value:
                return value
        except Exception:  # an element replaced while we looked at it: look again
            pass
        time.sleep(0.1)
    raise AssertionError("timed out waiting for " + what)


def text(driver, selector):
    return driver.find_element(By.CSS_SELECTOR, selector).text


def click(driver, selector):
    """Clicks what `selector` finds, looking again if the live page redrew it meanwhile."""
    def attempt():
        driver.find_element(By.CSS_SELECTOR, selector).click()
        return True
    wait("a click on " + selector, attempt)


def run(driver, api, url, artifacts):
    # The token moves from the URL into this tab's sessionStorage.
    driver.get(url)
    wait("the overview", lambda: text(driver, "main h1") == "Overview")
    assert "token" not in driver.current_url, "the token stayed in the address bar: " + driver.current_url
    assert driver.execute_script("return sessionStorage.getItem('orchestrate-token')") == url.split("token=")[1]

    click(driver, "nav a[data-view=runs]")
    wait("the runs view", lambda: text(driver, "main h1") == "Runs")
    # Set in this document: still there later means the page never reloaded.
    driver.execute_script("window.sameDocument = 'yes'")
    wait("the live indicator", lambda: driver.find_element(By.ID, "live").text == "live")

    api("POST", "/api/runs", {"workflow_yaml": FAILING, "labels": {"batch": "7"}})
    api("POST", "/api/runs", {"workflow_yaml": QUICK, "queue": "thumbnails"})
    slow = api("POST", "/api/runs", {"workflow_yaml": SLOW, "max_rate": 1_000_000,
                                     "labels": {"title": HOSTILE, "file": HOSTILE_FILE}})
    run_id = slow["id"]

    # The run appears without a reload (the event stream refreshes the list).
    # (Read through `wait`: the live list may redraw the row between finding it and reading it.)
    labels = wait("the submitted run in the list",
                  lambda: driver.find_element(By.CSS_SELECTOR, f"tr[data-run='{run_id}'] td.labels").text)
    assert HOSTILE in labels and HOSTILE_FILE in labels, "the labels are not shown as text: " + labels
    assert_no_markup_ran(driver)
    wait("the failed run in the list", lambda: "failed" in driver.find_element(By.CSS_SELECTOR, "table.runs").text)
    driver.save_screenshot(f"{artifacts}/runs.png")

    # Run detail: the transfer step's bar advances as events arrive.
    click(driver, f"tr[data-run='{run_id}'] a")
    wait("the run detail", lambda: run_id in driver.find_element(By.CSS_SELECTOR, "main h1").text)

    def transfer_done():
        bar = driver.find_element(By.CSS_SELECTOR, "tr[data-step='transfer'] progress")
        return float(bar.get_attribute("value") or 0)
    first = wait("progress of the transfer step", lambda: transfer_done() > 0)
    later = wait("the progress to advance", lambda: transfer_done() > first and transfer_done())
    print(f"progress advanced from {first:.0f} to {later:.0f} bytes without a reload")
    wait("a rate and an ETA beside the bar", lambda: "/s · ETA" in text(driver, "tr[data-step='transfer'] .figures"))
    wait("the hostile label as text in the run detail", lambda: HOSTILE in text(driver, "dl.meta"))
    assert_no_markup_ran(driver)
    wait("the step graph's edges", lambda: "← transfer, checksum" in text(driver, ".graph"))
    wait("the exec step's output in the log", lambda: "checksum of <i>clip</i> ok" in text(driver, "ol.log"))
    driver.set_window_size(1100, 1250)  # the whole run page, for the README
    time.sleep(0.5)
    driver.save_screenshot(f"{artifacts}/run.png")

    # On a phone: nothing wider than the screen except inside scrolling tables.
    driver.set_window_size(390, 844)
    time.sleep(0.5)
    overflow = driver.execute_script("return document.documentElement.scrollWidth - window.innerWidth")
    assert overflow <= 1, f"the run page is {overflow}px wider than a phone's screen"
    driver.save_screenshot(f"{artifacts}/run-phone.png")
    driver.set_window_size(1280, 900)

    # Nodes (/api/nodes, with each node's running runs): this serve's node runs the run; its
    # link leads back to the run.
    click(driver, "nav a[data-view=nodes]")
    wait("the running run under its node", lambda: run_id in text(driver, "main table"))
    driver.save_screenshot(f"{artifacts}/nodes.png")
    click(driver, f"main table a[href='#/runs/{run_id}']")
    wait("the run detail again", lambda: run_id in text(driver, "main h1"))
    # The singular route, as one types it by hand, is the same page; `#/run` alone, the list.
    driver.execute_script("window.location.hash = arguments[0]", "#/run/" + run_id)
    wait("the run detail by #/run/ID", lambda: run_id in text(driver, "main h1") and "undefined" not in text(driver, "main"))
    driver.execute_script("window.location.hash = '#/run'")
    wait("the runs list by #/run", lambda: run_id in [r.get_attribute("data-run") for r in driver.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")])
    driver.execute_script("window.location.hash = arguments[0]", "#/runs/" + run_id)
    wait("the run detail again", lambda: run_id in text(driver, "main h1"))

    # Pause and Resume: the page follows the run's status as the worker acts on each.
    click(driver, "button[data-verb='pause']")
    wait("the run shown paused", lambda: text(driver, "main h1 .badge") == "paused")
    click(driver, "button[data-verb='unpause']")
    wait("the run shown running again", lambda: text(driver, "main h1 .badge") == "running")

    # Cancel: the page shows it (live), and the API (the store) agrees.
    click(driver, "button[data-verb='cancel']")
    wait("the run shown cancelled", lambda: text(driver, "main h1 .badge") == "cancelled")
    assert api("GET", "/api/runs/" + run_id)["status"] == "cancelled"
    assert driver.execute_script("return window.sameDocument") == "yes", "the page reloaded"

    # A persistent session: a file added to it shows its own bar, advancing, its name as text.
    inbox = tempfile.mkdtemp(prefix="dashboard-inbox-")
    atexit.register(shutil.rmtree, inbox, True)
    session = api("POST", "/api/runs", {"workflow_yaml": SESSION.replace("FILE", inbox + "/received")})["id"]
    wait("the session to run", lambda: api("GET", "/api/runs/" + session)["status"] == "running")
    api("POST", f"/api/runs/{session}/paths", {"source": HOSTILE_PATH, "destination": "in/clip.mov"})
    # Opened once the file moves: its item.started is journaled before the page's stream, which
    # leaves it out (items=live), so the "Moving now" row must take its name from the stored items.
    wait("the session's file to start", lambda: any(i.get("status") == "running" for i in api("GET", "/api/runs/" + session).get("items", [])))
    driver.execute_script("window.location.hash = arguments[0]", "#/runs/" + session)

    def file_done():
        return float(driver.find_element(By.CSS_SELECTOR, "table.files progress").get_attribute("value") or 0)
    first = wait("progress of the session's file", lambda: file_done() > 0)
    wait("the file's progress to advance", lambda: file_done() > first)
    wait("the file's name as text", lambda: HOSTILE_PATH + " → in/clip.mov" in text(driver, "table.files"))
    wait("the file's rate and ETA", lambda: "/s · ETA" in text(driver, "table.files .figures"))
    assert_no_markup_ran(driver)
    driver.execute_script("document.querySelector('table.files').scrollIntoView()")
    driver.save_screenshot(f"{artifacts}/run-files.png")
    api("POST", f"/api/runs/{session}/cancel")
    assert driver.execute_script("return window.sameDocument") == "yes", "the page reloaded"

    # The runs view's filters: a search and a status, kept in the URL.
    click(driver, "nav a[data-view=runs]")
    search = wait("the search box", lambda: driver.find_element(By.CSS_SELECTOR, "form.filters input[name=text]"))
    search.send_keys("flaky")
    click(driver, "form.filters button")
    wait("only the flaky run listed", lambda: [r.text.split()[1] for r in driver.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")] == ["flaky-upload"])
    assert "text=flaky" in driver.current_url, driver.current_url
    driver.execute_script("window.location.hash = '#/runs?status=cancelled'")
    def only_cancelled():
        rows = driver.find_elements(By.CSS_SELECTOR, "table.runs tbody tr")
        statuses = {r.find_element(By.CSS_SELECTOR, ".badge").text for r in rows}
        return statuses == {"cancelled"} and run_id in [r.get_attribute("data-run") for r in rows]
    wait("only cancelled runs listed", only_cancelled)

    # Every other view, each with its screenshot.
    for view, expect in [("overview", "Recent failures"), ("queues", "thumbnails"), ("plugins", "test.metered")]:
        click(driver, f"nav a[data-view={view}]")
        wait(f"the {view} view showing {expect!r}", lambda: expect in text(driver, "main"))
        time.sleep(0.3)
        driver.save_screenshot(f"{artifacts}/{view}.png")
    # Queues: the thumbnails queue stopped by its own button (the API agrees: stopped by name,
    # not the whole store), then started again.
    click(driver, "nav a[data-view=queues]")
    queue_row = "tr[data-queue='thumbnails']"
    wait("the thumbnails queue running", lambda: "running" in text(driver, queue_row))
    click(driver, f"{queue_row} button[data-action=stop]")
    wait("the thumbnails queue stopped", lambda: "stopped" in text(driver, queue_row)
         and driver.find_elements(By.CSS_SELECTOR, f"{queue_row} button[data-action=start]"))
    queues = api("GET", "/api/queues")
    assert not queues["passive"], queues
    assert [q["passive"] for q in queues["queues"] if q["name"] == "thumbnails"] == [True], queues
    click(driver, f"{queue_row} button[data-action=start]")
    wait("the thumbnails queue running again", lambda: "running" in text(driver, queue_row)
         and driver.find_elements(By.CSS_SELECTOR, f"{queue_row} button[data-action=stop]"))
    assert [q["passive"] for q in api("GET", "/api/queues")["queues"] if q["name"] == "thumbnails"] == [False]
    # Schedules (the test registered one, daily at 03:00 Berlin time): Pause, Resume and Pause
    # again, each seen in the page as the store now says it (the view reads it back).
    click(driver, "nav a[data-view=schedules]")
    row_selector = f"tr[data-schedule='{SCHEDULE}']"
    wait("the registered schedule", lambda: "Europe/Berlin" in text(driver, row_selector) and "0 3 * * *" in text(driver, row_selector))
    # (Through `wait`: the live page may redraw the row between finding it and reading it.)
    wait("the registered schedule active", lambda: "active" in text(driver, row_selector))
    for action, state in [("pause", "paused"), ("resume", "active"), ("pause", "paused")]:
        click(driver, f"{row_selector} button[data-action={action}]")
        wait(f"the schedule {state}", lambda: state in text(driver, row_selector)
             and driver.find_elements(By.CSS_SELECTOR, f"{row_selector} button[data-action={'resume' if state == 'paused' else 'pause'}]"))
        if state == "paused":
            wait("a paused schedule without a next time",
                 lambda: "—" in driver.find_elements(By.CSS_SELECTOR, f"{row_selector} td")[3].text)
            driver.save_screenshot(f"{artifacts}/schedules.png")
        else:
            wait("an active schedule with its next time",
                 lambda: "—" not in driver.find_elements(By.CSS_SELECTOR, f"{row_selector} td")[3].text)
    assert_no_markup_ran(driver)

    click(driver, "nav a[data-view=overview]")
    wait("the failure in the overview", lambda: "the server said 403" in text(driver, "main"))
    assert driver.execute_script("return window.sameDocument") == "yes", "the page reloaded"
    assert_no_markup_ran(driver)

    # The browser's console: no Content-Security-Policy violation, no script error. (The
    # nodes view's 404 from a server without /api/nodes is expected.)
    problems = [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"
                and "/api/nodes" not in e["message"]]
    assert not problems, "console errors: " + "\n".join(problems)

    # A new tab opened without the token (sessionStorage is per tab) asks for it, refuses a
    # wrong one, and takes the right one.
    driver.switch_to.new_window("tab")
    driver.get(url.split("?")[0])
    field = wait("the token form", lambda: driver.find_element(By.CSS_SELECTOR, "form.token-form input[name=token]"))
    field.send_keys("not-the-token-at-all")
    click(driver, "form.token-form button")
    wait("the refusal", lambda: "refused" in text(driver, "main"))
    driver.find_element(By.CSS_SELECTOR, "form.token-form input[name=token]").send_keys(url.split("token=")[1])
    click(driver, "form.token-form button")
    wait("the overview with the right token", lambda: "Recent failures" in text(driver, "main"))

    print("CANCELLED " + run_id)


def assert_no_markup_ran(driver):
    try:
        text = driver.switch_to.alert.text
        raise AssertionError("an alert opened: " + text)
    except NoAlertPresentException:
        pass
    injected = driver.execute_script("return document.querySelectorAll('main script, main img').length")
    assert injected == 0, f"{injected} element(s) made from a label"


if __name__ == "__main__":
    main()
