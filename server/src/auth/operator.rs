//! Who is calling an operator route: the token's identity and role, as the extractor
//! (`extractor.rs`) establishes them and the audit log records them.
use serde::Serialize;
use utoipa::ToSchema;

/// What a token may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, serde::Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything, including tokens and signing keys.
    Admin,
    /// Models, versions and deployments.
    Operator,
}

impl Role {
    /// The database spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Operator => "operator",
        }
    }

    /// From the database spelling; anything unknown is the lesser role.
    pub fn from_db(s: &str) -> Self {
        if s == "admin" {
            Role::Admin
        } else {
            Role::Operator
        }
    }
}

/// The authenticated caller of an operator route.
#[derive(Debug, Clone)]
pub struct Operator {
    /// `tokens.id`.
    pub token_id: i64,
    /// The token's name, as the audit log shows it.
    pub name: String,
    /// What it may do.
    pub role: Role,
}

/// The authenticated caller of an admin-only route: an [`Operator`] whose role is admin. As an
/// extractor it runs before the body extractor, so an operator-role token gets 403 whatever it
/// sent, never a 422 about a body it may not send at all.
#[derive(Debug, Clone)]
pub struct Admin(pub Operator);
