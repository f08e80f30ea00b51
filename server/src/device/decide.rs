//! The device API's rules, written once: request facts and the poll snapshot in, an answer out.
//! Two front ends render the answers: the accept loop's lane (`lane.rs`: its own HTTP/1.1, a
//! head written into a per-connection buffer, bodies by `sendfile`) and the router (`routes.rs`:
//! axum responses). Neither decides anything itself.
//!
//! | Request                               | Facts                                              | Answer |
//! |---------------------------------------|----------------------------------------------------|--------|
//! | `GET /api/v1/device/manifest?seq=N`   | the device's assignment in the snapshot, `If-None-Match` | [`Poll::Nothing`] (204: nothing newer than N), [`Poll::NotModified`] (304: the `ETag` it names), [`Poll::Offer`] (200: the signed manifest) |
//! | `GET /api/v1/device/packs/{sha256}`   | the assignment, `If-None-Match`, `If-Range`, `Range` | [`Pack::NotAssigned`] (404), or [`Pack::Send`] with the pack and what of it: 200, 206, 304 or 416 ([`ranges::Answer`], RFC 9110) |
//! | `GET /api/v1/device/packs/{sha256}/release` | the assignment (the same rule as the pack's), `If-None-Match` | [`Release::NotAssigned`] (404), [`Release::None`] (404: nobody released the deployed version), [`Release::NotModified`] (304), [`Release::Send`] (200: the stored bundle) |
//!
//! Who the device is (its token, looked up in the same snapshot) is each front end's: the router's
//! extractor counts and throttles a failure, and the lane hands such a request to the router.
//! Where the body comes from ([`Source`]) is the pack's: the snapshot's memory, a local file, or
//! the store.
use std::sync::Arc;

use axum::http::HeaderValue;

use crate::device::last_seen::LastSeen;
use crate::device::snapshot::{Assignment, DeviceEntry, PackEntry, ReleaseEntry, Snapshot};
use crate::fleet::window::Window;
use crate::http::ranges;

/// What a manifest poll is answered, besides the headers every manifest answer carries
/// (`Npub-Poll-Interval`, `Npub-Keyring-Sequence`).
#[derive(Debug, Clone, Copy)]
pub enum Poll<'s> {
    /// 204: nothing newer than the device's `seq`.
    Nothing,
    /// 304: the manifest the device's `If-None-Match` names.
    NotModified(&'s Arc<Assignment>),
    /// 200: this manifest.
    Offer(&'s Arc<Assignment>),
}

/// The decision of a manifest poll with `seq` (at most `i64::MAX`) from `device`, whose
/// snapshot assigns it `assignment`, at `now_ms`, and its bookkeeping in `seen`: the device is
/// seen, and noted as offered on a 200. `none_match` says whether the request's `If-None-Match` names an
/// `ETag`. `window`: its group's maintenance window, outside which nothing new is offered (a
/// device that already holds the manifest still gets 304). Allocates nothing once the device's
/// last-seen entry exists.
pub fn poll<'s>(
    seen: &LastSeen,
    device: &DeviceEntry,
    assignment: Option<&'s Arc<Assignment>>,
    window: Option<&Window>,
    seq: u64,
    now_ms: i64,
    none_match: impl FnOnce(&HeaderValue) -> bool,
) -> Poll<'s> {
    seen.seen(device, now_ms);
    let Some(a) = assignment.filter(|a| a.sequence > seq) else {
        return Poll::Nothing;
    };
    if none_match(&a.etag) {
        return Poll::NotModified(a);
    }
    if window.is_some_and(|w| !w.open_at(now_ms)) {
        return Poll::Nothing;
    }
    seen.offered(&device.id, a.deployment_id, now_ms);
    Poll::Offer(a)
}

/// What a pack download is answered.
#[derive(Debug, Clone, Copy)]
pub enum Pack<'s> {
    /// 404: not the pack this device is assigned.
    NotAssigned,
    /// The assigned pack, and what of it to send.
    Send {
        /// The pack as the snapshot holds it.
        entry: &'s PackEntry,
        /// 200, 206, 304 or 416.
        range: ranges::Answer,
    },
}

/// The conditional and range headers of a download, as both front ends read them.
#[derive(Debug, Clone, Copy, Default)]
pub struct Conditions<'h> {
    /// `If-None-Match`'s values, each possibly a list.
    pub if_none_match: &'h [&'h [u8]],
    /// `If-Range`, if sent.
    pub if_range: Option<&'h [u8]>,
    /// `Range`, if sent once (a request with two is answered whole: the front end passes `None`).
    pub range: Option<&'h str>,
}

/// The decision of a download of `sha256` by `device` in `snapshot` under `conditions`.
pub fn pack<'s>(
    snapshot: &'s Snapshot,
    device: &DeviceEntry,
    sha256: &str,
    conditions: &Conditions<'_>,
) -> Pack<'s> {
    let Some(entry) = assigned_pack(snapshot, device, sha256) else {
        return Pack::NotAssigned;
    };
    let range = ranges::answer_of(
        conditions.if_none_match.iter().copied(),
        conditions.if_range,
        conditions.range,
        &entry.etag,
        entry.len,
    );
    Pack::Send { entry, range }
}

/// The pack `sha256` names if it is the one `device` is assigned in `snapshot`.
pub fn assigned_pack<'s>(
    snapshot: &'s Snapshot,
    device: &DeviceEntry,
    sha256: &str,
) -> Option<&'s PackEntry> {
    let a = snapshot.assignment(&device.id)?;
    (a.sha256 == sha256)
        .then(|| snapshot.pack(sha256))
        .flatten()
}

/// What a request for the release signatures of a pack is answered.
#[derive(Debug, Clone, Copy)]
pub enum Release<'s> {
    /// 404: not the pack this device is assigned.
    NotAssigned,
    /// 404: the deployed version has no release signatures.
    None,
    /// 304: the `If-None-Match` names the bundle's `ETag`.
    NotModified(&'s ReleaseEntry),
    /// 200: the bundle.
    Send(&'s ReleaseEntry),
}

/// The decision of a request for the release signatures of `sha256` by `device` in `snapshot`:
/// the same assignment rule as a download ([`assigned_pack`]), and the bundle of the version the
/// device's assignment deploys (several versions may share a pack; each has its own release).
/// `none_match` says whether the request's `If-None-Match` names an `ETag`.
pub fn release<'s>(
    snapshot: &'s Snapshot,
    device: &DeviceEntry,
    sha256: &str,
    none_match: impl FnOnce(&HeaderValue) -> bool,
) -> Release<'s> {
    if assigned_pack(snapshot, device, sha256).is_none() {
        return Release::NotAssigned;
    }
    let Some(entry) = snapshot
        .assignment(&device.id)
        .and_then(|a| a.release.as_ref())
    else {
        return Release::None;
    };
    if none_match(&entry.etag) {
        return Release::NotModified(entry);
    }
    Release::Send(entry)
}

/// Where a pack's bytes come from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'s> {
    /// A file on this machine (the local store): the lane sends it with `sendfile`, the router
    /// from the in-memory copy beside it.
    File(&'s Arc<std::fs::File>, Option<&'s bytes::Bytes>),
    /// Memory only.
    Memory(&'s bytes::Bytes),
    /// The pack store (an S3 bucket): streamed from it, or a redirect to a presigned URL.
    Store,
}

/// Where `entry`'s bytes come from.
pub fn source(entry: &PackEntry) -> Source<'_> {
    match (&entry.file, &entry.bytes) {
        (Some(file), bytes) => Source::File(file, bytes.as_ref()),
        (None, Some(bytes)) => Source::Memory(bytes),
        (None, None) => Source::Store,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snapshot_with(sha: &str, etag: &str, len: u64) -> (Snapshot, Arc<DeviceEntry>) {
        Snapshot::for_tests(sha, etag, len)
    }

    #[test]
    fn answers_a_poll_nothing_below_the_assignment_then_the_manifest_or_not_modified() {
        let sha = "ab".repeat(32);
        let (snapshot, device) = snapshot_with(&sha, "\"e\"", 100);
        let assignment = snapshot.assignment(&device.id);
        let seen = LastSeen::default();
        let never = |_: &HeaderValue| false;
        // A device at the assignment's sequence (1) or above has nothing newer.
        for seq in [1, 2, i64::MAX as u64] {
            assert!(matches!(
                poll(&seen, &device, assignment, None, seq, 1_000, never),
                Poll::Nothing
            ));
        }
        assert!(seen.take_offers(&device.id).offers().is_empty());
        // Nothing assigned: nothing, whatever the sequence.
        assert!(matches!(
            poll(&seen, &device, None, None, 0, 1_000, never),
            Poll::Nothing
        ));
        // The ETag it names: 304, not an offer.
        let named = poll(&seen, &device, assignment, None, 0, 2_000, |etag| {
            etag.as_bytes() == b"\"m1-1\""
        });
        assert!(matches!(named, Poll::NotModified(a) if a.sequence == 1));
        assert!(seen.take_offers(&device.id).offers().is_empty());
        // Below it: the manifest, noted as offered once, at the earliest time.
        for now in [3_000, 4_000] {
            assert!(matches!(
                poll(&seen, &device, assignment, None, 0, now, never),
                Poll::Offer(a) if a.sequence == 1
            ));
        }
        assert_eq!(seen.take_offers(&device.id).offers(), &[(1, 3_000)]);
    }

    #[test]
    fn offers_nothing_new_outside_the_maintenance_window() {
        let sha = "ab".repeat(32);
        let (snapshot, device) = snapshot_with(&sha, "\"e\"", 100);
        let assignment = snapshot.assignment(&device.id);
        let seen = LastSeen::default();
        let never = |_: &HeaderValue| false;
        // 02:00-03:00 UTC; 1_768_435_200_000 is a midnight UTC.
        let window = Window::new(120, 180, 127, "UTC").unwrap();
        let midnight = 1_768_435_200_000;
        assert!(matches!(
            poll(
                &seen,
                &device,
                assignment,
                Some(&window),
                0,
                midnight,
                never
            ),
            Poll::Nothing
        ));
        // The manifest it already holds is still answered 304 outside the window.
        assert!(matches!(
            poll(
                &seen,
                &device,
                assignment,
                Some(&window),
                0,
                midnight,
                |_| true
            ),
            Poll::NotModified(_)
        ));
        assert!(seen.take_offers(&device.id).offers().is_empty());
        let inside = midnight + 150 * 60_000;
        assert!(matches!(
            poll(&seen, &device, assignment, Some(&window), 0, inside, never),
            Poll::Offer(_)
        ));
    }

    #[test]
    fn answers_release_signatures_of_the_assigned_pack_only() {
        let sha = "ab".repeat(32);
        let (snapshot, device) = snapshot_with(&sha, "\"e\"", 100);
        let never = |_: &HeaderValue| false;
        assert!(matches!(
            release(&snapshot, &device, &"cd".repeat(32), never),
            Release::NotAssigned
        ));
        let Release::Send(entry) = release(&snapshot, &device, &sha, never) else {
            panic!("not sent");
        };
        assert_eq!(&entry.bundle[..], b"NPRB-for-tests");
        assert!(entry.etag.to_str().unwrap().starts_with("\"r-"));
        let etag = entry.etag.clone();
        assert!(matches!(
            release(&snapshot, &device, &sha, |e| *e == etag),
            Release::NotModified(_)
        ));
    }

    #[test]
    fn answers_a_download_of_the_assigned_pack_and_nothing_else() {
        let sha = "ab".repeat(32);
        let (snapshot, device) = snapshot_with(&sha, "\"e\"", 100);
        let other = "cd".repeat(32);
        assert!(matches!(
            pack(&snapshot, &device, &other, &Conditions::default()),
            Pack::NotAssigned
        ));
        let whole = pack(&snapshot, &device, &sha, &Conditions::default());
        assert!(matches!(
            whole,
            Pack::Send {
                range: ranges::Answer::Full,
                ..
            }
        ));
        let cases: [(Conditions<'_>, ranges::Answer); 5] = [
            (
                Conditions {
                    range: Some("bytes=10-19"),
                    ..Conditions::default()
                },
                ranges::Answer::Partial { start: 10, end: 19 },
            ),
            (
                Conditions {
                    range: Some("bytes=100-"),
                    ..Conditions::default()
                },
                ranges::Answer::Unsatisfiable,
            ),
            (
                Conditions {
                    if_none_match: &[b"\"x\", \"e\""],
                    ..Conditions::default()
                },
                ranges::Answer::NotModified,
            ),
            (
                Conditions {
                    if_range: Some(b"\"old\""),
                    range: Some("bytes=10-19"),
                    ..Conditions::default()
                },
                ranges::Answer::Full,
            ),
            (
                Conditions {
                    if_range: Some(b"\"e\""),
                    range: Some("bytes=-5"),
                    ..Conditions::default()
                },
                ranges::Answer::Partial { start: 95, end: 99 },
            ),
        ];
        for (conditions, want) in cases {
            let Pack::Send { range, entry } = pack(&snapshot, &device, &sha, &conditions) else {
                panic!("not sent");
            };
            assert_eq!(range, want, "{conditions:?}");
            assert_eq!(entry.len, 100);
        }
    }
}
