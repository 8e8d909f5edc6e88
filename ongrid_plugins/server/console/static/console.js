// ongrid console: the one script of every page (served by the package, no inline script).
// Everything here is an improvement on plain HTML forms, which work without it.
"use strict";

(function () {
  const $ = (sel, root) => (root || document).querySelector(sel);
  const $$ = (sel, root) => Array.from((root || document).querySelectorAll(sel));

  // ---------------------------------------------------------------- catalog: filter as you type
  function setupFilter() {
    const input = $("input[data-filter-rows]");
    if (!input) return;
    const rows = $$(input.dataset.filterRows);
    const none = $("#no-match");
    const apply = () => {
      const words = input.value.toLowerCase().split(/\s+/).filter(Boolean);
      let shown = 0;
      for (const row of rows) {
        const hay = row.dataset.search || "";
        const hit = words.every((w) => hay.includes(w));
        row.hidden = !hit;
        if (hit) shown += 1;
      }
      if (none) none.hidden = shown !== 0;
    };
    input.addEventListener("input", apply);
  }

  // ---------------------------------------------------------------- forms: checks the browser lacks
  function checkField(el) {
    el.setCustomValidity("");
    if (el.dataset.json && el.value.trim() !== "") {
      try { JSON.parse(el.value); } catch (err) { el.setCustomValidity("Not valid JSON: " + err.message); }
    }
    if (el.dataset.pattern && el.value !== "") {
      let re = null;
      try { re = new RegExp(el.dataset.pattern, "u"); } catch (err) { re = null; }
      if (re && !re.test(el.value)) el.setCustomValidity("Must match the pattern " + el.dataset.pattern);
    }
  }

  function setupRunForm() {
    const form = $("form.run-form");
    if (!form) return;
    const fields = $$("[data-json], [data-pattern]", form);
    for (const el of fields) el.addEventListener("input", () => checkField(el));
    form.addEventListener("submit", (event) => {
      for (const el of fields) checkField(el);
      if (!form.noValidate && !form.checkValidity()) { event.preventDefault(); form.reportValidity(); return; }
      if (!window.fetch || !window.ReadableStream || !form.dataset.stream) return;  // plain POST then
      event.preventDefault();
      runLive(form);
    });
  }

  function markErrors(form, errors) {
    for (const old of $$(".field-error.live", form)) old.remove();
    for (const el of $$("[aria-invalid]", form)) el.removeAttribute("aria-invalid");
    for (const item of errors || []) {
      const name = "arg." + String(item.path || "").replace(/^[$./]+/, "").split(/[./[]/)[0];
      const el = form.elements.namedItem(name);
      const p = document.createElement("p");
      p.className = "field-error live";
      p.setAttribute("role", "alert");
      p.textContent = item.message;
      if (el && el.closest) {
        el.setAttribute("aria-invalid", "true");
        el.closest(".field").appendChild(p);
      } else {
        form.insertBefore(p, form.querySelector(".actions"));
      }
    }
  }

  function showResult(box, data, kind) {
    box.textContent = "";
    const head = document.createElement("p");
    const badge = document.createElement("span");
    const ok = kind === "result" && Object.prototype.hasOwnProperty.call(data, "result");
    badge.className = "badge " + (ok ? "b-ok" : "b-failed");
    badge.textContent = ok ? "ok" : (data.code || "error");
    head.appendChild(badge);
    head.appendChild(document.createTextNode(" " + (ok ? "call " + (data.call_id || "") : (data.error || ""))));
    box.appendChild(head);
    if (data.ticket && data.ticket.id) {
      const p = document.createElement("p");
      p.appendChild(document.createTextNode("Ticket "));
      const a = document.createElement("a");
      a.href = "/approvals#t-" + data.ticket.id;
      a.className = "mono";
      a.textContent = data.ticket.id;
      p.appendChild(a);
      p.appendChild(document.createTextNode(" is open: it needs " + (data.ticket.required || 2) +
        " approvals by people other than you, and runs right after the second one."));
      box.appendChild(p);
    }
    // The result of a call that ran; for a failure, what the skill printed (a refusal has neither).
    const shown = ok ? data.result : data.value;
    if (ok || (shown !== undefined && shown !== null)) {
      const pre = document.createElement("pre");
      pre.className = "result";
      pre.textContent = JSON.stringify(shown, null, 2);
      box.appendChild(pre);
    }
    if (!ok && data.stderr_tail && data.stderr_tail.length) {
      const tail = document.createElement("pre");
      tail.className = "log";
      tail.textContent = data.stderr_tail.join("\n");
      box.appendChild(tail);
    }
  }

  async function runLive(form) {
    const out = $("#run-output"), log = $("#run-log"), box = $("#run-result");
    const button = $("button[type=submit]", form);
    out.hidden = false;
    out.scrollIntoView({ block: "nearest" });
    log.textContent = "";
    box.textContent = "running…";
    button.disabled = true;
    markErrors(form, []);
    try {
      const response = await fetch(form.dataset.stream, {
        method: "POST",
        body: new URLSearchParams(new FormData(form)),
        credentials: "same-origin",
        headers: { "Accept": "text/event-stream" },
      });
      if (!response.ok) { box.textContent = "The server answered " + response.status + ": reload the page."; return; }
      const reader = response.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let cut;
        while ((cut = buffer.indexOf("\n\n")) >= 0) {
          const chunk = buffer.slice(0, cut);
          buffer = buffer.slice(cut + 2);
          let kind = "message", data = "";
          for (const line of chunk.split("\n")) {
            if (line.startsWith("event: ")) kind = line.slice(7);
            else if (line.startsWith("data: ")) data += line.slice(6);
          }
          const parsed = data ? JSON.parse(data) : {};
          if (kind === "log") { log.textContent += parsed.line + "\n"; log.scrollTop = log.scrollHeight; }
          else if (kind === "result" || kind === "error") {
            showResult(box, parsed, kind);
            if (parsed.code === "invalid_arguments") markErrors(form, parsed.errors);
          }
        }
      }
    } catch (err) {
      box.textContent = "The run could not be followed: " + err.message;
    } finally {
      if (!log.textContent) log.textContent = "(nothing on stderr)";
      button.disabled = false;
    }
  }

  // ---------------------------------------------------------------- time left on tickets
  function tick() {
    const now = Date.now() / 1000;
    for (const el of $$(".time-left[data-expires]")) {
      const left = Math.max(0, Math.floor(Number(el.dataset.expires) - now));
      let text;
      if (left < 60) text = left + " s";
      else if (left < 3600) text = Math.floor(left / 60) + " min " + (left % 60) + " s";
      else text = Math.floor(left / 3600) + " h " + Math.floor((left % 3600) / 60) + " min";
      el.textContent = left > 0 ? text + " left" : "expired";
    }
  }

  // ---------------------------------------------------------------- live parts over server-sent events
  function setupLive() {
    const topics = document.body.dataset.live;
    if (!topics || !window.EventSource) return;
    const state = $("#live-state");
    const source = new EventSource("/events?topics=" + encodeURIComponent(topics));
    const refresh = async (id) => {
      const part = document.getElementById(id);
      if (!part) return;
      if (part.contains(document.activeElement) && document.activeElement.tagName === "INPUT" &&
          document.activeElement.value) {
        part.dataset.stale = "1";  // someone is typing a note: refresh when they leave the field
        return;
      }
      const response = await fetch(part.dataset.part, { credentials: "same-origin" });
      if (response.ok) { part.innerHTML = await response.text(); tick(); }
      part.dataset.refreshed = String(Date.now());
    };
    source.addEventListener("approvals", () => refresh("tickets"));
    source.addEventListener("audit", () => refresh("audit"));
    source.addEventListener("open", () => { if (state) state.textContent = "Updates live."; });
    source.addEventListener("error", () => { if (state) state.textContent = "Live updates paused; retrying…"; });
    document.addEventListener("focusout", (event) => {
      const part = event.target.closest && event.target.closest("[data-stale]");
      if (part) { delete part.dataset.stale; refresh(part.id); }
    });
  }

  // ---------------------------------------------------------------- the audit chain, checked after paint
  async function fillChain() {
    const box = $("[data-chain]");
    if (!box) return;
    const response = await fetch(box.dataset.chain, { credentials: "same-origin" });
    if (response.ok) box.outerHTML = await response.text();
  }

  document.addEventListener("DOMContentLoaded", () => {
    fillChain();
    setupFilter();
    setupRunForm();
    setupLive();
    tick();
    setInterval(tick, 1000);
  });
})();
