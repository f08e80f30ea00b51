//! Signing as the Standard Webhooks specification says (<https://www.standardwebhooks.com/>).
//!
//! | Header              | Value                                                          |
//! |---------------------|----------------------------------------------------------------|
//! | `webhook-id`        | the message id, `msg_` + 32 hex digits; the same on every retry of a delivery, so a receiver can drop duplicates |
//! | `webhook-timestamp` | when this attempt was signed, integer Unix seconds             |
//! | `webhook-signature` | `v1,` + base64 of HMAC-SHA256(secret, `{id}.{timestamp}.{body}`) |
//!
//! The secret is 32 random bytes, shown once as `whsec_` + their base64; the key of the HMAC is
//! the bytes, not the text. A receiver checks the signature in constant time and rejects a
//! timestamp far from its clock (replays).
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use ring::hmac;

/// Bytes of a signing secret (the specification asks for 24 to 64).
pub const SECRET_LEN: usize = 32;
/// What a secret's text starts with.
pub const SECRET_PREFIX: &str = "whsec_";

/// A secret as the operator is shown it once: `whsec_` + base64.
pub fn secret_text(secret: &[u8; SECRET_LEN]) -> String {
    format!("{SECRET_PREFIX}{}", STANDARD.encode(secret))
}

/// The `webhook-signature` value for one attempt.
pub fn signature(secret: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let key = hmac::Key::new(hmac::HMAC_SHA256, secret);
    let mut ctx = hmac::Context::with_key(&key);
    ctx.update(id.as_bytes());
    ctx.update(b".");
    ctx.update(timestamp.to_string().as_bytes());
    ctx.update(b".");
    ctx.update(body);
    format!("v1,{}", STANDARD.encode(ctx.sign().as_ref()))
}

/// A new message id: `msg_` and 16 random bytes in hex.
pub fn message_id() -> Result<String, String> {
    let mut bytes = [0u8; 16];
    getrandom::fill(&mut bytes).map_err(|e| format!("operating-system RNG: {e}"))?;
    Ok(format!("msg_{}", crate::store::to_hex(&bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The specification's own example: secret, id, timestamp and body as it publishes them,
    /// and the signature it says they give.
    #[test]
    fn signs_the_specifications_example() {
        let secret = STANDARD.decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&secret, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn a_secret_reads_back_as_its_bytes() {
        let secret = [0xa5; SECRET_LEN];
        let text = secret_text(&secret);
        let bytes = STANDARD
            .decode(text.strip_prefix(SECRET_PREFIX).unwrap())
            .unwrap();
        assert_eq!(bytes, secret);
    }
}
