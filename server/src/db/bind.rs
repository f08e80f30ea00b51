//! Statements built from the filters a listing was given (`fleet/listing.rs`, `ops/audit_log.rs`):
//! fixed SQL fragments with numbered placeholders, and the values bound to them in order.

/// A value bound to a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bind {
    /// A text value.
    Text(String),
    /// An integer value.
    Int(i64),
}

/// `sql` (fixed fragments only: every value is in `binds`) with `binds` bound in order.
pub fn query_as<O>(
    sql: String,
    binds: Vec<Bind>,
) -> sqlx::query::QueryAs<'static, sqlx::Any, O, sqlx::any::AnyArguments>
where
    O: for<'r> sqlx::FromRow<'r, sqlx::any::AnyRow>,
{
    let mut query = sqlx::query_as::<_, O>(sqlx::AssertSqlSafe(sql));
    for bind in binds {
        query = match bind {
            Bind::Text(t) => query.bind(t),
            Bind::Int(i) => query.bind(i),
        };
    }
    query
}
