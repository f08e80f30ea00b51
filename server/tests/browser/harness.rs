//! A real browser against a real server: Debian's `chromium`, driven over WebDriver by
//! `chromedriver` (package `chromium-driver`), which each test starts on a port of its own.
//!
//! * chromedriver is started with `--port=0` and tells on stdout which port it took, so there is
//!   no port race and no waiting for it to come up: the test reads that line.
//! * Each browser gets a fresh profile directory and, as root in CI, `--no-sandbox`.
//! * Waiting is event-driven: [`Ui::wait_text`] runs a script in the page that resolves from a
//!   `MutationObserver` when the text appears; the WebDriver script timeout is only the deadline
//!   for a test that has already failed.
//! * [`run`] always saves a screenshot to `<target>/screenshots/<test>.png` (on failure too),
//!   then fails the test on any console error, CSP violation or uncaught exception the browser
//!   logged, and closes the browser before the verdict so that nothing is left running.
//! * Without chromium or chromedriver the tests fail, saying what to install.
use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use fantoccini::actions::{InputSource, KeyAction, KeyActions};
use fantoccini::key::Key;
use fantoccini::wd::{TimeoutConfiguration, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::Semaphore;

/// One browser at a time: the machine (and CI) has two cores, and a test's waits should measure
/// the UI, not contention between browsers.
static ONE_BROWSER: Semaphore = Semaphore::const_new(1);

/// Deadline for one wait in the page or one page load. A deadline for a test that has failed
/// already, not a performance bound: the wait returns as soon as the page is ready.
const DEADLINE: Duration = Duration::from_secs(30);

/// Desktop window.
const DESKTOP: (u32, u32) = (1280, 1000);
/// A small phone, as the issue asks: 360 CSS pixels wide.
pub const PHONE_WIDTH: u32 = 360;

const INSTALL_HINT: &str = "the browser tests need Debian's chromium and chromedriver: \
     `apt-get update && apt-get install -y chromium chromium-driver` (CI's .ci/run installs them); \
     NPUB_CHROMIUM / NPUB_CHROMEDRIVER name other binaries";

/// The first of `names` found on `PATH` (or `var` if set).
fn find_binary(var: &str, names: &[&str]) -> PathBuf {
    if let Some(p) = std::env::var_os(var) {
        return PathBuf::from(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for name in names {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return candidate;
            }
        }
    }
    panic!("{} not found: {INSTALL_HINT}", names[0]);
}

/// Where screenshots go: `<target>/screenshots/`.
pub fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is <target>/tmp")
        .join("screenshots")
}

/// `POST /session/{id}/se/log {"type": "browser"}`: chromedriver's console log (and clears it).
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!("session/{}/se/log", session.unwrap_or_default()))
    }

    fn method_and_body(&self, _url: &url::Url) -> (axum::http::Method, Option<String>) {
        (
            axum::http::Method::POST,
            Some(r#"{"type":"browser"}"#.into()),
        )
    }
}

/// `POST /session/{id}/permissions`: WebDriver's "Set Permission" (e.g. `clipboard-read`).
#[derive(Debug)]
struct SetPermission(&'static str);

impl WebDriverCompatibleCommand for SetPermission {
    fn endpoint(
        &self,
        base: &url::Url,
        session: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base.join(&format!(
            "session/{}/permissions",
            session.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _url: &url::Url) -> (axum::http::Method, Option<String>) {
        let body = json!({"descriptor": {"name": self.0}, "state": "granted"});
        (axum::http::Method::POST, Some(body.to_string()))
    }
}

/// Which window the browser gets.
#[derive(Clone, Copy, Debug)]
pub enum Screen {
    /// 1280 × 1000.
    Desktop,
    /// Chrome's device emulation at [`PHONE_WIDTH`] CSS pixels (the window itself cannot be made
    /// that narrow on every platform).
    Phone,
}

struct Driver {
    process: Child,
    url: String,
}

async fn start_driver() -> Driver {
    let binary = find_binary("NPUB_CHROMEDRIVER", &["chromedriver"]);
    let mut process = Command::new(&binary)
        .arg("--port=0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("starting {}: {e}; {INSTALL_HINT}", binary.display()));
    let mut lines = BufReader::new(process.stdout.take().unwrap()).lines();
    let port = tokio::time::timeout(DEADLINE, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            // "ChromeDriver was started successfully on port 36831."
            if let Some(rest) = line.split("started successfully on port ").nth(1) {
                return rest.trim_end_matches('.').parse::<u16>().ok();
            }
        }
        None
    })
    .await
    .ok()
    .flatten()
    .unwrap_or_else(|| panic!("{} did not report its port", binary.display()));
    // Keep draining its stdout so that it can never block on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    Driver {
        process,
        url: format!("http://127.0.0.1:{port}"),
    }
}

fn capabilities(profile: &Path, screen: Screen) -> serde_json::Map<String, Value> {
    let chromium = find_binary(
        "NPUB_CHROMIUM",
        &["chromium", "chromium-browser", "google-chrome"],
    );
    let (w, h) = DESKTOP;
    let mut options = json!({
        "binary": chromium,
        "args": [
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--lang=en-GB",
            format!("--window-size={w},{h}"),
            format!("--user-data-dir={}", profile.display()),
        ],
    });
    if let Screen::Phone = screen {
        options["mobileEmulation"] = json!({
            "deviceMetrics": {"width": PHONE_WIDTH, "height": 780, "pixelRatio": 2.0, "touch": true},
        });
    }
    let caps = json!({
        "browserName": "chrome",
        "goog:chromeOptions": options,
        "goog:loggingPrefs": {"browser": "ALL"},
    });
    caps.as_object().unwrap().clone()
}

/// The page under test, with the server's address and the admin token.
#[derive(Clone)]
pub struct Ui {
    /// The WebDriver session.
    pub client: Client,
    /// `http://127.0.0.1:PORT` of the npub-server.
    pub base: String,
    /// A token that signs in.
    pub token: String,
}

/// Starts a browser, runs `body` against the server at `base`, saves `<name>.png`, checks the
/// console, closes the browser, then passes `body`'s panic on (if any).
pub async fn run<F, Fut>(name: &str, base: &str, token: &str, screen: Screen, body: F)
where
    F: FnOnce(Ui) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let _one = ONE_BROWSER.acquire().await.unwrap();
    let mut driver = start_driver().await;
    let profile = tempfile::tempdir().unwrap();
    let client = ClientBuilder::new(HttpConnector::new())
        .capabilities(capabilities(profile.path(), screen))
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| panic!("chromedriver could not start chromium: {e}; {INSTALL_HINT}"));
    client
        .update_timeouts(TimeoutConfiguration::new(
            Some(DEADLINE),
            Some(DEADLINE),
            Some(Duration::ZERO),
        ))
        .await
        .unwrap();
    let ui = Ui {
        client: client.clone(),
        base: base.to_owned(),
        token: token.to_owned(),
    };
    // The body runs as its own task so that a failed assertion still reaches the clean-up below.
    let outcome = tokio::spawn(body(ui)).await;
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let shot = dir.join(format!("{name}.png"));
    if let Ok(png) = client.screenshot().await {
        std::fs::write(&shot, png).unwrap();
    }
    // Everything the page loaded came from the server (CSP enforces it; this proves it).
    let foreign = client
        .execute(
            "return performance.getEntriesByType('resource').map((e) => e.name)\
             .filter((n) => !n.startsWith(location.origin + '/'))",
            vec![],
        )
        .await;
    let log = client.issue_cmd(BrowserLog).await;
    let _ = client.close().await;
    let _ = driver.process.kill().await;
    if let Err(panic) = outcome {
        eprintln!("screenshot of the failure: {}", shot.display());
        std::panic::resume_unwind(panic.into_panic());
    }
    assert_eq!(
        foreign.expect("the page answers scripts"),
        json!([]),
        "loaded from elsewhere than the server"
    );
    let errors = console_errors(&log.expect("chromedriver's browser log"));
    assert!(
        errors.is_empty(),
        "the browser logged errors (screenshot {}):\n{}",
        shot.display(),
        errors.join("\n")
    );
}

/// Severe console entries, less the API's own error answers: a refused upload or a bad token is
/// answered 4xx on purpose, and Chromium logs every non-2xx fetch as "Failed to load resource".
/// Anything else — a script error, a CSP violation, a missing asset — is a failure.
fn console_errors(log: &Value) -> Vec<String> {
    let Some(entries) = log.as_array() else {
        return vec![format!("unexpected log answer: {log}")];
    };
    entries
        .iter()
        .filter(|e| e["level"] == "SEVERE")
        .map(|e| e["message"].as_str().unwrap_or_default().to_owned())
        .filter(|m| !(m.contains("/api/v1/") && m.contains("Failed to load resource")))
        .collect()
}

impl Ui {
    /// Opens `#/<route>` (or the sign-in page for `""`).
    pub async fn open(&self, route: &str) {
        let url = if route.is_empty() {
            format!("{}/", self.base)
        } else {
            format!("{}/#/{route}", self.base)
        };
        self.client.goto(&url).await.unwrap();
    }

    /// Saves the viewport as `<target>/screenshots/<name>.png` (an extra artefact; [`run`] saves
    /// the final state of every test on its own).
    pub async fn screenshot(&self, name: &str) {
        let png = self.client.screenshot().await.unwrap();
        let dir = screenshot_dir();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
    }

    /// Lets the page use the clipboard both ways, so that a test can read what Copy put there.
    pub async fn grant_clipboard(&self) {
        for name in ["clipboard-read", "clipboard-write"] {
            self.client
                .issue_cmd(SetPermission(name))
                .await
                .unwrap_or_else(|e| panic!("granting {name}: {e}"));
        }
    }

    /// What the clipboard holds (after [`Ui::grant_clipboard`]).
    pub async fn clipboard(&self) -> String {
        // Chromium lets a page read the clipboard only while its document has the focus, which
        // headless Chromium on a loaded machine can lose for a moment: a read refused for that is
        // asked again, after focusing the window, a few times.
        let mut got = String::new();
        for _ in 0..5 {
            got = self
                .client
                .execute_async(
                    "const done = arguments[0]; window.focus(); \
                     navigator.clipboard.readText().then(done, (e) => done(`error: ${e}`));",
                    vec![],
                )
                .await
                .unwrap()
                .as_str()
                .unwrap_or_default()
                .to_owned();
            if !(got.starts_with("error:") && got.contains("focus")) {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        got
    }

    /// Records what the page saves instead of letting the browser download it: the page's CSP
    /// forbids fetching blob: URLs, so the blob is read where it is made, and the anchor's click
    /// (the browser's save) only notes the file name. Read it back with [`Ui::saved`].
    pub async fn capture_downloads(&self) {
        self.js(
            r#"const make = URL.createObjectURL.bind(URL);
               URL.createObjectURL = (blob) => {
                 blob.text().then((text) => { document.body.dataset.savedText = text; });
                 return make(blob);
               };
               HTMLAnchorElement.prototype.click = function () {
                 document.body.dataset.savedName = this.download;
               };"#,
            vec![],
        )
        .await;
    }

    /// `(file name, text)` of the last save recorded by [`Ui::capture_downloads`], once there is one.
    pub async fn saved(&self) -> (String, String) {
        self.wait_until("document.body.dataset.savedText !== undefined")
            .await;
        let v = self
            .js(
                "const s = [document.body.dataset.savedName, document.body.dataset.savedText]; \
                 delete document.body.dataset.savedText; return s;",
                vec![],
            )
            .await;
        (
            v[0].as_str().unwrap_or_default().to_owned(),
            v[1].as_str().unwrap_or_default().to_owned(),
        )
    }

    /// Signs in with the token through the form and waits for the models page.
    pub async fn sign_in(&self) {
        self.open("").await;
        self.fill("input[name=token]", &self.token).await;
        self.click("form.signin button[type=submit]").await;
        self.wait_text("h1", "Models").await;
    }

    /// The element matching `css`; panics with the page's text when there is none.
    pub async fn find(&self, css: &str) -> fantoccini::elements::Element {
        match self.client.find(Locator::Css(css)).await {
            Ok(e) => e,
            Err(e) => panic!(
                "no element {css:?} ({e}); the page says:\n{}",
                self.page_text().await
            ),
        }
    }

    /// Clicks `css`.
    pub async fn click(&self, css: &str) {
        self.find(css).await.click().await.unwrap();
    }

    /// Replaces the value of the input `css` with `text`.
    pub async fn fill(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        e.clear().await.unwrap();
        e.send_keys(text).await.unwrap();
    }

    /// Picks the option with `value` in the select `css` (and fires `change`).
    pub async fn select(&self, css: &str, value: &str) {
        self.find(css).await.select_by_value(value).await.unwrap();
    }

    /// Types `keys` as a person would: each key down and up, to whatever has focus (use
    /// `fantoccini::key::Key` for Tab, Enter, Escape…).
    pub async fn press(&self, keys: &str) {
        let mut actions = KeyActions::new("keyboard".into());
        for value in keys.chars() {
            actions = actions
                .then(KeyAction::Down { value })
                .then(KeyAction::Up { value });
        }
        self.client.perform_actions(actions).await.unwrap();
    }

    /// `modifier` held while `key` is pressed (Shift+Tab).
    pub async fn chord(&self, modifier: Key, key: Key) {
        let (m, k) = (
            modifier.chars().next().unwrap(),
            key.chars().next().unwrap(),
        );
        let actions = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: m })
            .then(KeyAction::Down { value: k })
            .then(KeyAction::Up { value: k })
            .then(KeyAction::Up { value: m });
        self.client.perform_actions(actions).await.unwrap();
    }

    /// The visible text of the page.
    pub async fn page_text(&self) -> String {
        self.client
            .execute("return document.body.innerText", vec![])
            .await
            .map(|v| v.as_str().unwrap_or_default().to_owned())
            .unwrap_or_default()
    }

    /// Runs `script` (a function body) and returns its value.
    pub async fn js(&self, script: &str, args: Vec<Value>) -> Value {
        self.client.execute(script, args).await.unwrap()
    }

    /// Waits until an element matching `css` contains `text`; returns that element's text.
    pub async fn wait_text(&self, css: &str, text: &str) -> String {
        self.wait_for(css, text, false).await
    }

    /// Waits until no element matching `css` contains `text` (or none matches).
    pub async fn wait_gone(&self, css: &str, text: &str) {
        self.wait_for(css, text, true).await;
    }

    async fn wait_for(&self, css: &str, text: &str, gone: bool) -> String {
        const SCRIPT: &str = r#"
            const [css, text, gone, done] = arguments;
            const probe = () => {
              const hit = [...document.querySelectorAll(css)].find((e) => e.textContent.includes(text));
              if (gone) return hit ? null : '';
              return hit ? hit.textContent : null;
            };
            const first = probe();
            if (first !== null) { done(first); return; }
            const observer = new MutationObserver(() => {
              const now = probe();
              if (now !== null) { observer.disconnect(); done(now); }
            });
            observer.observe(document, { subtree: true, childList: true, characterData: true, attributes: true });
        "#;
        match self
            .client
            .execute_async(SCRIPT, vec![json!(css), json!(text), json!(gone)])
            .await
        {
            Ok(v) => v.as_str().unwrap_or_default().to_owned(),
            Err(e) => panic!(
                "waited for {css:?} {} {text:?}: {e}; the page says:\n{}",
                if gone { "to lose" } else { "to contain" },
                self.page_text().await
            ),
        }
    }

    /// Waits until `predicate` (a JS expression) is true; the page re-checks it on every DOM change.
    pub async fn wait_until(&self, predicate: &str) {
        let script = format!(
            r#"
            const done = arguments[0];
            const ok = () => {{ try {{ return Boolean({predicate}); }} catch (e) {{ return false; }} }};
            if (ok()) {{ done(true); return; }}
            const observer = new MutationObserver(() => {{ if (ok()) {{ observer.disconnect(); done(true); }} }});
            observer.observe(document, {{ subtree: true, childList: true, characterData: true, attributes: true }});
            "#
        );
        if let Err(e) = self.client.execute_async(&script, vec![]).await {
            panic!(
                "waited for `{predicate}`: {e}; the page says:\n{}",
                self.page_text().await
            );
        }
    }

    /// Document width beyond the viewport, in CSS pixels (0 when nothing overflows sideways).
    pub async fn horizontal_overflow(&self) -> i64 {
        self.js(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth",
            vec![],
        )
        .await
        .as_i64()
        .unwrap()
    }

    /// Elements wider than the viewport (for the message when the layout overflows).
    pub async fn overflowing_elements(&self) -> String {
        self.js(
            r#"const w = document.documentElement.clientWidth;
               return [...document.querySelectorAll('body *')]
                 .filter((e) => e.getBoundingClientRect().right > w + 0.5)
                 .slice(0, 10)
                 .map((e) => `${e.tagName.toLowerCase()}.${e.className} right=${e.getBoundingClientRect().right}`)
                 .join('\n')"#,
            vec![],
        )
        .await
        .as_str()
        .unwrap_or_default()
        .to_owned()
    }
}
