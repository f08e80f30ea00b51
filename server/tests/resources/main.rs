//! What happens when a resource runs out or a dependency hangs (issue #31): a full disk, a
//! connection flood, an object store that never answers, retried requests. One file per idea.
#[path = "../common/mod.rs"]
mod common;

mod disk_full;
mod floods;
mod proxy;
