//! A simulated device on the device API (docs/device-api.md), with its own token: poll for a
//! manifest, download the pack, report status. What the UI's progress bars show comes from
//! these reports.
use reqwest::StatusCode;
use serde_json::json;

/// One device.
pub struct SimDevice {
    http: reqwest::Client,
    base: String,
    /// Its id.
    pub id: String,
    token: String,
}

/// A manifest offer: the deployment's sequence and the manifest bytes.
pub struct Offer {
    /// `Npub-Sequence`.
    pub sequence: u64,
    /// The signed manifest.
    pub manifest: Vec<u8>,
}

impl SimDevice {
    /// A device `id` holding `token`, talking to `base`.
    pub fn new(base: &str, id: &str, token: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            base: base.to_owned(),
            id: id.to_owned(),
            token: token.to_owned(),
        }
    }

    /// `GET /api/v1/device/manifest?seq=N`: `Some` on 200, `None` on 204.
    pub async fn poll(&self, seq: u64) -> Option<Offer> {
        let r = self
            .http
            .get(format!("{}/api/v1/device/manifest?seq={seq}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        match r.status() {
            StatusCode::NO_CONTENT => None,
            StatusCode::OK => {
                let sequence = r.headers()["npub-sequence"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                Some(Offer {
                    sequence,
                    manifest: r.bytes().await.unwrap().to_vec(),
                })
            }
            other => panic!("{}: manifest poll answered {other}", self.id),
        }
    }

    /// `GET /api/v1/device/packs/{sha256}`: the whole pack.
    pub async fn download(&self, sha256: &str) -> Vec<u8> {
        let r = self
            .http
            .get(format!("{}/api/v1/device/packs/{sha256}", self.base))
            .bearer_auth(&self.token)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{}: pack download", self.id);
        r.bytes().await.unwrap().to_vec()
    }

    /// `POST /api/v1/device/status`.
    pub async fn report(&self, sequence: u64, state: &str, progress: Option<f64>) {
        self.send_report(json!({"sequence": sequence, "state": state, "progress": progress}))
            .await;
    }

    /// `POST /api/v1/device/status` with `failed` and why.
    pub async fn fail(&self, sequence: u64, reason: &str) {
        self.send_report(json!({"sequence": sequence, "state": "failed", "reason": reason}))
            .await;
    }

    async fn send_report(&self, body: serde_json::Value) {
        let state = body["state"].clone();
        let r = self
            .http
            .post(format!("{}/api/v1/device/status", self.base))
            .bearer_auth(&self.token)
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            204,
            "{}: report {state}: {}",
            self.id,
            r.text().await.unwrap()
        );
    }
}
