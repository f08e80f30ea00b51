//! The firmware's command line, from semihosting (`qemu-system-arm … -append "…"`):
//!
//! | flag               | meaning                                                              | default |
//! |--------------------|----------------------------------------------------------------------|---------|
//! | `--server URL`     | the npub server, `http://ADDRESS:PORT` (10.0.2.2 is the host's loopback in QEMU's user network) | required |
//! | `--token TOKEN`    | this device's token (`POST /api/v1/devices` shows it once)             | required |
//! | `--trust FILE`     | a host file `npub-ed25519-public-v1 <hex>` (`GET /api/v1/keys/{id}/trust`); up to 4 | at least one |
//! | `--root FILE`      | a root key file, the same format (`GET /api/v1/keys/root/trust`): it signs keyring updates (rotation, revocation); up to 2 | none: the `--trust` keys for good |
//! | `--release-trust FILE` | a release key's file, the same format (the `.pub` of `npub keygen`); up to 4. With one, a pack is installed only if its release signatures (`GET /api/v1/device/packs/{sha256}/release`) meet the release policy for its model | none: packs install as before |
//! | `--release-root FILE` | the release root's key file, the same format: it alone signs keyring updates that change release keys and policies (actions 4–8); up to 2 | none: such updates are refused |
//! | `--flash FILE`     | the host file that is the OSPI NOR; created blank                     | required |
//! | `--once`           | exit after the first poll that succeeds (installed or up to date); a refused manifest or pack exits 1 | poll forever |
//! | `--window-kib N`   | KiB per range request; 0 = the rest of the pack in one response      | 64 |
//! | `--slot-kib N`     | size of each pack slot                                                 | 1280 |
//! | `--hw-class N`     | the board's hardware class, as the server signs it                    | 1 |
//! | `--watchdog-ms N`  | arm the CMSDK watchdog: the board resets after N ms without a feed (`watchdog.rs`) | off |
//! | `--starve-once F`  | with `--watchdog-ms`: stop feeding once the download passes 256 KiB, unless `F` exists (then create it) | off |
//! | `--boot-check`     | re-verify the slot's stored manifest (signature against the keyring) and the pack against it before boot binds the NPU (`Layout::boot_check`); boot prints its time | SHA-256 against the journal |
//! | `--demo-device-key` | authenticate the flash records under the QEMU demo's device key (public: a demonstration, not a secret; `main.rs`) | CRC only |
//! | `--ca FILE`        | with an `https://` server: a PEM file, the CA that issued the server's certificate (or that certificate, pinned) or the server's `PUBLIC KEY`, pinned; P-256 only (npub-tls's `x509.rs`) | none: `https://` is refused |
//! | `--tls-seed HEX`   | with `--ca`: 64 hex digits, the seed of the handshake's random generator. QEMU has no TRNG: a DEMO stand-in (`run-qemu.sh` draws it from the host's `/dev/urandom`) | required with `--ca` |
//! | `--polls N`        | with `--once`: exit after N polls that succeed rather than 1 (a session resumed across polls shows from the second on) | 1 |
//! | `--attempts N`     | with `--once`: polls that failed for the network or the flash before giving up (exit 1) | 100 |
//!
//! Values cannot contain spaces. Anything before the first `--` word (QEMU puts the kernel's
//! name there) is skipped.

/// Trust files at most.
pub const MAX_TRUST: usize = 4;

/// Root key files at most (the agent's `MAX_ROOTS`).
pub const MAX_ROOT: usize = 2;

/// Release trust files at most (the agent's `MAX_FACTORY_RELEASE_KEYS`).
pub const MAX_RELEASE: usize = 4;

/// What the command line asked for.
#[derive(Debug, Clone, Copy)]
pub struct Args {
    pub server: &'static str,
    pub token: &'static str,
    pub trust: [Option<&'static str>; MAX_TRUST],
    pub root: [Option<&'static str>; MAX_ROOT],
    pub release_trust: [Option<&'static str>; MAX_RELEASE],
    pub release_root: [Option<&'static str>; MAX_ROOT],
    pub flash: &'static str,
    pub once: bool,
    pub window_kib: u32,
    pub slot_kib: u32,
    pub hw_class: u32,
    pub attempts: u32,
    pub polls: u32,
    pub watchdog_ms: u32,
    pub starve_once: Option<&'static str>,
    pub demo_device_key: bool,
    pub boot_check: bool,
    pub ca: Option<&'static str>,
    pub tls_seed: Option<[u8; 32]>,
}

/// Parses `line`; the error names the flag.
pub fn parse(line: &'static str) -> Result<Args, &'static str> {
    let mut words = line
        .split_ascii_whitespace()
        .skip_while(|w| !w.starts_with("--"));
    let (mut server, mut token, mut flash) = (None, None, None);
    let mut args = Args {
        server: "",
        token: "",
        trust: [None; MAX_TRUST],
        root: [None; MAX_ROOT],
        release_trust: [None; MAX_RELEASE],
        release_root: [None; MAX_ROOT],
        flash: "",
        once: false,
        window_kib: 64,
        slot_kib: 1280,
        hw_class: 1,
        attempts: 100,
        polls: 1,
        watchdog_ms: 0,
        starve_once: None,
        demo_device_key: false,
        boot_check: false,
        ca: None,
        tls_seed: None,
    };
    let (mut trusts, mut roots, mut releases, mut release_roots) = (0, 0, 0, 0);
    while let Some(flag) = words.next() {
        let mut value = |name: &'static str| words.next().ok_or(name);
        let number = |v: &str, name: &'static str| v.parse::<u32>().map_err(|_| name);
        match flag {
            "--server" => server = Some(value("--server needs a URL")?),
            "--token" => token = Some(value("--token needs a value")?),
            "--flash" => flash = Some(value("--flash needs a file")?),
            "--trust" => {
                let v = value("--trust needs a file")?;
                *args.trust.get_mut(trusts).ok_or("--trust: at most 4")? = Some(v);
                trusts += 1;
            }
            "--root" => {
                let v = value("--root needs a file")?;
                *args.root.get_mut(roots).ok_or("--root: at most 2")? = Some(v);
                roots += 1;
            }
            "--release-trust" => {
                let v = value("--release-trust needs a file")?;
                *args
                    .release_trust
                    .get_mut(releases)
                    .ok_or("--release-trust: at most 4")? = Some(v);
                releases += 1;
            }
            "--release-root" => {
                let v = value("--release-root needs a file")?;
                *args
                    .release_root
                    .get_mut(release_roots)
                    .ok_or("--release-root: at most 2")? = Some(v);
                release_roots += 1;
            }
            "--once" => args.once = true,
            "--demo-device-key" => args.demo_device_key = true,
            "--boot-check" => args.boot_check = true,
            "--window-kib" => {
                args.window_kib = number(
                    value("--window-kib needs a number")?,
                    "--window-kib: not a number",
                )?
            }
            "--slot-kib" => {
                args.slot_kib = number(
                    value("--slot-kib needs a number")?,
                    "--slot-kib: not a number",
                )?
            }
            "--hw-class" => {
                args.hw_class = number(
                    value("--hw-class needs a number")?,
                    "--hw-class: not a number",
                )?
            }
            "--attempts" => {
                args.attempts = number(
                    value("--attempts needs a number")?,
                    "--attempts: not a number",
                )?
            }
            "--polls" => {
                args.polls = number(value("--polls needs a number")?, "--polls: not a number")?
            }
            "--watchdog-ms" => {
                args.watchdog_ms = number(
                    value("--watchdog-ms needs a number")?,
                    "--watchdog-ms: not a number",
                )?
            }
            "--ca" => args.ca = Some(value("--ca needs a file")?),
            "--tls-seed" => {
                let v = value("--tls-seed needs 64 hex digits")?;
                args.tls_seed = Some(hex32(v).ok_or("--tls-seed: not 64 hex digits")?);
            }
            "--starve-once" => args.starve_once = Some(value("--starve-once needs a file")?),
            _ => return Err("unknown flag (see fw/src/args.rs)"),
        }
    }
    args.server = server.ok_or("--server is required")?;
    args.token = token.ok_or("--token is required")?;
    args.flash = flash.ok_or("--flash is required")?;
    if trusts == 0 {
        return Err("--trust is required");
    }
    if args.ca.is_some() && args.tls_seed.is_none() {
        return Err("--tls-seed is required with --ca (the board's TRNG stand-in on QEMU)");
    }
    Ok(args)
}

/// The key in a trust file: the line `npub-ed25519-public-v1 <64 hex digits>`.
pub fn trust_key(text: &[u8]) -> Option<[u8; 32]> {
    let text = core::str::from_utf8(text).ok()?;
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    hex32(line.strip_prefix("npub-ed25519-public-v1 ")?.trim())
}

/// 64 hex digits as 32 bytes.
fn hex32(text: &str) -> Option<[u8; 32]> {
    let hex = text.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
    let mut key = [0u8; 32];
    for (i, k) in key.iter_mut().enumerate() {
        *k = digit(hex[2 * i])? << 4 | digit(hex[2 * i + 1])?;
    }
    Some(key)
}
