"""The operator console in a real browser: headless Chromium (Debian's) driven by Selenium.

One server and two browser windows (two cookie jars: two people) for the whole module.
Screenshots of every page go to the module's temp dir (``ONGRID_CONSOLE_SHOTS`` names
another folder to keep them).
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from consolekit import Console, csrf_of, serve

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is in the test extra")
from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="needs Debian's chromium and chromium-driver (.ci/run installs them with apt-get)",
)


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with serve(tmp_path_factory.mktemp("console")) as running:
        yield running


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = os.environ.get("ONGRID_CONSOLE_SHOTS")
    path = Path(folder) if folder else tmp_path_factory.mktemp("screenshots")
    path.mkdir(parents=True, exist_ok=True)
    return path


def _browser(profile: Path) -> Any:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not look anything up
    service = webdriver.ChromeService(executable_path=DRIVER)
    driver = webdriver.Chrome(options=options, service=service)
    driver.implicitly_wait(0)
    return driver


@pytest.fixture(scope="module")
def browsers(tmp_path_factory: pytest.TempPathFactory, console: Console) -> Iterator[tuple[Any, Any]]:
    # Depends on the server so the browsers (and their live connections) end first.
    first = _browser(tmp_path_factory.mktemp("profile-a"))
    try:
        second = _browser(tmp_path_factory.mktemp("profile-b"))
    except BaseException:
        first.quit()
        raise
    try:
        yield first, second
    finally:
        first.quit()
        second.quit()


def wait_for(check: Callable[[], Any], timeout: float = 10.0, what: str = "the page") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (NoSuchElementException, StaleElementReferenceException):  # a live part was just replaced
            value = None
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def text(driver: Any, css: str) -> str:
    return str(driver.find_element(By.CSS_SELECTOR, css).text)


def open_as(driver: Any, console: Console, who: str, path: str) -> None:
    """Open ``path``, signing ``who`` in first when the session is not (a test run on its own)."""
    driver.get(console.url + path)
    if "/login" in driver.current_url:
        sign_in(driver, console, who)
        driver.get(console.url + path)


def click(driver: Any, css: str) -> None:
    """Click ``css``, finding it again if a live refresh replaced it in between."""

    def attempt() -> bool:
        driver.find_element(By.CSS_SELECTOR, css).click()
        return True

    wait_for(attempt, what=f"{css} to click")


def sign_in(driver: Any, console: Console, who: str) -> None:
    driver.get(console.url + "/login")
    box = driver.find_element(By.ID, "token")
    box.send_keys(console.tokens[who])
    box.submit()
    wait_for(lambda: driver.find_elements(By.CSS_SELECTOR, ".who strong"), what="the signed-in header")
    assert text(driver, ".who strong") == who


def sign_out(driver: Any) -> None:
    driver.find_element(By.CSS_SELECTOR, ".who button").click()
    wait_for(lambda: "/login" in driver.current_url, what="the sign-in page")


def shot(driver: Any, shots: Path, name: str) -> None:
    driver.save_screenshot(str(shots / f"{name}.png"))


def test_sign_in_sets_a_strict_httponly_cookie_and_sign_out_clears_it(browsers, console, shots):
    ann, _ = browsers
    ann.get(console.url + "/approvals")
    assert "/login" in ann.current_url  # not signed in: sent to the sign-in page
    ann.find_element(By.ID, "token").send_keys("not-a-token")
    ann.find_element(By.ID, "token").submit()
    assert "not valid" in wait_for(lambda: text(ann, ".flash-error"))
    shot(ann, shots, "login")
    sign_in(ann, console, "ann")
    cookie = ann.get_cookie("ongrid_session")
    assert cookie["httpOnly"] is True
    assert cookie["sameSite"] == "Strict"
    assert ann.execute_script("return document.cookie") == ""  # scripts cannot read it
    sign_out(ann)
    assert ann.get_cookie("ongrid_session") is None
    ann.get(console.url + "/")
    assert "/login" in ann.current_url
    sign_in(ann, console, "ann")


def test_catalog_filters_as_you_type(browsers, console, shots):
    ann, _ = browsers
    open_as(ann, console, "ann", "/")
    rows = ann.find_elements(By.CSS_SELECTOR, "#tools tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, "strong").text for r in rows] == ["echo", "restart", "wipe"]
    assert [
        b.text for b in ann.find_elements(By.CSS_SELECTOR, "#tools .badge.b-safe, #tools .badge.b-dangerous")
    ] == [
        "safe",
        "dangerous",
    ]
    shot(ann, shots, "catalog")
    ann.find_element(By.ID, "q").send_keys("wip")
    visible = [r.find_element(By.CSS_SELECTOR, "strong").text for r in rows if r.is_displayed()]
    assert visible == ["wipe"]
    ann.find_element(By.ID, "q").clear()


def test_tool_form_refuses_bad_values_in_the_browser_and_on_the_server(browsers, console, shots):
    ann, _ = browsers
    open_as(ann, console, "ann", "/tools/echo")
    count = ann.find_element(By.ID, "f-count")
    count.send_keys("0")
    ann.find_element(By.CSS_SELECTOR, ".run-form button[type=submit]").click()
    assert ann.execute_script("return arguments[0].validity.rangeUnderflow", count) is True
    assert "Run the tool" in text(ann, "#run-result")  # nothing was sent
    name = ann.find_element(By.ID, "f-name")
    name.send_keys("ABC")  # the schema's pattern, checked by the page's script
    assert "pattern" in ann.execute_script("return arguments[0].validationMessage", name)
    # Past the browser (as a hand-made request would be): the server refuses and says where.
    ann.execute_script("document.querySelector('form.run-form').noValidate = true")
    ann.find_element(By.CSS_SELECTOR, ".run-form button[type=submit]").click()
    errors = wait_for(lambda: ann.find_elements(By.CSS_SELECTOR, ".field-error.live"), what="field errors")
    assert any("less than the minimum of 1" in e.text for e in errors), [e.text for e in errors]
    assert "invalid_arguments" in text(ann, "#run-result")
    shot(ann, shots, "tool-invalid")


def test_a_safe_run_shows_its_stderr_live_then_its_result(browsers, console, shots):
    ann, _ = browsers
    open_as(ann, console, "ann", "/tools/echo")
    ann.find_element(By.ID, "f-count").send_keys("2")
    ann.find_element(By.ID, "f-name").send_keys("abc")
    ann.find_element(By.CSS_SELECTOR, ".run-form button[type=submit]").click()
    # Both read in one round trip to the browser: the skill runs only 0.8 s after its first line.
    read_both = "return ['#run-log', '#run-result'].map(s => document.querySelector(s).innerText)"
    log, result = wait_for(
        lambda: (lambda got: got if "checking" in got[0] else None)(ann.execute_script(read_both)),
        what="the first stderr line",
    )
    assert "running" in result, (log, result)  # the line arrived while the skill still ran
    wait_for(lambda: '"count": 2' in text(ann, "#run-result"), what="the result")
    assert text(ann, "#run-log").split("\n")[-1] == "done"
    shot(ann, shots, "tool-run")


def test_two_people_approve_a_ticket_live_and_it_runs_once(browsers, console, shots):
    ann, bob = browsers
    sign_in(bob, console, "bob")
    bob.get(console.url + "/approvals")
    assert not bob.find_elements(By.CSS_SELECTOR, "article.ticket.t-pending")
    # ann asks for a dangerous call: it opens a ticket instead of running
    open_as(ann, console, "ann", "/tools/wipe")
    ann.find_element(By.ID, "f-path").send_keys("/srv/old")
    ann.find_element(By.CSS_SELECTOR, ".run-form button[type=submit]").click()
    ticket_link = wait_for(
        lambda: ann.find_elements(By.CSS_SELECTOR, "#run-result a.mono"), what="the ticket"
    )
    ticket_id = ticket_link[0].text
    # bob's page shows it without a reload
    card = wait_for(lambda: text(bob, f"#t-{ticket_id}"), what="the new ticket, live")
    assert "0 of 2" in card and "left" in card and '"path": "/srv/old"' in card
    assert wait_for(lambda: text(bob, f"#t-{ticket_id} dd strong")) == "ann"
    shot(bob, shots, "approvals-pending")
    # ann sees her own ticket without an approve button ...
    ann.get(console.url + "/approvals")
    buttons = wait_for(lambda: [b.text for b in ann.find_elements(By.CSS_SELECTOR, f"#t-{ticket_id} button")])
    assert buttons == ["Withdraw"]
    assert "no approve button for you" in text(ann, f"#t-{ticket_id}")
    # ... and the server refuses it anyway
    client = console.client("ann")
    refused = client.post(
        f"/approvals/{ticket_id}/approve", data={"csrf": csrf_of(client.get("/approvals").text)}
    )
    assert refused.status_code == 403
    assert "Nobody approves their own ticket" in refused.text
    assert console.host.ticket(ticket_id).approvals == ()
    # bob approves with a note; ann's page follows
    bob.find_element(By.ID, f"note-{ticket_id}").send_keys("backup checked")
    click(bob, f"#t-{ticket_id} button.primary")
    assert "1 of 2" in wait_for(lambda: text(bob, ".flash-ok"))
    wait_for(lambda: "1 of 2" in text(ann, f"#t-{ticket_id} .count.big"), what="1 of 2 on ann's page, live")
    wait_for(lambda: "backup checked" in text(ann, f"#t-{ticket_id}"), what="bob's note on ann's page")
    # cid (same browser as bob, after signing out) gives the second approval: the call runs once
    sign_out(bob)
    sign_in(bob, console, "cid")
    bob.get(console.url + "/approvals")
    click(bob, f"#t-{ticket_id} button.primary")
    assert "runs now for ann" in wait_for(lambda: text(bob, ".flash-ok"))
    wait_for(lambda: "ran: ok" in text(ann, f"#t-{ticket_id}"), what="the run's outcome on ann's page, live")
    shot(ann, shots, "approvals")
    ticket = console.host.ticket(ticket_id)
    assert (ticket.status, ticket.executed_by, ticket.approvers) == ("executed", "ann", ("bob", "cid"))
    runs = [e for e in console.host.audit.entries(tool="wipe") if e.outcome == "ok"]
    assert [(e.caller, e.ticket, e.approvers) for e in runs] == [("ann", ticket_id, ("bob", "cid"))]


def test_audit_page_is_live_and_shows_a_tampered_chain_as_broken(browsers, console, shots):
    _, cid = browsers  # signed in as cid by the test before; sign in again when run alone
    cid.get(console.url + "/audit")
    if "/login" in cid.current_url:
        sign_in(cid, console, "cid")
        cid.get(console.url + "/audit")
    wait_for(lambda: "verifies to row" in text(cid, "#chain"), what="the chain check, fetched after paint")
    before = len(cid.find_elements(By.CSS_SELECTOR, "#audit-rows tbody tr"))
    rest = console.client()
    answer = rest.post(
        "/v1/skills/echo/execute",
        json={"params": {"count": 3}},
        headers={"Authorization": f"Bearer {console.tokens['vic']}"},
    )
    assert answer.status_code == 200
    wait_for(
        lambda: len(cid.find_elements(By.CSS_SELECTOR, "#audit-rows tbody tr")) == before + 1,
        what="the new audit row, live",
    )
    newest = wait_for(lambda: text(cid, "#audit-rows tbody tr"))
    assert "vic" in newest and "echo" in newest
    shot(cid, shots, "audit")
    cid.get(console.url + "/audit?caller=vic")
    tools = {td.text for td in cid.find_elements(By.CSS_SELECTOR, "#audit-rows tbody td:nth-child(3)")}
    assert tools == {"echo"}
    console.host.audit.flush()
    with sqlite3.connect(console.host.audit.path) as db:  # the row this test made: there alone too
        (newest_seq,) = db.execute("SELECT max(seq) FROM entries").fetchone()
        db.execute("UPDATE entries SET caller = 'mallory' WHERE seq = ?", (newest_seq,))
    cid.get(console.url + "/audit")
    chain = wait_for(lambda: text(cid, "#chain.chain-broken"), what="the broken chain")
    assert f"broken at row {newest_seq}" in chain
    shot(cid, shots, "audit-broken")


def test_no_page_breaks_its_content_security_policy(browsers, console):
    ann, _ = browsers
    for path in ("/", "/tools/echo", "/approvals", "/audit"):
        ann.get(console.url + path)
    problems = [e["message"] for e in ann.get_log("browser") if "Content Security Policy" in e["message"]]
    assert problems == []


def _long_words_ticket(console: Console) -> str:
    """A ticket whose requester's reason and approval note are 2,000 characters without a break."""
    import httpx

    def as_(who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {console.tokens[who]}"}

    body = {"tool": "wipe", "params": {"path": "/srv/" + "p" * 300}, "persona": "admin", "reason": "R" * 2000}
    with httpx.Client(base_url=console.url) as client:
        ticket = str(client.post("/v1/approvals", json=body, headers=as_("ann")).json()["id"])
        client.post(
            f"/v1/approvals/{ticket}/approve",
            json={"note": "N" * 2000, "sop": "S" * 2000},
            headers=as_("bob"),
        )
    return ticket


def test_pages_fit_a_phone_width(browsers, console, shots):
    ann, _ = browsers
    ticket = _long_words_ticket(console)
    open_as(ann, console, "ann", "/approvals")
    ann.get(console.url + "/approvals")
    width = ann.execute_script("return document.documentElement.scrollWidth")
    assert width <= 1280, f"/approvals is {width}px wide on a 1280px screen"
    assert f"t-{ticket}" in ann.page_source
    shot(ann, shots, "approvals-long-words")
    ann.set_window_size(390, 844)
    try:
        for path, name in (("/approvals", "phone-approvals"), ("/tools/echo", "phone-tool")):
            ann.get(console.url + path)
            width = ann.execute_script("return document.documentElement.scrollWidth")
            assert width <= 390, f"{path} is {width}px wide on a 390px screen"
            shot(ann, shots, name)
    finally:
        ann.set_window_size(1280, 900)
