"""The operator console over real HTTP (127.0.0.1), without a browser: its defences and its rules.

The pages in a browser are in ``test_console_browser.py``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from html.parser import HTMLParser

import httpx
import pytest
from consolekit import Console, csrf_of, serve, write_skill

from ongrid_plugins.errors import ApprovalRequired
from ongrid_plugins.server.console.app import CSP
from ongrid_plugins.server.console.forms import FieldError, form_arguments
from ongrid_plugins.server.console.sessions import Sessions, SessionsFull
from ongrid_plugins.server.tokens import Principal

PAGES = ("/", "/tools/echo", "/approvals", "/audit")


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    base = tmp_path_factory.mktemp("console")
    with serve(base) as running:
        write_skill(
            base,
            "shady",
            "safe",
            script="#!/bin/sh\necho '{}'\n",
        )
        manifest = base / "skills" / "shady" / "skill.json"
        data = json.loads(manifest.read_text())
        data["description"] = '<script>alert("x")</script><img src=x onerror=alert(1)>'
        manifest.write_text(json.dumps(data))
        running.host.reload()
        yield running


def open_ticket(console: Console, who: str = "ann", path: str = "/srv/a") -> str:
    with pytest.raises(ApprovalRequired) as caught:
        console.host.call("wipe", {"path": path}, persona="admin", caller=who)
    assert caught.value.ticket is not None
    return caught.value.ticket.id


# ---------------------------------------------------------------------- sign-in


def test_pages_send_strangers_to_sign_in_and_keep_where_they_were_going(console):
    answer = console.client().get("/audit?tool=echo")
    assert answer.status_code == 303
    assert answer.headers["location"] == "/login?next=%2Faudit%3Ftool%3Decho"


def test_sign_in_sets_an_httponly_samesite_strict_cookie_without_secure_over_plain_http(console):
    client = console.client()
    nonce = csrf_of(client.get("/login").text)
    answer = client.post("/login", data={"token": console.tokens["ann"], "csrf": nonce, "next": "/approvals"})
    assert (answer.status_code, answer.headers["location"]) == (303, "/approvals")
    cookie = next(c for c in answer.headers.get_list("set-cookie") if c.startswith("ongrid_session="))
    flags = {part.strip().lower() for part in cookie.split(";")[1:]}
    assert {"httponly", "samesite=strict", "path=/"} <= flags
    assert "secure" not in flags
    assert client.get("/").status_code == 200


def test_sign_in_refuses_a_wrong_token_and_a_form_without_its_nonce(console):
    client = console.client()
    nonce = csrf_of(client.get("/login").text)
    wrong = client.post("/login", data={"token": "guess", "csrf": nonce})
    assert wrong.status_code == 401 and "not valid" in wrong.text
    assert "ongrid_session" not in wrong.headers.get("set-cookie", "")
    fresh = console.client()  # a forged cross-site sign-in has no nonce cookie
    forged = fresh.post("/login", data={"token": console.tokens["ann"], "csrf": "x"})
    assert forged.status_code == 403
    assert "ongrid_session" not in forged.headers.get("set-cookie", "")


def test_sign_in_is_a_double_submit_cookie_with_the_origin_check_as_docs_console_md_says(console):
    """Not a tracked one-time nonce: equal field and cookie pass; another site's Origin does not."""
    token = console.tokens["ann"]
    chosen = console.client()
    chosen.cookies.set("ongrid_login", "any-value", path="/login")
    assert chosen.post("/login", data={"token": token, "csrf": "any-value"}).status_code == 303
    cross = console.client()
    nonce = csrf_of(cross.get("/login").text)
    refused = cross.post(
        "/login", data={"token": token, "csrf": nonce}, headers={"Origin": "http://evil.example"}
    )
    assert refused.status_code == 403 and "ongrid_session" not in refused.headers.get("set-cookie", "")


@pytest.mark.parametrize("target", ["//evil.example/", "https://evil.example/", "/\\evil.example", "/login"])
def test_sign_in_never_redirects_off_the_console(console, target):
    client = console.client()
    nonce = csrf_of(client.get("/login").text)
    answer = client.post("/login", data={"token": console.tokens["ann"], "csrf": nonce, "next": target})
    assert answer.headers["location"] == "/"


def test_sign_out_needs_the_csrf_token_and_then_ends_the_session(console):
    client = console.client("ann")
    assert client.post("/logout", data={}).status_code == 403
    assert client.get("/").status_code == 200  # still signed in
    out = client.post("/logout", data={"csrf": csrf_of(client.get("/").text)})
    assert (out.status_code, out.headers["location"]) == (303, "/login")
    assert client.get("/").status_code == 303


def test_sessions_end_after_the_idle_time():
    now = [1000.0]
    sessions = Sessions(idle=60, clock=lambda: now[0])
    cookie, _ = sessions.create(Principal("ann", "admin"))
    now[0] += 59
    assert sessions.get(cookie) is not None
    now[0] += 61
    assert sessions.get(cookie) is None
    assert sessions.get("made-up") is None


def test_one_identity_signing_in_again_and_again_evicts_only_its_own_sessions():
    sessions = Sessions(max_sessions=100, per_identity=3)
    ann, _ = sessions.create(Principal("ann", "admin"))
    vic = [sessions.create(Principal("vic", "viewer"))[0] for _ in range(50)]
    assert sessions.get(ann) is not None  # vic's flood never reaches ann
    assert [sessions.get(cookie) is not None for cookie in vic] == [False] * 47 + [True] * 3
    assert len(sessions) == 4


def test_a_full_session_store_refuses_a_new_sign_in_instead_of_evicting_someone():
    sessions = Sessions(max_sessions=4, per_identity=2)
    kept = [sessions.create(Principal(who, "admin"))[0] for who in ("ann", "ann", "bob", "bob")]
    with pytest.raises(SessionsFull):
        sessions.create(Principal("cid", "admin"))
    assert all(sessions.get(cookie) is not None for cookie in kept)
    again, _ = sessions.create(Principal("ann", "admin"))  # ann makes room among her own
    assert sessions.get(kept[0]) is None and sessions.get(again) is not None


def test_sign_in_to_a_full_console_is_a_clear_503_and_keeps_everyone_signed_in(tmp_path, monkeypatch):
    import ongrid_plugins.server.console.sessions as store

    monkeypatch.setattr(store, "MAX_SESSIONS", 2)
    with serve(tmp_path) as small:
        ann, bob = small.client("ann"), small.client("bob")
        client = small.client()
        nonce = csrf_of(client.get("/login").text)
        full = client.post("/login", data={"token": small.tokens["vic"], "csrf": nonce, "next": "/"})
        assert full.status_code == 503 and "ongrid_session" not in full.headers.get("set-cookie", "")
        assert "too many people are signed in" in full.text and full.headers["retry-after"]
        assert ann.get("/").status_code == 200 and bob.get("/").status_code == 200


# ---------------------------------------------------------------------- headers and markup


@pytest.mark.parametrize("path", [*PAGES, "/login", "/static/console.js"])
def test_every_answer_carries_the_strict_content_security_policy(console, path):
    answer = (console.client() if path == "/login" else console.client("ann")).get(path)
    assert answer.status_code == 200
    assert answer.headers["content-security-policy"] == CSP
    assert "'unsafe-inline'" not in CSP and "http" not in CSP
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"


class _Markup(HTMLParser):
    """Every tag and attribute of a page, as the browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.mark.parametrize("path", [*PAGES, "/login"])
def test_pages_have_no_inline_script_style_or_third_party_asset(console, path):
    markup = _Markup()
    markup.feed((console.client() if path == "/login" else console.client("ann")).get(path).text)
    scripts = [a for t, a in markup.tags if t == "script"]
    assert scripts == [{"src": "/static/console.js", "defer": None}]
    assert [t for t, _ in markup.tags if t == "style"] == []
    handlers = [(t, k) for t, a in markup.tags for k in a if k.startswith("on") or k == "style"]
    assert handlers == []  # no event-handler or style attributes
    links = [v for _, a in markup.tags for k, v in a.items() if k in ("src", "href", "action") and v]
    assert [v for v in links if not v.startswith(("/", "#"))] == []  # nothing from another origin


@pytest.mark.parametrize("path", [*PAGES, "/login"])
def test_every_field_has_a_label(console, path):
    if path == "/approvals":
        open_ticket(console, "bob", "/srv/labels")  # a ticket ann may decide on: its note field
    markup = _Markup()
    markup.feed((console.client() if path == "/login" else console.client("ann")).get(path).text)
    labelled = {a.get("for") for t, a in markup.tags if t == "label"}
    fields = [
        a
        for t, a in markup.tags
        if t in ("input", "select", "textarea") and a.get("type") not in ("hidden", "submit")
    ]
    assert fields, f"{path} has no fields to check"
    assert [a for a in fields if a.get("id") not in labelled] == []


def test_skill_text_is_escaped_never_markup(console):
    html = console.client("ann").get("/").text
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert" in html


def test_static_files_are_only_the_packaged_ones(console):
    client = console.client()
    assert client.get("/static/console.css").headers["content-type"].startswith("text/css")
    for path in ("/static/app.py", "/static/..%2fapp.py", "/static/%2e%2e/__init__.py"):
        assert client.get(path).status_code == 404


# ---------------------------------------------------------------------- CSRF and origin


def test_an_approval_without_its_csrf_token_is_refused_and_changes_nothing(console):
    ticket = open_ticket(console, path="/srv/csrf")
    bob = console.client("bob")
    assert bob.post(f"/approvals/{ticket}/approve", data={"note": "x"}).status_code == 403
    other = console.client("cid")  # a token from another session is no better
    stolen = csrf_of(other.get("/approvals").text)
    assert bob.post(f"/approvals/{ticket}/approve", data={"csrf": stolen}).status_code == 403
    assert bob.post(f"/approvals/{ticket}/reject", data={}).status_code == 403
    assert console.host.ticket(ticket).approvals == ()
    assert console.host.ticket(ticket).status == "pending"


def test_a_post_from_another_origin_is_refused_even_with_the_token(console):
    ticket = open_ticket(console, path="/srv/origin")
    bob = console.client("bob")
    token = csrf_of(bob.get("/approvals").text)
    answer = bob.post(
        f"/approvals/{ticket}/approve", data={"csrf": token}, headers={"Origin": "http://evil.example"}
    )
    assert answer.status_code == 403 and "another site" in answer.text
    assert console.host.ticket(ticket).approvals == ()
    odd = bob.post(f"/approvals/{ticket}/approve", data={"csrf": token}, headers={"Origin": "<b>x</b>"})
    assert odd.status_code == 403 and "<b>x</b>" not in odd.text and "&lt;b&gt;x&lt;/b&gt;" in odd.text


# ---------------------------------------------------------------------- approvals


def test_the_requester_gets_no_approve_button_and_the_server_refuses_in_words(console):
    ticket = open_ticket(console, "ann", "/srv/own")
    ann = console.client("ann")
    page = ann.get("/approvals").text
    card = page[page.index(f'id="t-{ticket}"') :].split("</article>")[0]
    assert f"/approvals/{ticket}/approve" not in card
    assert "Withdraw" in card
    refused = ann.post(f"/approvals/{ticket}/approve", data={"csrf": csrf_of(page)})
    assert refused.status_code == 403
    assert "Nobody approves their own ticket. ann requested ticket" in refused.text
    assert console.host.ticket(ticket).approvals == ()


def test_an_approver_signs_once_and_a_viewer_not_at_all(console):
    ticket = open_ticket(console, "ann", "/srv/twice")
    bob = console.client("bob")
    token = csrf_of(bob.get("/approvals").text)
    first = bob.post(f"/approvals/{ticket}/approve", data={"csrf": token, "note": "ok by me"})
    assert first.status_code == 303
    again = bob.post(f"/approvals/{ticket}/approve", data={"csrf": token})
    assert again.status_code == 403 and "Each person approves a ticket once." in again.text
    vic = console.client("vic")
    page = vic.get("/approvals").text
    assert f'id="t-{ticket}"' not in page  # not even shown: a viewer reads only its own tickets
    refused = vic.post(f"/approvals/{ticket}/approve", data={"csrf": csrf_of(page)})
    assert refused.status_code == 403
    assert [a.approver for a in console.host.ticket(ticket).approvals] == ["bob"]
    assert console.host.ticket(ticket).approvals[0].note == "ok by me"


def test_pending_tickets_come_first_with_their_count_and_time_left(console):
    done = open_ticket(console, "ann", "/srv/first")
    console.host.reject(done, approver="ann")
    pending = open_ticket(console, "ann", "/srv/second")
    html = console.client("bob").get("/approvals?part=list").text
    assert html.index(f'id="t-{pending}"') < html.index(f'id="t-{done}"')
    card = html[html.index(f'id="t-{pending}"') :].split("</article>")[0]
    assert "0 of 2" in card and re.search(r"1[45] min \d+ s left", card)


def test_live_events_announce_a_new_ticket(console):
    bob = console.client("bob")
    with bob.stream("GET", "/events?topics=approvals", timeout=10) as events:
        lines = events.iter_lines()
        assert next(lines) == "retry: 2000"
        open_ticket(console, "ann", "/srv/live")
        deadline = time.monotonic() + 5
        seen = []
        for line in lines:
            seen.append(line)
            if line == "event: approvals" or time.monotonic() > deadline:
                break
    assert "event: approvals" in seen


def test_live_events_tell_a_persona_only_of_tickets_it_may_read(console):
    """The attack: a viewer's ``/events?topics=approvals`` was told each time a ticket it
    may not read was opened, approved or run (the file changed: everyone heard)."""
    vic, bob = console.client("vic"), console.client("bob")
    heard: dict[str, list[str]] = {"vic": [], "bob": []}

    def listen(who: str, client: httpx.Client) -> None:
        with (
            contextlib.suppress(httpx.HTTPError),
            client.stream("GET", "/events?topics=approvals", timeout=10) as events,
        ):
            for line in events.iter_lines():
                heard[who].append(line)

    threads = [
        threading.Thread(target=listen, args=pair, daemon=True) for pair in (("vic", vic), ("bob", bob))
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 5
    while not all(heard.values()) and time.monotonic() < deadline:  # both streams opened
        time.sleep(0.05)
    ticket = open_ticket(console, "ann", "/srv/not-vics")
    console.host.approve(ticket, approver="bob")
    deadline = time.monotonic() + 5
    while "event: approvals" not in heard["bob"] and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(1.0)  # four polls more for vic's stream
    assert "event: approvals" in heard["bob"]
    assert "event: approvals" not in heard["vic"], heard["vic"]
    for client in (vic, bob):
        client.close()


def test_live_events_announce_a_ticket_expiring(tmp_path):
    with serve(tmp_path, ttl=2.0) as short:
        bob = short.client("bob")  # signed in first: the ticket's 2 s start with the stream
        opened = time.monotonic()
        open_ticket(short, "ann", "/srv/soon")
        with bob.stream("GET", "/events?topics=approvals", timeout=10) as events:
            lines = events.iter_lines()
            assert next(lines) == "retry: 2000"
            line = next(line for line in lines if line.startswith("event: "))
        assert line == "event: approvals"
        assert 1.5 < time.monotonic() - opened < 8  # when it expired, not at once
        assert "expired" in bob.get("/approvals?part=list").text


def test_live_events_end_with_the_session(console):
    bob = console.client("bob")
    token = csrf_of(bob.get("/approvals").text)
    started = time.monotonic()
    with bob.stream("GET", "/events?topics=approvals", timeout=10) as events:
        lines = events.iter_lines()
        assert next(lines) == "retry: 2000"
        twin = httpx.Client(base_url=console.url, cookies=bob.cookies)  # the same session, another tab
        assert twin.post("/logout", data={"csrf": token}).status_code == 303
        rest = list(lines)  # the server closes the stream
    assert "event: approvals" not in rest
    assert time.monotonic() - started < 5


def test_a_call_approved_elsewhere_is_run_from_the_console_by_its_requester_once(console):
    ann = console.client("ann")
    token = csrf_of(ann.get("/tools/wipe").text)
    asked = ann.post("/tools/wipe/run", data={"csrf": token, "arg.path": "/srv/held"})
    assert asked.status_code == 409 and "waiting for 2 approvals" in asked.text
    ticket = re.search(r'href="/approvals#t-([0-9a-f]+)"', asked.text).group(1)
    console.host.approve(ticket, approver="bob")  # approved outside the console: nothing runs yet
    console.host.approve(ticket, approver="cid")
    page = ann.get("/approvals").text
    assert f'action="/approvals/{ticket}/run"' in page and "Run it now" in page
    bob = console.client("bob")
    assert f"/approvals/{ticket}/run" not in bob.get("/approvals").text
    refused = bob.post(f"/approvals/{ticket}/run", data={"csrf": csrf_of(bob.get("/approvals").text)})
    assert refused.status_code == 403 and "Only ann, who asked for it" in refused.text
    assert ann.post(f"/approvals/{ticket}/run", data={"csrf": token}).status_code == 303
    deadline = time.monotonic() + 10
    while "ran: ok" not in ann.get("/approvals?part=list").text:
        assert time.monotonic() < deadline, "the held call did not finish"
        time.sleep(0.1)
    again = ann.post(f"/approvals/{ticket}/run", data={"csrf": token})
    assert again.status_code == 403 and "holds no call" in again.text
    runs = [e for e in console.host.audit.entries(tool="wipe") if e.ticket == ticket and e.outcome == "ok"]
    assert [(e.caller, e.approvers) for e in runs] == [("ann", ("bob", "cid"))]


def test_live_parts_and_events_need_a_session(console):
    client = console.client()
    assert client.get("/events").status_code == 401
    assert client.get("/approvals?part=list").status_code == 401


# ---------------------------------------------------------------------- runs


def test_a_run_without_script_posts_the_form_and_shows_errors_by_their_field(console):
    ann = console.client("ann")
    token = csrf_of(ann.get("/tools/echo").text)
    bad = ann.post("/tools/echo/run", data={"csrf": token, "arg.count": "12", "arg.tags": "[1,"})
    assert bad.status_code == 422
    assert "not valid JSON" in bad.text and 'value="12"' in bad.text  # what was typed is kept
    bad = ann.post("/tools/echo/run", data={"csrf": token, "arg.count": "12"})
    assert bad.status_code == 422 and "12 is greater than the maximum of 10" in bad.text
    good = ann.post("/tools/echo/run", data={"csrf": token, "arg.count": "3", "arg.loud": "true"})
    assert good.status_code == 200 and "&quot;loud&quot;: true" not in good.text
    assert '"loud": true' in good.text


def test_a_change_runs_only_with_its_confirmation_box_ticked(console):
    ann = console.client("ann")
    token = csrf_of(ann.get("/tools/restart").text)
    unconfirmed = ann.post("/tools/restart/run", data={"csrf": token})
    assert unconfirmed.status_code == 409 and "needs a confirmation" in unconfirmed.text
    confirmed = ann.post("/tools/restart/run", data={"csrf": token, "confirm": "true"})
    assert confirmed.status_code == 200 and "b-ok" in confirmed.text


def test_the_stream_sends_each_stderr_line_then_the_result(console):
    vic = console.client("vic")
    token = csrf_of(vic.get("/tools/echo").text)
    with vic.stream("POST", "/tools/echo/run/stream", data={"csrf": token, "arg.count": "1"}) as events:
        kinds = [line for line in events.iter_lines() if line.startswith("event: ")]
    assert kinds == ["event: start", "event: log", "event: log", "event: log", "event: exit", "event: result"]


def test_a_viewer_sees_only_what_it_may_call_and_not_the_audit_log(console):
    vic = console.client("vic")
    names = re.findall(r'href="/tools/([a-z_]+)"', vic.get("/").text)
    assert names == ["echo", "shady"]
    audit = vic.get("/audit")
    assert audit.status_code == 403 and "dual-sign-required" in audit.text


# ---------------------------------------------------------------------- audit


def test_audit_filters_by_caller_and_time(console):
    console.host.call("echo", {"count": 1}, persona="viewer", caller="zed")
    cid = console.client("cid")
    html = cid.get("/audit?caller=zed").text
    assert re.findall(r"<td>echo</td>", html) == ["<td>echo</td>"]
    assert cid.get("/audit?caller=zed&start=2999-01-01T00:00").text.count("<td>echo</td>") == 0
    bad = cid.get("/audit?start=yesterday")
    assert bad.status_code == 200 and "is not a date and time" in bad.text


# ---------------------------------------------------------------------- forms


def test_form_fields_become_arguments_of_the_right_types():
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer"},
            "x": {"type": "number"},
            "on": {"type": "boolean"},
            "must": {"type": "boolean"},
            "pick": {"enum": ["a", 2]},
            "obj": {"type": "object"},
            "text": {"type": "string"},
        },
        "required": ["must"],
    }
    form = {
        "arg.n": "3",
        "arg.x": "2.5",
        "arg.on": "true",
        "arg.pick": "2",
        "arg.obj": '{"k": [1]}',
        "arg.text": "",
    }
    assert form_arguments(schema, form) == {
        "n": 3,
        "x": 2.5,
        "on": True,
        "must": False,
        "pick": 2,
        "obj": {"k": [1]},
    }
    with pytest.raises(FieldError) as caught:
        form_arguments(schema, {"arg.n": "three", "arg.obj": "{", "arg.extra": "1", "arg.x": "nan"})
    assert set(caught.value.errors) == {"n", "obj", "x", ""}


# ---------------------------------------------------------------------- entry digests


def _entry_tool(tmp_path, name: str = "echo"):
    from ongrid_plugins import Settings, SkillHost

    write_skill(tmp_path, name, "safe")
    host = SkillHost(Settings(skill_dirs=[str(tmp_path / "skills")], include_defaults=False))
    return host.get(name)


def test_the_entry_digest_is_the_files_sha256_and_the_tool_is_not_written(tmp_path):
    import hashlib

    from ongrid_plugins.server.console.digests import entry_digest

    tool = _entry_tool(tmp_path)
    expected = hashlib.sha256((tmp_path / "skills" / "echo" / "run.sh").read_bytes()).hexdigest()
    assert entry_digest(tool) == f"sha256:{expected} (entry file)"
    assert entry_digest(tool) == f"sha256:{expected} (entry file)"
    assert "console-digest" not in getattr(tool, "cache", {})  # the value object is not written


def test_an_entry_changed_in_place_never_shows_its_stale_digest_even_with_its_mtime_set_back(tmp_path):
    import os

    from ongrid_plugins.server.console.digests import entry_digest

    tool = _entry_tool(tmp_path)
    entry = tmp_path / "skills" / "echo" / "run.sh"
    st = entry.stat()
    os.utime(entry, ns=(st.st_atime_ns - 10**10, st.st_mtime_ns - 10**10))
    time.sleep(2.1)  # older than the racy window: the catalog remembers its hash by stat
    st = entry.stat()
    before = entry_digest(tool)
    data = entry.read_bytes()
    with open(entry, "r+b") as f:  # same inode, same size, one byte changed
        f.write(b"#!/bin/bash"[: len(data)] if data.startswith(b"#!/bin/sh") else b"X")
    os.utime(entry, ns=(st.st_atime_ns, st.st_mtime_ns))  # and the modification time put back
    after = entry_digest(tool)
    assert entry.stat().st_size == st.st_size and entry.stat().st_mtime_ns == st.st_mtime_ns
    assert after != before
    assert after == f"sha256:{_sha256_of(entry)} (entry file)"


def _sha256_of(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_unknown_and_oversized_entries_have_no_digest(tmp_path, monkeypatch):
    import attrs

    from ongrid_plugins.server.console import digests

    tool = _entry_tool(tmp_path)
    assert digests.entry_digest(attrs.evolve(tool, entry=str(tmp_path / "missing.sh"))) == ""
    assert digests.entry_digest(attrs.evolve(tool, entry="")) == ""
    monkeypatch.setattr(digests, "MAX_HASHED", 1)
    assert digests.entry_digest(tool) == ""


# ---------------------------------------------------------------------- what a persona may see


def _rest_ticket_ids(console: Console, who: str) -> set[str]:
    headers = {"Authorization": f"Bearer {console.tokens[who]}"}
    answer = console.client().get("/v1/approvals", headers=headers)
    assert answer.status_code == 200
    return {item["id"] for item in answer.json()["items"]}


def _page_ticket_ids(html: str) -> set[str]:
    return set(re.findall(r'<article class="ticket[^"]*" id="t-([0-9a-f]+)"', html))


def test_the_approvals_page_shows_exactly_the_tickets_rest_would(console):
    ticket = open_ticket(console, "ann", "/srv/secret-args")
    for who in ("ann", "bob", "vic"):
        client = console.client(who)
        expected = _rest_ticket_ids(console, who)
        for path in ("/approvals", "/approvals?part=list"):
            assert _page_ticket_ids(client.get(path).text) == expected, (who, path)
    vic = console.client("vic")
    for path in ("/approvals", "/approvals?part=list"):
        html = vic.get(path).text
        assert ticket not in html and "/srv/secret-args" not in html and 'href="/tools/wipe"' not in html
    assert ticket in _rest_ticket_ids(console, "ann") and ticket in _rest_ticket_ids(console, "bob")


def test_a_ticket_card_links_only_a_tool_the_reader_may_see():
    from ongrid_plugins.gate.tickets import Ticket
    from ongrid_plugins.server.console.approval_pages import ticket_list

    ticket = Ticket(
        id="ab12", tool="wipe", args_digest="d", persona="admin", requester="ann", created=1.0, expires=9e9
    )
    kw = {"me": "bob", "can_sign": True, "persona": "ops", "csrf": "c", "running": {}}
    assert 'href="/tools/wipe"' in ticket_list([ticket], **kw)
    hidden = ticket_list([ticket], visible=lambda name: False, **kw)
    assert 'href="/tools/wipe"' not in hidden and "wipe" in hidden


def test_a_tool_the_persona_may_not_call_is_not_found_as_over_rest(console):
    vic = console.client("vic")
    vic.get("/")  # the sign-in message is shown there, once
    rest = console.client().get(
        "/v1/skills/wipe", headers={"Authorization": f"Bearer {console.tokens['vic']}"}
    )
    assert rest.status_code == 404
    page = vic.get("/tools/wipe")
    assert page.status_code == 404
    for secret in ("Source", "run.sh", "Digest", "dangerous", "prints what it is given"):
        assert secret not in page.text, secret
    assert page.text == vic.get("/tools/no-such-tool").text.replace("no-such-tool", "wipe")
    token = csrf_of(vic.get("/").text)
    for route in ("/tools/wipe/run", "/tools/wipe/run/stream"):
        answer = vic.post(route, data={"csrf": token, "arg.path": "/srv/x"})
        assert answer.status_code == 404 and "Source" not in answer.text, route
    assert vic.get("/tools/echo").status_code == 200


def test_a_requesters_reason_is_labelled_as_theirs_not_the_gates(console):
    headers = {"Authorization": f"Bearer {console.tokens['ann']}"}
    body = {"tool": "wipe", "params": {"path": "/srv/why"}, "persona": "admin", "reason": "trust me, approve"}
    ticket = console.client().post("/v1/approvals", json=body, headers=headers).json()["id"]
    html = console.client("bob").get("/approvals?part=list").text
    card = html[html.index(f'id="t-{ticket}"') :].split("</article>")[0]
    assert "Requester’s reason" in card and "<dt>Why</dt>" not in card
    assert "“trust me, approve”" in card and "Gate’s reason" not in card
    gated = open_ticket(console, "ann", "/srv/gated")  # opened by the host's own gate
    html = console.client("bob").get("/approvals?part=list").text
    card = html[html.index(f'id="t-{gated}"') :].split("</article>")[0]
    assert "Gate’s reason" in card and "dual-sign-required" in card and "Requester’s reason" not in card


def test_the_stylesheet_wraps_long_unbroken_text_on_cards():
    from importlib import resources

    css = resources.files("ongrid_plugins.server.console").joinpath("static", "console.css").read_text()
    assert re.search(r"\.card[^{]*\{[^}]*overflow-wrap:\s*anywhere", css)


def test_the_note_field_takes_what_rest_takes():
    from ongrid_plugins.server.console.approval_pages import NOTE_LIMIT
    from ongrid_plugins.server.openapi import document
    from ongrid_plugins.server.rules import MAX_TEXT

    schemas = document()["components"]["schemas"]
    lengths = {
        schemas["OpenTicketRequest"]["properties"]["reason"]["maxLength"],
        schemas["ApproveRequest"]["properties"]["note"]["maxLength"],
        schemas["ApproveRequest"]["properties"]["sop"]["maxLength"],
        schemas["RejectRequest"]["properties"]["note"]["maxLength"],
    }
    assert lengths == {NOTE_LIMIT} == {MAX_TEXT}


def test_a_note_over_the_limit_is_refused_in_the_console_as_over_rest_never_cut(console):
    ticket = open_ticket(console, path="/srv/long-note")
    bob = console.client("bob")
    token = csrf_of(bob.get("/approvals").text)
    for route in ("approve", "reject"):
        answer = bob.post(f"/approvals/{ticket}/{route}", data={"csrf": token, "note": "y" * 2001})
        assert answer.status_code == 422, (route, answer.status_code)
        assert "2001 characters long" in answer.text and "at most 2000" in answer.text
    after = console.host.ticket(ticket)
    assert (after.status, after.approvals) == ("pending", ())
    answer = bob.post(f"/approvals/{ticket}/approve", data={"csrf": token, "note": "y" * 2000})
    assert answer.status_code == 303
    assert [len(a.note) for a in console.host.ticket(ticket).approvals] == [2000]
