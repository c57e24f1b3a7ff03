"""Console pages and form decisions over real HTTP (no browser): what is shown, what is recorded."""

from __future__ import annotations

import html
import re

import msgspec

from tests.console.support import csrf_of, finish, post_ticket, seed_status


def _metric(text: str, line_start: str) -> float:
    for line in text.splitlines():
        if line.startswith(line_start + " "):
            return float(line.split()[1])
    return 0.0


def _decide(console, ticket_id: str, **fields):
    page = console.get(f"/ui/tickets/{ticket_id}")
    assert page.status_code == 200, page.text
    return console.post(f"/ui/tickets/{ticket_id}/decision", data={"csrf": csrf_of(page.text), **fields})


def test_queue_page_lists_oldest_first_with_counts_and_reasons(console, ingest, prefix):
    first = post_ticket(ingest, "Refund please", "Please refund my last invoice")
    second = post_ticket(ingest, "Delete", "Please delete my account now")
    third = post_ticket(ingest, None, "The export is slow")
    finish(prefix, first, "red")
    finish(prefix, second, "red")
    finish(prefix, third, "yellow")
    assert console.get("/ui").headers["location"] == "/ui/queues/red"  # where the work is
    page = console.get("/ui/queues/red")
    assert page.status_code == 200
    assert page.text.index(first) < page.text.index(second)
    assert third not in page.text
    assert "commitment.refund" in page.text and "access.delete_account" in page.text
    assert "P(red) 75 %" in page.text
    counts = dict(re.findall(r'class="tab tab-(\w+)".*?<span class="count">(\d+)', page.text, re.S))
    assert counts == {"red": "2", "yellow": "1", "audit": "0"}
    assert 'aria-current="page">Red' in page.text


GUESS = '<span class="tag guess">guess</span>'


def test_guesses_are_shown_as_guesses_and_facts_as_facts(console, ingest, prefix):
    """Urgency 5 from raw letters must not read as a finding (red, bold); a calibrated one may."""
    guessed = post_ticket(ingest, "App crash", "The app crashes when I open settings.")
    measured = post_ticket(ingest, "Outage", "Nothing loads for any of our users since 9:00.")
    finish(prefix, guessed, "yellow", category="technical", urgency=5, team="legal", guessed=("urgency", "category"))
    finish(prefix, measured, "yellow", category="technical", urgency=5, team="engineering", guessed=())
    rows = dict(
        re.findall(
            r'<tr class="row" data-href="/ui/tickets/(t_\w+)\?queue=yellow">(.*?)</tr>',
            console.get("/ui/queues/yellow").text,
            re.S,
        )
    )
    guess_row, fact_row = rows[guessed], rows[measured]
    assert (
        f'<span class="guess" title="Uncalibrated: the model\'s guess, not a measured answer">5 {GUESS}' in guess_row
        and "urgency-5" not in guess_row
    )
    assert f"technical {GUESS}" in guess_row
    assert '<span class="urgency urgency-5">5</span>' in fact_row and GUESS not in fact_row

    page = console.get(f"/ui/tickets/{guessed}", params={"queue": "yellow"}).text
    meta = page[page.index('<dl class="meta">') :]
    meta = meta[: meta.index("</dl>")]
    assert '<dt>Urgency</dt><dd><span class="guess"' in meta and "urgency-5" not in meta
    assert f"technical {GUESS}" in meta and f"legal {GUESS}" in meta  # the team follows the category
    card = page[page.index('id="answer-urgency"') :]
    card = card[: card.index("</section>")]
    assert '<span class="chosen guess">→ 5</span>' in card and ">guess</span>" in card
    assert '<option value="" selected>(none)</option>' in page  # a guess is not offered as the label
    fact = console.get(f"/ui/tickets/{measured}", params={"queue": "yellow"}).text
    meta = fact[fact.index('<dl class="meta">') :]
    meta = meta[: meta.index("</dl>")]
    assert GUESS not in meta and '<span class="urgency urgency-5">5</span>' in meta
    assert "<dt>Team</dt><dd>engineering</dd>" in meta
    assert '<option value="technical" selected>' in fact


def test_queue_pages_follow_the_api_cursor(console, ingest, prefix, monkeypatch):
    import service.console.routes as routes

    monkeypatch.setattr(routes, "PAGE_SIZE", 2)
    ids = [post_ticket(ingest, f"Export {n}", f"The export crashes ({n})") for n in range(3)]
    for ticket_id in ids:
        finish(prefix, ticket_id, "yellow")
    page = console.get("/ui/queues/yellow")
    assert ids[0] in page.text and ids[1] in page.text and ids[2] not in page.text
    next_link = html.unescape(re.search(r'href="(/ui/queues/yellow\?cursor=[^"]+)"', page.text).group(1))
    second = console.get(next_link)
    assert ids[2] in second.text and ids[0] not in second.text
    bad = console.get("/ui/queues/yellow", params={"cursor": "garbage"})
    assert bad.status_code == 400 and "cursor is malformed" in bad.text


def test_ticket_page_shows_why_with_spans_rules_and_answers(console, ingest, prefix):
    ticket_id = post_ticket(ingest, "Double charge", "I was charged twice. Please refund it.")
    finish(prefix, ticket_id, "red", category="billing", urgency=3, red_flags=("commitment",))
    seed_status(
        prefix,
        calibration={"version": "v-cal-1", "age_s": 60.0, "stale": True, "error": "prompts changed since fitting"},
        audit={"kappa": "0.55", "gating": "0", "false_green_rate": "0.02"},
    )
    page = console.get(f"/ui/tickets/{ticket_id}", params={"queue": "red"})
    assert page.status_code == 200
    text = page.text
    assert (
        '<mark class="hit hit-yellow" title="billing.charged_twice" data-rules="billing.charged_twice">'
        "charged twice</mark>" in text
    )
    assert 'data-rules="commitment.refund">refund</mark>' in text
    assert '<q>charged twice</q> <span class="muted">@21–34</span>' in text  # offsets into subject\n\nbody
    # a rule that fires because nothing matched points at nothing
    row = text[text.index("<code>evidence.none</code>") : text.index("</tr>", text.index("<code>evidence.none</code>"))]
    assert "fires when nothing matches" in row and "<q>" not in row
    assert "75.0 %" in text and "coverage 94 %" in text and "Before calibration" in text
    assert 'id="f-flag-commitment" name="flag_commitment" checked' in text
    assert '<option value="billing" selected>' in text
    assert "Escalate to" not in text  # red is as high as it goes
    # the status strip: stale calibration and a non-gating audit are visible as such
    assert 'class="status-item cal cal-stale"' in text and "prompts changed since fitting" in text
    assert "κ 0.55 · advisory (not gating)" in text and "false greens 2.0 %" in text


def test_ticket_text_is_escaped(console, ingest, prefix):
    ticket_id = post_ticket(ingest, "<script>alert(1)</script>", 'Hi <img src=x onerror="alert(2)"> refund')
    finish(prefix, ticket_id, "red")
    text = console.get(f"/ui/tickets/{ticket_id}").text
    assert "<script>alert(1)" not in text and "<img src=x" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text


def test_untriaged_ticket_can_be_read_and_counts_as_yellow(console, ingest):
    ticket_id = post_ticket(ingest, None, "Please refund me")
    page = console.get(f"/ui/tickets/{ticket_id}")
    assert page.status_code == 200
    assert "The model has not answered yet" in page.text
    assert "Approve as yellow" in page.text


def test_a_form_decision_takes_the_api_path(console, ingest, anonymous, prefix, redis_client):
    first = post_ticket(ingest, "Refund please", "Please refund my last invoice")
    second = post_ticket(ingest, "Another refund", "Refund me as well")
    finish(prefix, first, "red", red_flags=("commitment",))
    finish(prefix, second, "red")
    before = _metric(anonymous.get("/metrics").text, 'triage_decisions_total{action="edit"}')
    response = _decide(
        console,
        first,
        action="edit",
        queue="red",
        level="red",
        category="legal",
        flag_commitment="on",
        note="needs legal",
    )
    assert response.status_code == 303, response.text
    assert response.headers["location"] == f"/ui/tickets/{second}?queue=red&decided={first}"
    entries = redis_client.xrange(f"{prefix}:decisions")
    assert len(entries) == 1
    recorded = msgspec.json.decode(entries[0][1][b"data"])
    assert recorded["ticket_id"] == first and recorded["operator"] == "ana"
    assert (recorded["action"], recorded["correct_level"], recorded["category"]) == ("edit", "red", "legal")
    assert recorded["given_level"] == "red" and recorded["note"] == "needs legal"
    assert redis_client.zscore(f"{prefix}:queue:red", first) is None
    # the flash on the next page is read back from the stored decision
    flash = console.get(response.headers["location"]).text
    assert re.search(r"Recorded <strong>edit</strong>.*?Refund please", flash, re.S)
    # the metric the API counts, counted by the console too (one registry per process)
    assert _metric(anonymous.get("/metrics").text, 'triage_decisions_total{action="edit"}') == before + 1


def test_false_green_from_the_audit_queue_counts(console, ingest, anonymous, prefix, redis_client):
    ticket_id = post_ticket(ingest, "Avatar", "How do I change my avatar?")
    finish(prefix, ticket_id, "green", queue="audit")
    before = _metric(anonymous.get("/metrics").text, "triage_false_greens_total")
    response = _decide(console, ticket_id, action="false_green", queue="audit")
    assert response.status_code == 303
    assert response.headers["location"] == f"/ui/queues/audit?decided={ticket_id}"
    assert _metric(anonymous.get("/metrics").text, "triage_false_greens_total") == before + 1
    recorded = msgspec.json.decode(redis_client.xrange(f"{prefix}:decisions")[0][1][b"data"])
    assert (recorded["action"], recorded["correct_level"], recorded["false_green"]) == ("escalate", "yellow", True)
    assert redis_client.zcard(f"{prefix}:queue:audit") == 0


def test_invalid_decisions_come_back_with_the_reason_and_the_form_as_filled(console, ingest, prefix, redis_client):
    ticket_id = post_ticket(ingest, "Refund please", "Please refund my last invoice")
    finish(prefix, ticket_id, "red")
    # a red flag with a non-red level: the API's own check refuses it
    response = _decide(
        console, ticket_id, action="edit", queue="red", level="yellow", flag_commitment="on", note="keep me"
    )
    assert response.status_code == 400
    assert "a red flag means correct_level must be red" in response.text
    assert 'role="alert"' in response.text
    assert ">keep me</textarea>" in response.text
    assert '<option value="yellow" selected>' in response.text
    # a category the API does not know
    response = _decide(console, ticket_id, action="approve", queue="red", category="pets")
    assert response.status_code == 400 and "category" in response.text
    # a forged action
    assert _decide(console, ticket_id, action="delete", queue="red").status_code == 400
    assert redis_client.xlen(f"{prefix}:decisions") == 0
    assert redis_client.zscore(f"{prefix}:queue:red", ticket_id) is not None


def test_a_decided_ticket_says_so(console, ingest, prefix):
    ticket_id = post_ticket(ingest, "Refund please", "Please refund my last invoice")
    finish(prefix, ticket_id, "red")
    assert _decide(console, ticket_id, action="approve", queue="red").status_code == 303
    page = console.get(f"/ui/tickets/{ticket_id}", params={"queue": "red"}).text
    assert "Already decided by ana: approve → red" in page
    assert "not waiting in the red queue" in page


def test_unknown_queue_and_ticket_are_404_pages(console):
    for path in ("/ui/queues/purple", "/ui/tickets/t_nope"):
        response = console.get(path)
        assert response.status_code == 404
        assert response.headers["content-type"].startswith("text/html")
    page = console.get("/ui/queues/red")
    assert (
        console.post("/ui/tickets/t_nope/decision", data={"csrf": csrf_of(page.text), "action": "approve"}).status_code
        == 404
    )


def test_the_default_button_records_nothing_and_keeps_the_form(console, ingest, prefix, redis_client):
    ticket_id = post_ticket(ingest, "Refund please", "Please refund my last invoice")
    finish(prefix, ticket_id, "red")
    response = _decide(
        console, ticket_id, action="stay", queue="red", note="half-written", flag_third_party_personal_data="on"
    )
    assert response.status_code == 200
    assert ">half-written</textarea>" in response.text
    assert 'name="flag_third_party_personal_data" checked' in response.text
    assert redis_client.xlen(f"{prefix}:decisions") == 0
