//! A broken connection is not a failed attempt (issue 35): the download stays journalled
//! *receiving* and resumes at the next poll from its durable offset, however often the link
//! breaks; only a pack that does not read back as signed consumes one of the
//! `MAX_LOCAL_RETRIES` fresh downloads. Checked against the agent's own state and the reports
//! the server gets (a broken connection is `downloading` without `attempts`; nothing `failed`).
mod common;

use common::*;
use device_agent::{Error, MAX_LOCAL_RETRIES, Poll, RecordingNpu, ReportState, TransportError};

/// Breaks the connection `breaks` times, each after `step` more bytes, then lets the download
/// finish; asserts after each break that the attempt and the retries left are unchanged.
fn break_then_finish(
    agent: &mut device_agent::Agent<Flash>,
    server: &mut Server,
    breaks: usize,
    step: usize,
    attempt: u8,
) -> Poll {
    let mut npu = RecordingNpu::default();
    let mut durable = 0;
    for n in 0..breaks {
        server.drop_after = Some(step);
        assert_eq!(
            poll(agent, server, &mut npu),
            Err(Error::Transport(TransportError::Unreachable)),
            "break {n}"
        );
        let (_, _, written) = agent.state().receiving().expect("kept for its resume");
        assert!(written >= durable, "break {n}: {written} < {durable}");
        durable = written;
        assert_eq!(agent.state().attempt(), attempt, "break {n}");
        assert_eq!(
            agent.state().retries(),
            MAX_LOCAL_RETRIES + 1 - attempt,
            "break {n}: a broken connection used up an attempt"
        );
        let last = server.reports.last().unwrap();
        assert_eq!(
            (last.state, last.attempts),
            (ReportState::Downloading, None),
            "break {n}"
        );
        // The power fails as well, now and then: the journal carries the attempt across it.
        if n % 2 == 1 {
            let layout = *agent.layout();
            let flash = std::mem::replace(agent, power_on(blank_flash(&layout), layout));
            *agent = power_on(flash.into_flash(), layout);
        }
    }
    server.drop_after = None;
    poll(agent, server, &mut npu).unwrap()
}

#[test]
fn broken_connections_resume_without_counting_as_attempts() {
    let c = case("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    // More breaks than there are attempts: were each one an attempt, the install would fail.
    let breaks = usize::from(MAX_LOCAL_RETRIES) + 3;
    let step = c.pack.len() / (breaks + 2);
    let done = break_then_finish(&mut agent, &mut server, breaks, step, 1);
    assert!(matches!(done, Poll::Installed(_)), "{done:?}");
    assert!(
        server
            .reports
            .iter()
            .all(|r| r.state != ReportState::Failed && r.attempts.is_none()),
        "{:?}",
        server.reports
    );
}

#[test]
fn a_broken_connection_in_a_retry_keeps_that_retrys_attempt_number() {
    let c = case("small_net_u55_256");
    let layout = layout(256 * 1024);
    let mut agent = power_on(blank_flash(&layout), layout);
    let mut server = Server::default();
    server.offer(&c.pack, 1);
    // Attempt 1 comes corrupted (its last byte, in the weights): it fails to read back as
    // signed and the next poll starts attempt 2.
    let sha = sha256(&c.pack);
    let mut bad = c.pack.clone();
    *bad.last_mut().unwrap() ^= 0x40;
    server.packs.insert(sha, bad);
    let mut npu = RecordingNpu::default();
    let first = poll(&mut agent, &mut server, &mut npu);
    assert!(
        matches!(
            first,
            Err(Error::Rejected(npub_core::Error::Manifest(
                npub_core::ManifestError::PackHashMismatch { .. }
            )))
        ),
        "{first:?}"
    );
    assert!(agent.state().retryable().is_some());
    server.packs.insert(sha, c.pack.clone());
    let done = break_then_finish(&mut agent, &mut server, 3, c.pack.len() / 5, 2);
    assert!(matches!(done, Poll::Installed(_)), "{done:?}");
    let attempts: Vec<_> = server.reports.iter().filter_map(|r| r.attempts).collect();
    assert_eq!(
        attempts,
        [1],
        "only the corrupted download ended an attempt"
    );
    assert!(
        server
            .reports
            .iter()
            .all(|r| r.state != ReportState::Failed)
    );
}
