//! Key files.
//!
//! | File          | Mode              | Content (one line, ASCII)                          |
//! |---------------|-------------------|----------------------------------------------------|
//! | `KEYFILE`     | `0600`            | `npub-ed25519-secret-v1 <64 hex digits: the seed>` |
//! | `KEYFILE.pub` | `0644`            | `npub-ed25519-public-v1 <64 hex digits: the key>`  |
//!
//! The secret file is created with mode `0600` from the start (never written first and narrowed
//! after), and never over an existing file. Reading refuses a secret file that group or others may
//! read or write — as OpenSSH does — since such a key must be presumed leaked. The mode is read
//! from the opened handle, so the file checked is the file read.
//!
//! Errors are `std::io::Error`s; those about the content or the mode carry the
//! [`crate::Error`] (`KeyError::FileTooOpen`, `KeyError::FileBadFormat`, `KeyError::Invalid`, `KeyError::Weak`) inside, reachable
//! with `err.get_ref()` and `downcast_ref`.
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use zeroize::Zeroize;

use super::pair::KeyPair;
use crate::manifest::hex;
use crate::{Error, KeyError};

const SECRET_TAG: &str = "npub-ed25519-secret-v1";
const PUBLIC_TAG: &str = "npub-ed25519-public-v1";
/// A key file is one short line; anything longer is not one, and is not read whole.
const MAX_KEY_FILE_BYTES: u64 = 256;
/// Permission bits for group and others.
#[cfg(unix)]
const GROUP_OTHER_BITS: u32 = 0o077;

/// `KEYFILE.pub` for `KEYFILE`.
pub fn public_key_path(secret: &Path) -> PathBuf {
    let mut name = secret.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// Writes `key` to `secret` (mode 0600) and its public half to `secret.pub`; refuses to overwrite
/// either. Returns the public file's path.
pub fn write_key_files(secret: &Path, key: &KeyPair) -> io::Result<PathBuf> {
    let public = public_key_path(secret);
    if public.exists() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} already exists", public.display()),
        ));
    }
    let mut line = format!("{SECRET_TAG} {}\n", to_hex(&key.seed()));
    let written = create_new(secret, 0o600).and_then(|mut f| {
        f.write_all(line.as_bytes())?;
        f.sync_all()
    });
    line.zeroize();
    written?;
    let mut f = create_new(&public, 0o644)?;
    f.write_all(public_key_file_text(&key.public_key()).as_bytes())?;
    f.sync_all()?;
    Ok(public)
}

/// The whole content of a public key file (`KEYFILE.pub`) for `key`: what `npub keygen` writes,
/// what the server's `GET /api/v1/keys/{id}/trust` serves and what `device-agent --trust` reads.
pub fn public_key_file_text(key: &[u8; 32]) -> String {
    format!("{PUBLIC_TAG} {}\n", to_hex(key))
}

/// Reads a secret key file, refusing one that group or others can access.
///
/// What the file holds is judged before its mode: a public key file (`KEYFILE.pub`, mode 0644
/// by design) given where the secret key belongs is that mistake, not a leaked secret.
pub fn read_secret_key(path: &Path) -> io::Result<KeyPair> {
    let file = File::open(path)?;
    #[cfg(unix)]
    let mode = {
        use std::os::unix::fs::PermissionsExt;
        file.metadata()?.permissions().mode() & 0o7777
    };
    let mut text = read_short(file)?;
    let mut seed = [0u8; 32];
    let parsed = parse_line(&text, SECRET_TAG, PUBLIC_TAG, "secret", &mut seed);
    text.zeroize();
    #[cfg(unix)]
    if parsed.is_ok() && mode & GROUP_OTHER_BITS != 0 {
        seed.zeroize();
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            Error::Key(KeyError::FileTooOpen { mode }),
        ));
    }
    let pair = parsed.map(|()| KeyPair::from_seed(seed));
    seed.zeroize();
    pair.map_err(invalid)
}

/// Reads a public key file; the key must be a valid, non-weak ed25519 point.
pub fn read_public_key(path: &Path) -> io::Result<[u8; 32]> {
    let text = read_short(File::open(path)?)?;
    let mut key = [0u8; 32];
    parse_line(&text, PUBLIC_TAG, SECRET_TAG, "public", &mut key).map_err(invalid)?;
    crate::manifest::check_public_key(&key).map_err(invalid)?;
    Ok(key)
}

fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    options
        .open(path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

fn read_short(file: File) -> io::Result<String> {
    let mut text = String::new();
    file.take(MAX_KEY_FILE_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|_| {
            invalid(Error::Key(KeyError::FileBadFormat {
                kind: "key",
                problem: "not a text file",
            }))
        })?;
    if text.len() as u64 > MAX_KEY_FILE_BYTES {
        return Err(invalid(Error::Key(KeyError::FileBadFormat {
            kind: "key",
            problem: "longer than a key file can be",
        })));
    }
    Ok(text)
}

/// `<tag> <64 hex digits>` with an optional final newline, into `out`.
fn parse_line(
    text: &str,
    tag: &str,
    other_tag: &str,
    kind: &'static str,
    out: &mut [u8; 32],
) -> Result<(), Error> {
    let bad = |problem| Error::Key(KeyError::FileBadFormat { kind, problem });
    // Every refusal names the one line the file must hold: an operator who pasted the bare hex
    // the UI shows learns which tag goes in front of it.
    let expected = if kind == "secret" {
        "expected one line `npub-ed25519-secret-v1 <64 hex digits>`, as `npub keygen` writes it"
    } else {
        "expected one line `npub-ed25519-public-v1 <64 hex digits>`, as `npub keygen` writes \
         KEYFILE.pub and the server serves at GET /api/v1/keys/{id}/trust"
    };
    let line = text.strip_suffix('\n').unwrap_or(text);
    let Some((found_tag, digits)) = line.split_once(' ') else {
        return Err(bad(expected));
    };
    if found_tag == other_tag {
        return Err(bad(if kind == "secret" {
            "this is a public key file (KEYFILE.pub); give the secret key file, the same path without .pub"
        } else {
            "this is a secret key file; give KEYFILE.pub"
        }));
    }
    if found_tag != tag {
        return Err(bad(expected));
    }
    hex::decode(digits, out).ok_or(bad(expected))
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn invalid(e: Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

#[cfg(all(test, unix))]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    struct TempDir(PathBuf);
    impl TempDir {
        fn new(name: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("npub-keys-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).unwrap();
            TempDir(dir)
        }
    }
    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn npub_error(e: &io::Error) -> Error {
        *e.get_ref()
            .and_then(|e| e.downcast_ref::<Error>())
            .expect("an npub error inside")
    }

    #[test]
    fn writes_0600_and_reads_back_the_same_key() {
        let dir = TempDir::new("roundtrip");
        let path = dir.0.join("signer");
        let key = KeyPair::from_seed([3; 32]);
        let public = write_key_files(&path, &key).unwrap();
        assert_eq!(public, dir.0.join("signer.pub"));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(
            read_secret_key(&path).unwrap().public_key(),
            key.public_key()
        );
        assert_eq!(read_public_key(&public).unwrap(), key.public_key());
    }

    #[test]
    fn rejects_a_secret_key_readable_by_others() {
        let dir = TempDir::new("open");
        let path = dir.0.join("signer");
        write_key_files(&path, &KeyPair::from_seed([3; 32])).unwrap();
        for mode in [0o640, 0o604, 0o620] {
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            let err = read_secret_key(&path).unwrap_err();
            assert_eq!(err.kind(), io::ErrorKind::PermissionDenied);
            assert_eq!(npub_error(&err), Error::Key(KeyError::FileTooOpen { mode }));
        }
    }

    #[test]
    fn rejects_overwriting_an_existing_key() {
        let dir = TempDir::new("overwrite");
        let path = dir.0.join("signer");
        write_key_files(&path, &KeyPair::from_seed([3; 32])).unwrap();
        let err = write_key_files(&path, &KeyPair::from_seed([4; 32])).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(
            read_public_key(&public_key_path(&path)).unwrap(),
            KeyPair::from_seed([3; 32]).public_key()
        );
    }

    #[test]
    fn rejects_a_public_file_given_as_the_secret_and_garbage() {
        let dir = TempDir::new("format");
        let path = dir.0.join("signer");
        let public = write_key_files(&path, &KeyPair::from_seed([3; 32])).unwrap();
        std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(matches!(
            npub_error(&read_secret_key(&public).unwrap_err()),
            Error::Key(KeyError::FileBadFormat { kind: "secret", .. })
        ));
        let key = KeyPair::from_seed([3; 32]).public_key();
        let bare_hex = public_key_file_text(&key)
            .split_once(' ')
            .unwrap()
            .1
            .to_owned();
        for garbage in [
            "npub-ed25519-public-v1 abcd\n",
            bare_hex.as_str(),
            "ssh-ed25519 AAAA\n",
        ] {
            std::fs::write(&public, garbage).unwrap();
            let err = npub_error(&read_public_key(&public).unwrap_err());
            assert!(
                matches!(
                    err,
                    Error::Key(KeyError::FileBadFormat { kind: "public", .. })
                ),
                "{err:?}"
            );
            assert!(
                err.to_string()
                    .contains("npub-ed25519-public-v1 <64 hex digits>"),
                "{err}"
            );
        }
        std::fs::write(&public, public_key_file_text(&key)).unwrap();
        assert_eq!(read_public_key(&public).unwrap(), key);
    }
}
