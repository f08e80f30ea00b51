//! Where a signature comes from: a key file (`--key`), or an external command
//! (`--signer-cmd CMD --signer-pub KEY.pub`) that holds the key in an HSM, a token or a cloud
//! KMS, so that npub links none of them.
//!
//! The command protocol (`docs/release.md`, worked example `docs/examples/openssl-ed25519-signer.sh`):
//!
//! | | |
//! |---|---|
//! | run as | `sh -c CMD`, in its own process group, stderr passed through (prompts, errors) |
//! | stdin | the exact message to sign (a domain prefix ‖ the record's signed bytes), then end of file |
//! | stdout | the 64-byte pure-ed25519 signature of the message: exactly 64 raw bytes, or 128 hex digits, or base64 (whitespace anywhere in those two ignored) |
//! | exit | 0; anything else is an error naming the status |
//! | time | `--signer-timeout` seconds (default 60, room for a PIN or a touch); then the process group is killed |
//!
//! The signature is verified under `--signer-pub` before anything is written, so a command that
//! used another key or signed other bytes is caught here.
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use npub_core::keypair::KeyPair;
use npub_core::release::Signer;

use super::Failure;
use super::pack_io::secret_key;

/// Bytes of stdout read from a signer at most: a signature in any of the three forms is far
/// shorter, and a command that prints more is not one.
const MAX_SIGNER_OUTPUT: u64 = 4096;
/// How often a running signer is looked at while waiting for it to exit.
const POLL: Duration = Duration::from_millis(10);

/// The flags that choose the signer, shared by every command that signs.
#[derive(clap::Args)]
pub struct SignerArgs {
    /// The secret key file (from `npub keygen`; mode 0600 or stricter).
    #[arg(
        long,
        value_name = "KEYFILE",
        required_unless_present = "signer_cmd",
        conflicts_with = "signer_cmd"
    )]
    key: Option<PathBuf>,
    /// Sign with this command instead: it reads the message on stdin and writes the 64-byte
    /// ed25519 signature on stdout (raw, hex or base64). Needs --signer-pub.
    #[arg(long = "signer-cmd", value_name = "CMD", requires = "signer_pub")]
    signer_cmd: Option<String>,
    /// The public key (KEYFILE.pub) the --signer-cmd signs with.
    #[arg(long = "signer-pub", value_name = "KEYFILE.pub")]
    signer_pub: Option<PathBuf>,
    /// Seconds the --signer-cmd may take before it is killed.
    #[arg(long = "signer-timeout", value_name = "SECONDS", default_value_t = 60)]
    signer_timeout: u64,
}

/// A key pair from a file, or an external command.
pub enum AnySigner {
    /// `--key`.
    File(KeyPair),
    /// `--signer-cmd`.
    Command(CommandSigner),
}

impl SignerArgs {
    /// The signer these flags name.
    pub fn signer(&self) -> Result<AnySigner, Failure> {
        match (&self.key, &self.signer_cmd, &self.signer_pub) {
            (Some(key), _, _) => Ok(AnySigner::File(secret_key(key)?)),
            (None, Some(command), Some(public)) => {
                let public_key = npub_core::keypair::read_public_key(public)
                    .map_err(|e| Failure::Usage(format!("cannot use {}: {e}", public.display())))?;
                Ok(AnySigner::Command(CommandSigner {
                    command: command.clone(),
                    public_key,
                    timeout: Duration::from_secs(self.signer_timeout),
                }))
            }
            _ => Err(Failure::Usage(
                "give --key KEYFILE, or --signer-cmd CMD with --signer-pub KEYFILE.pub".into(),
            )),
        }
    }
}

impl Signer for AnySigner {
    type Error = Failure;

    fn public_key(&self) -> [u8; 32] {
        match self {
            AnySigner::File(key) => key.public_key(),
            AnySigner::Command(command) => command.public_key,
        }
    }

    fn sign(&self, message: &[u8]) -> Result<[u8; 64], Failure> {
        match self {
            AnySigner::File(key) => Ok(Signer::sign(key, message)?),
            AnySigner::Command(command) => command.sign(message),
        }
    }
}

/// An external command that signs (see the module's table).
pub struct CommandSigner {
    command: String,
    public_key: [u8; 32],
    timeout: Duration,
}

impl CommandSigner {
    fn sign(&self, message: &[u8]) -> Result<[u8; 64], Failure> {
        let output = self.run(message)?;
        parse_signature(&output).ok_or_else(|| {
            Failure::Usage(format!(
                "--signer-cmd printed {} bytes, not a signature: expected the 64-byte ed25519 \
                 signature raw, as 128 hex digits, or in base64",
                output.len()
            ))
        })
    }

    /// Runs the command with `message` on stdin; its stdout, once it exited 0 in time.
    fn run(&self, message: &[u8]) -> Result<Vec<u8>, Failure> {
        let fail =
            |what: String| Failure::Usage(format!("--signer-cmd `{}`: {what}", self.command));
        let mut child = spawn(&self.command).map_err(|e| fail(format!("cannot start: {e}")))?;
        let deadline = Instant::now() + self.timeout;
        if let Some(mut stdin) = child.stdin.take() {
            // A command that exits without reading its input is judged by its exit status and
            // its output, not by this write.
            let _ = stdin.write_all(message);
        }
        let (sent, output) = mpsc::channel();
        if let Some(stdout) = child.stdout.take() {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                let read = stdout.take(MAX_SIGNER_OUTPUT + 1).read_to_end(&mut out);
                let _ = sent.send(read.map(|_| out));
            });
        }
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    kill_group(&mut child);
                    return Err(fail(format!(
                        "did not finish within {} s (--signer-timeout); killed",
                        self.timeout.as_secs()
                    )));
                }
                Ok(None) => std::thread::sleep(POLL),
                Err(e) => return Err(fail(format!("cannot wait for it: {e}"))),
            }
        };
        if !status.success() {
            return Err(fail(format!("failed ({status})")));
        }
        let left = deadline.saturating_duration_since(Instant::now()).max(POLL);
        let out = output
            .recv_timeout(left)
            .map_err(|_| {
                fail("exited but its output did not end (a child kept stdout open)".into())
            })?
            .map_err(|e| fail(format!("cannot read its output: {e}")))?;
        if out.len() as u64 > MAX_SIGNER_OUTPUT {
            return Err(fail(format!("printed more than {MAX_SIGNER_OUTPUT} bytes")));
        }
        Ok(out)
    }
}

fn spawn(command: &str) -> std::io::Result<Child> {
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    #[cfg(unix)]
    {
        use std::os::unix::process::CommandExt;
        // Its own process group, so that a timeout ends a pipeline, not only the shell.
        cmd.process_group(0);
    }
    cmd.spawn()
}

/// Kills the command's whole process group (the shell and what it started), then reaps it.
fn kill_group(child: &mut Child) {
    #[cfg(unix)]
    {
        let group = format!("-{}", child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stderr(Stdio::null())
            .status();
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A 64-byte signature: raw, or (whitespace trimmed) 128 hex digits or base64.
fn parse_signature(out: &[u8]) -> Option<[u8; 64]> {
    if let Ok(raw) = <[u8; 64]>::try_from(out) {
        return Some(raw);
    }
    // Whitespace anywhere: `base64` wraps its lines, `od` spaces its bytes.
    let text: String = std::str::from_utf8(out)
        .ok()?
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    let decoded = if text.len() == 128 {
        from_hex(&text)?
    } else {
        from_base64(&text)?
    };
    decoded.try_into().ok()
}

fn from_hex(text: &str) -> Option<Vec<u8>> {
    let digits = text.as_bytes();
    digits
        .chunks_exact(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// Standard base64 (RFC 4648, `+` and `/`), padding optional.
fn from_base64(text: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let body = text.trim_end_matches('=');
    if text.len() - body.len() > 2 || body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    for chunk in body.as_bytes().chunks(4) {
        let mut acc = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            acc |= value(c)? << (18 - 6 * i);
        }
        let bytes = acc.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

impl From<npub_core::Error> for Failure {
    fn from(e: npub_core::Error) -> Self {
        Failure::Usage(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_signature_raw_hex_or_base64() {
        let sig: [u8; 64] = std::array::from_fn(|i| (i * 7 + 3) as u8);
        assert_eq!(parse_signature(&sig), Some(sig));
        let hex: String = sig.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(parse_signature(format!("{hex}\n").as_bytes()), Some(sig));
        assert_eq!(parse_signature(hex.to_uppercase().as_bytes()), Some(sig));
        // `base64 -w0` of the same bytes.
        let b64 = "AwoRGB8mLTQ7QklQV15lbHN6gYiPlp2kq7K5wMfO1dzj6vH4/wYNFBsiKTA3PkVMU1phaG92fYSLkpmgp661vA==";
        assert_eq!(parse_signature(b64.as_bytes()), Some(sig));
        assert_eq!(
            parse_signature(b64.trim_end_matches('=').as_bytes()),
            Some(sig)
        );
        let wrapped = format!("{}\n{}\n", &b64[..76], &b64[76..]);
        assert_eq!(parse_signature(wrapped.as_bytes()), Some(sig));
        let spaced: String = hex
            .as_bytes()
            .chunks(2)
            .map(|p| format!(" {}", std::str::from_utf8(p).unwrap()))
            .collect();
        assert_eq!(parse_signature(spaced.as_bytes()), Some(sig));
    }

    #[test]
    fn rejects_output_that_is_not_a_signature() {
        for bad in [
            &b""[..],
            b"hello\n",
            &[0u8; 63],
            &[0u8; 65],
            b"zz00000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000",
            b"AAAA====",
        ] {
            assert_eq!(parse_signature(bad), None, "{bad:?}");
        }
    }
}
