"""The console in a real browser (Debian's chromium driven by Playwright) against the real app.

Tickets go in through POST /v1/tickets, results are stored the way a worker stores them, and an
operator signs in, opens the red queue, opens a ticket and decides with single keystrokes; the
decision must be in the Redis decisions stream and the ticket out of its queue.

With TRIAGE_CONSOLE_SCREENSHOTS=1 the screenshots are also written to docs/img/ (for docs/console.md).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import msgspec
import pytest

from tests.console.support import finish, post_ticket, seed_status
from tests.support import OPERATOR
from tests.system import requires

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
DOCS_IMG = Path(__file__).resolve().parents[2] / "docs" / "img"

pytestmark = [
    pytest.mark.browser,
    # Playwright's own browser download does not work here: Debian's chromium.
    requires(CHROMIUM, "chromium"),
]

# Every visible form control must have a label (or an aria-label): returns the ones that do not.
UNLABELLED = """() => Array.from(document.querySelectorAll('input, select, textarea, button'))
  .filter(el => el.type !== 'hidden' && !el.hidden && el.offsetParent !== null)
  .filter(el => el.tagName === 'BUTTON' ? !el.textContent.trim() && !el.getAttribute('aria-label')
                                        : el.labels.length === 0 && !el.getAttribute('aria-label'))
  .map(el => el.outerHTML)"""
OVERFLOWS = "() => document.documentElement.scrollWidth > window.innerWidth"


def _screenshot(page, tmp_path: Path, name: str, full_page: bool = True) -> None:
    path = tmp_path / name
    page.screenshot(path=str(path), full_page=full_page)
    assert path.stat().st_size > 10_000  # a real rendering, not a blank page
    if os.environ.get("TRIAGE_CONSOLE_SCREENSHOTS"):
        DOCS_IMG.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, DOCS_IMG / name)


def _seed(ingest, prefix: str) -> dict[str, str]:
    ids = {
        "refund": post_ticket(
            ingest,
            "Refund for a double charge",
            "Hello,\n\nI was charged twice for invoice 2291 this month. This is "
            "unacceptable: please refund the second charge to my card before "
            "Friday.\n\nThanks, Maria",
        ),
        "delete": post_ticket(
            ingest,
            "Close everything",
            "We are moving to another vendor. Please delete our account and "
            "the exported reports by the end of the week.",
        ),
        "export": post_ticket(
            ingest,
            None,
            "The CSV export crashes every time I save a report with more than 10k rows (Chrome 131, Windows 11).",
        ),
        "invoice": post_ticket(
            ingest, "VAT on invoice 3310", "Why does invoice 3310 show a different VAT rate than last month?"
        ),
        "thanks": post_ticket(ingest, "Thanks!", "The new dashboard is great, thank you."),
    }
    finish(prefix, ids["refund"], "red", category="billing", urgency=3, red_flags=("commitment",))
    finish(prefix, ids["delete"], "red", category="account", urgency=2, red_flags=("destructive_or_access",))
    finish(prefix, ids["export"], "yellow", category="technical", urgency=2)
    finish(prefix, ids["invoice"], "yellow", category="billing", urgency=1)
    finish(prefix, ids["thanks"], "green", queue="audit", category="other", urgency=0)
    seed_status(
        prefix,
        calibration={"version": "20261128T090000Z-3f2a", "age_s": 7200.0, "stale": False, "error": None},
        audit={"kappa": "0.82", "gating": "1", "false_green_rate": "0.004", "last_run": str(time.time() - 5400)},
    )
    return ids


def test_operator_reviews_and_decides_by_keyboard(api, ingest, operator, prefix, redis_client, tmp_path):
    from playwright.sync_api import expect, sync_playwright

    ids = _seed(ingest, prefix)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.set_default_timeout(10_000)
            problems: list[str] = []
            page.on("pageerror", lambda error: problems.append(str(error)))
            page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)

            # Signed out: /ui sends us to the login form.
            page.goto(f"{api.url}/ui")
            expect(page).to_have_url(f"{api.url}/ui/login")
            assert page.evaluate(UNLABELLED) == []
            page.get_by_label("Your name").fill("ana")
            page.get_by_label("Operator token").fill(OPERATOR)
            page.get_by_role("button", name="Sign in").click()

            # The red queue opens first: tabs with counts, oldest first, the status strip.
            expect(page).to_have_url(f"{api.url}/ui/queues/red")
            expect(page.locator(".tab-red .count")).to_contain_text("2")
            expect(page.locator(".tab-yellow .count")).to_contain_text("2")
            expect(page.locator(".tab-audit .count")).to_contain_text("1")
            rows = page.locator("#queue-list tbody tr")
            expect(rows).to_have_count(2)
            expect(rows.nth(0)).to_contain_text(ids["refund"])
            expect(rows.nth(1)).to_contain_text(ids["delete"])
            expect(rows.nth(0)).to_contain_text("commitment.refund")
            status = page.locator(".status")
            expect(status).to_contain_text("current")
            expect(status).to_contain_text("20261128T090000Z-3f2a")
            expect(status).to_contain_text("κ 0.82")
            expect(status).to_contain_text("gating")
            expect(status).to_contain_text("1 h 30 min ago")
            expect(page.locator("#shortcuts")).to_contain_text("open the selected ticket")
            assert page.evaluate(UNLABELLED) == []
            _screenshot(page, tmp_path, "console-queue.png", full_page=False)

            # j/k move the selection, Enter opens it.
            page.keyboard.press("j")
            expect(rows.nth(1)).to_have_class("row selected")
            page.keyboard.press("k")
            expect(rows.nth(0)).to_have_class("row selected")
            page.keyboard.press("Enter")
            expect(page).to_have_url(f"{api.url}/ui/tickets/{ids['refund']}?queue=red")

            # Why it is here: fired spans highlighted in the text, rules, the model's bars.
            marks = page.locator("#ticket-text mark")
            expect(marks.first).to_have_text("Refund")
            expect(marks.first).to_have_attribute("data-rules", "commitment.refund")
            assert "charged twice" in marks.all_inner_texts()
            expect(page.locator("table.rules")).to_contain_text("billing.charged_twice")
            risk = page.locator("section.answer", has=page.locator("#answer-risk"))
            expect(risk).to_contain_text("75.0 %")
            expect(risk).to_contain_text("calibrated")
            expect(risk.locator("svg.bar")).to_have_count(3)
            expect(page.get_by_role("checkbox", name="Commitment")).to_be_checked()  # suggested by rule and model
            assert page.evaluate(UNLABELLED) == []
            _screenshot(page, tmp_path, "console-ticket.png")

            # n: note; Esc leaves the field; a: approve. The next ticket opens.
            page.keyboard.press("n")
            expect(page.get_by_role("textbox", name="Note")).to_be_focused()
            page.keyboard.type("refund goes to finance")
            page.keyboard.press("Escape")
            page.keyboard.press("a")
            expect(page).to_have_url(f"{api.url}/ui/tickets/{ids['delete']}?queue=red&decided={ids['refund']}")
            expect(page.locator(".flash")).to_contain_text("approve")

            entries = redis_client.xrange(f"{prefix}:decisions")
            assert len(entries) == 1
            recorded = msgspec.json.decode(entries[0][1][b"data"])
            assert recorded["ticket_id"] == ids["refund"]
            assert (recorded["operator"], recorded["action"], recorded["correct_level"]) == ("ana", "approve", "red")
            assert recorded["given_level"] == "red"
            assert recorded["flags"] == {
                "commitment": True,
                "destructive_or_access": False,
                "third_party_personal_data": False,
            }
            assert recorded["category"] == "billing"
            assert recorded["note"] == "refund goes to finance"
            assert redis_client.zscore(f"{prefix}:queue:red", ids["refund"]) is None

            # d: downgrade the last red ticket; the queue is then empty and says so.
            page.keyboard.press("d")
            expect(page).to_have_url(f"{api.url}/ui/queues/red?decided={ids['delete']}")
            expect(page.locator(".empty")).to_contain_text("Nothing waiting in the red queue")
            expect(page.locator(".tab-red .count")).to_contain_text("0")
            last = msgspec.json.decode(redis_client.xrange(f"{prefix}:decisions")[-1][1][b"data"])
            assert (last["action"], last["correct_level"], last["flags"]["destructive_or_access"]) == (
                "downgrade",
                "yellow",
                False,
            )
            # The API sees the same queues.
            assert operator.get("/v1/queues/red").json()["items"] == []

            # 3: the audit queue; its green ticket can be marked a false green with g.
            page.keyboard.press("3")
            expect(page).to_have_url(f"{api.url}/ui/queues/audit")
            page.keyboard.press("o")
            expect(page).to_have_url(f"{api.url}/ui/tickets/{ids['thanks']}?queue=audit")
            page.keyboard.press("g")
            expect(page).to_have_url(f"{api.url}/ui/queues/audit?decided={ids['thanks']}")
            flagged = msgspec.json.decode(redis_client.xrange(f"{prefix}:decisions")[-1][1][b"data"])
            assert (flagged["false_green"], flagged["correct_level"]) == (True, "yellow")

            # A narrow window: one column, nothing wider than the screen, the form reachable.
            page.set_viewport_size({"width": 400, "height": 860})
            page.goto(f"{api.url}/ui/tickets/{ids['export']}")
            expect(page.get_by_role("button", name="Approve as yellow")).to_be_visible()
            assert not page.evaluate(OVERFLOWS)
            assert page.evaluate(UNLABELLED) == []
            _screenshot(page, tmp_path, "console-narrow.png", full_page=False)
            page.goto(f"{api.url}/ui/queues/yellow")
            assert not page.evaluate(OVERFLOWS)

            # Sign out: back to the login form, and the console is closed again.
            page.get_by_role("button", name="Sign out").click()
            expect(page).to_have_url(f"{api.url}/ui/login")
            page.goto(f"{api.url}/ui/queues/yellow")
            expect(page).to_have_url(f"{api.url}/ui/login?next=/ui/queues/yellow")
            assert problems == []
        finally:
            browser.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_enter_on_a_form_control_never_records_a_decision(api, ingest, prefix, redis_client, javascript):
    """Chromium submits a form when Enter is pressed on a checkbox, clicking the first enabled
    submit button: that must never be Approve, with or without the script."""
    from playwright.sync_api import expect, sync_playwright

    ticket_id = post_ticket(ingest, "Refund", "Please refund my last invoice")
    finish(prefix, ticket_id, "red", red_flags=("commitment",))
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(java_script_enabled=javascript)
            page.set_default_timeout(10_000)
            page.goto(f"{api.url}/ui/login")
            page.get_by_label("Your name").fill("ana")
            page.get_by_label("Operator token").fill(OPERATOR)
            page.get_by_label("Operator token").press("Enter")  # implicit submission signs in
            expect(page).to_have_url(f"{api.url}/ui/queues/red")
            page.goto(f"{api.url}/ui/tickets/{ticket_id}?queue=red")
            flag = page.get_by_role("checkbox", name="Third party personal data")
            flag.check()
            flag.press("Enter")
            page.wait_for_load_state()
            page.wait_for_timeout(300)
            expect(page.get_by_role("checkbox", name="Third party personal data")).to_be_checked()
            assert redis_client.xlen(f"{prefix}:decisions") == 0
            assert redis_client.zscore(f"{prefix}:queue:red", ticket_id) is not None
            # and the buttons still decide without the script
            page.get_by_role("button", name="Approve as red").click()
            expect(page).to_have_url(f"{api.url}/ui/queues/red?decided={ticket_id}")
            assert redis_client.xlen(f"{prefix}:decisions") == 1
        finally:
            browser.close()
