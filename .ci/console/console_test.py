"""The web console in a real browser, against a running `harness serve` on the demo model.

Usage: HARNESS_TOKEN=<token> console_test.py http://127.0.0.1:PORT
(.ci/console-check starts the server and runs this.) Optional: CHROMIUM (the browser binary,
default: `chromium` on PATH, else /usr/bin/chromium), CONSOLE_CHECK_ARTIFACTS (a folder for a
screenshot and the page's HTML when a step fails).

It drives the demo's support run: a question (answered "Store credit"), an approval (reloaded
while it waits, to check the page rebuilds the same view from the stream, then approved), and
the end (the refund done, the tasks completed, usage and status shown). Any console error,
uncaught exception, CSP violation or failed HTTP response fails it. Waits are Playwright's
auto-waiting assertions: no fixed sleeps.
"""

import os
import re
import shutil
import sys
import traceback

from playwright.sync_api import expect, sync_playwright

TIMEOUT_MS = 30_000
MESSAGE = "Order 1042 was charged twice; sort it out"

# Records every CSP violation in the page (installed before any page script runs; init scripts
# are injected by the browser, so the page's own CSP does not stop them).
CSP_WATCH = """
window.__cspViolations = [];
document.addEventListener("securitypolicyviolation", (e) => {
  window.__cspViolations.push(`${e.violatedDirective} blocked ${e.blockedURI || "inline"}`
    + ` at ${e.sourceFile}:${e.lineNumber}`);
});
"""


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    base = sys.argv[1].rstrip("/")
    token = os.environ["HARNESS_TOKEN"]
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    artifacts = os.environ.get("CONSOLE_CHECK_ARTIFACTS")

    problems: list[str] = []  # console errors, page errors, CSP violations, HTTP errors
    expect.set_options(timeout=TIMEOUT_MS)

    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
        browser = playwright.chromium.launch(
            executable_path=chromium, headless=True, args=["--no-sandbox"]
        )
        page = browser.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.add_init_script(CSP_WATCH)
        page.on(
            "console",
            lambda m: problems.append(f"console.{m.type}: {m.text} ({m.location})")
            if m.type == "error"
            else None,
        )
        page.on("pageerror", lambda e: problems.append(f"uncaught: {e}"))
        page.on(
            "response",
            lambda r: problems.append(f"HTTP {r.status} {r.request.method} {r.url}")
            if r.status >= 400
            else None,
        )

        step_name = "start"

        def step(name: str) -> None:
            nonlocal step_name
            step_name = name
            print(f"console-check: {name}", flush=True)

        def check_clean() -> None:
            violations = page.evaluate("window.__cspViolations || []")
            found = problems + [f"CSP violation: {v}" for v in violations]
            if found:
                raise AssertionError("the page reported problems:\n  " + "\n  ".join(found))

        try:
            step("open /console/ and connect with the token")
            response = page.goto(f"{base}/console/")
            assert response is not None and response.ok, f"GET /console/ answered {response}"
            csp = response.headers.get("content-security-policy", "")
            assert "script-src 'self'" in csp, f"the console is served without its CSP: {csp!r}"
            page.get_by_test_id("token").fill(token)
            page.get_by_test_id("connect").click()
            expect(page.locator("body")).to_have_attribute("data-connected", "true")
            expect(page.get_by_test_id("send")).to_be_enabled()

            step("create a session")
            page.get_by_test_id("new-session-name").fill("console check")
            page.get_by_test_id("new-session").click()
            current = page.locator('[data-testid="session"][aria-current="true"]')
            expect(current).to_contain_text("console check")
            expect(page).to_have_url(re.compile(r"#session=[^&]+$"))

            step("send the message")
            page.get_by_test_id("message").fill(MESSAGE)
            page.get_by_test_id("send").click()
            run = page.get_by_test_id("run")
            expect(page).to_have_url(re.compile(r"#session=[^&]+&execution=[^&]+$"))
            expect(run.get_by_test_id("user-message")).to_have_text(MESSAGE)

            step("answer the question with 'Store credit'")
            store_credit = page.locator('[data-testid="option"][data-label="Store credit"]')
            expect(store_credit).to_be_visible()
            expect(page.locator('[data-testid="option"][data-label="Original card"]')).to_be_visible()
            expect(run.get_by_test_id("status")).to_have_attribute("data-status", "awaiting-answer")
            expect(page.get_by_test_id("answer-text")).to_be_visible()
            expect(tool(page, "lookup_order")).to_have_attribute("data-state", "succeeded")
            expect(tool(page, "ask_user")).to_have_attribute("data-state", "awaiting-answer")
            store_credit.click()

            step("wait for the approval of issue_refund")
            expect(page.get_by_test_id("approve")).to_be_visible()
            expect(page.get_by_test_id("decline")).to_be_visible()
            expect(page.get_by_test_id("option")).to_have_count(0)
            expect(run.get_by_test_id("status")).to_have_attribute("data-status", "awaiting-approval")
            expect(run.get_by_test_id("status")).to_have_text("awaiting approval")
            expect(tool(page, "ask_user")).to_have_attribute("data-state", "succeeded")
            expect(tool(page, "ask_user").get_by_test_id("tool-output")).to_contain_text("Store credit")
            refund = tool(page, "issue_refund")
            expect(refund).to_have_attribute("data-state", "awaiting-approval")
            expect(refund.get_by_test_id("tool-input")).to_contain_text("store_credit")
            tasks = page.get_by_test_id("task")
            expect(tasks).to_have_count(2)
            expect(tasks.first).to_contain_text("Look up order #1042")
            expect(page.get_by_test_id("usage")).to_be_hidden()
            before = snapshot(page)
            url_before = page.url

            step("reload while the approval waits: the same view comes back")
            page.reload()
            expect(page.get_by_test_id("approve")).to_be_visible()
            assert page.url == url_before, f"the reload moved to {page.url}, not {url_before}"
            # The whole view of the run, as a reader sees it, is the same as before the reload.
            expect(page.get_by_test_id("run")).to_have_text(before["text"], use_inner_text=True)
            after = snapshot(page)
            for key in ("tools", "tasks", "text"):
                assert after[key] == before[key], (
                    f"the reload changed the {key}:\nbefore: {before[key]!r}\nafter:  {after[key]!r}"
                )
            expect(page.get_by_test_id("option")).to_have_count(0)
            expect(page.locator('[data-testid="session"][aria-current="true"]')).to_contain_text(
                "console check"
            )

            step("approve, and wait for the run to finish")
            page.get_by_test_id("approve").click()
            refund = tool(page, "issue_refund")
            expect(refund).to_have_attribute("data-state", "succeeded")
            expect(refund).to_have_attribute("data-ended", "true")
            expect(refund.get_by_test_id("tool-output")).to_contain_text("Refunded $49.00")
            expect(page.get_by_test_id("approve")).to_have_count(0)
            tasks = page.get_by_test_id("task")
            expect(tasks).to_have_count(2)
            for i in range(2):
                expect(tasks.nth(i)).to_have_attribute("data-status", "completed")
            expect(page.get_by_test_id("progress-label")).to_contain_text("100%")
            expect(page.get_by_test_id("usage")).to_have_text(
                re.compile(r"^Usage: [\d,]+ input \+ [\d,]+ output = [\d,]+ tokens$")
            )
            status = page.get_by_test_id("run").get_by_test_id("status")
            expect(status).to_have_attribute("data-status", "completed")
            expect(status).to_have_text("completed")
            expect(page.get_by_test_id("cancel")).to_be_hidden()
            expect(page.get_by_test_id("text").last).to_contain_text("Done: Refunded $49.00")
            expect(page.get_by_test_id("send")).to_be_enabled()
            execution_id = page.get_by_test_id("run").get_attribute("data-execution-id")
            link = page.locator(f'[data-testid="execution-link"][data-execution-id="{execution_id}"]')
            expect(link).to_contain_text("completed")

            step("reload the finished run: the same view comes back")
            finished = snapshot(page)
            page.reload()
            expect(page.get_by_test_id("run").get_by_test_id("status")).to_have_text("completed")
            expect(page.get_by_test_id("run")).to_have_text(finished["text"], use_inner_text=True)
            assert snapshot(page) == finished, "the finished run looks different after a reload"

            step("a second message: the first run's messages move to the session's history")
            page.get_by_test_id("message").fill("Thanks!")
            page.get_by_test_id("send").click()
            run = page.get_by_test_id("run")
            expect(run).not_to_have_attribute("data-execution-id", execution_id)
            expect(run.get_by_test_id("user-message")).to_have_text("Thanks!")
            expect(run.get_by_test_id("status")).to_have_text("completed")
            expect(run.get_by_test_id("text")).to_have_count(1)
            expect(run.get_by_test_id("usage")).to_be_visible()
            history = page.get_by_test_id("history-message")
            expect(history.first).to_have_attribute("data-role", "user")
            expect(history.first).to_contain_text(MESSAGE)
            expect(page.locator('[data-testid="history-tool"][data-tool-name="issue_refund"]')).to_have_count(1)
            expect(page.locator('[data-testid="history-message"][data-role="user"]')).to_have_count(1)
            expect(page.locator('[data-testid="execution-link"]')).to_have_count(2)

            step("no console errors, page errors, CSP violations or failed requests")
            check_clean()
        except Exception:
            print(f"console-check: FAILED at step: {step_name}", file=sys.stderr)
            traceback.print_exc()
            if problems:
                print("console-check: the page also reported:\n  " + "\n  ".join(problems), file=sys.stderr)
            if artifacts:
                os.makedirs(artifacts, exist_ok=True)
                try:
                    page.screenshot(path=os.path.join(artifacts, "failure.png"), full_page=True)
                    with open(os.path.join(artifacts, "failure.html"), "w") as f:
                        f.write(page.content())
                    print(f"console-check: screenshot and HTML in {artifacts}", file=sys.stderr)
                except Exception as e:  # the page may be gone
                    print(f"console-check: no screenshot: {e}", file=sys.stderr)
            browser.close()
            print("console-check: 0 passed, 1 failed")
            return 1
        browser.close()
    print("console-check: 1 passed, 0 failed")
    return 0


def tool(page, name: str):
    """The card of the (only) call of tool `name` in the run's transcript."""
    return page.get_by_test_id("run").locator(f'[data-testid="tool"][data-tool-name="{name}"]')


def snapshot(page) -> dict:
    """What the run shows: its visible text, each tool's name and state, each task."""
    return page.evaluate(
        """() => {
          const run = document.querySelector('[data-testid="run"]');
          return {
            text: run.innerText,
            tools: [...run.querySelectorAll('[data-testid="tool"]')].map(
              (t) => [t.dataset.toolName, t.dataset.state, t.dataset.ended || ""]),
            tasks: [...run.querySelectorAll('[data-testid="task"]')].map(
              (t) => [t.innerText, t.dataset.status]),
          };
        }"""
    )


if __name__ == "__main__":
    sys.exit(main())
