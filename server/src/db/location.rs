//! What `--database-url` names, and how it is shown.
use std::path::Path;

/// What `--database-url` named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Location<'a> {
    /// The SQLite file at this path (the default: `<data-dir>/npub.db`).
    Sqlite(std::borrow::Cow<'a, Path>),
    /// A PostgreSQL URL, used as given.
    Postgres(&'a str),
}

impl<'a> Location<'a> {
    /// Reads `--database-url`; `None` or empty is the SQLite file `default`.
    pub fn parse(url: Option<&'a str>, default: &'a Path) -> Result<Self, String> {
        let Some(url) = url.filter(|u| !u.is_empty()) else {
            return Ok(Self::Sqlite(default.into()));
        };
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            return Ok(Self::Postgres(url));
        }
        if let Some(path) = url.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Ok(Self::Sqlite(default.into()));
            }
            return Ok(Self::Sqlite(Path::new(path).into()));
        }
        Err(format!(
            "{url:?}: expected postgres://… or sqlite://PATH (or nothing, for {})",
            default.display()
        ))
    }
}

/// `url` with its password (if any) replaced by `***`, for logs and the banner.
pub fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("***"));
            u.to_string()
        }
        Ok(u) => u.to_string(),
        Err(_) => "(unparsable URL)".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_url_or_an_empty_sqlite_url_is_the_file_in_the_data_dir() {
        let default = Path::new("/var/lib/npub/npub.db");
        for url in [None, Some(""), Some("sqlite://")] {
            assert_eq!(
                Location::parse(url, default).unwrap(),
                Location::Sqlite(default.into())
            );
        }
        assert_eq!(
            Location::parse(Some("sqlite:///srv/other.db"), default).unwrap(),
            Location::Sqlite(Path::new("/srv/other.db").into())
        );
        for pg in [
            "postgres://u:p@db/npub",
            "postgresql://db/npub?sslmode=require",
        ] {
            assert_eq!(
                Location::parse(Some(pg), default).unwrap(),
                Location::Postgres(pg)
            );
        }
    }

    #[test]
    fn rejects_a_database_url_that_is_neither_postgres_nor_sqlite() {
        let default = Path::new("npub.db");
        for bad in ["mysql://db/npub", "npub.db", "postgres:/db", "file:///x.db"] {
            let err = Location::parse(Some(bad), default).unwrap_err();
            assert!(err.contains(bad) && err.contains("postgres://"), "{err}");
        }
    }

    #[test]
    fn redacts_the_password_only() {
        assert_eq!(
            redact("postgres://npub:s3cret@db:5432/npub"),
            "postgres://npub:***@db:5432/npub"
        );
        assert_eq!(redact("postgres://db/npub"), "postgres://db/npub");
    }
}
