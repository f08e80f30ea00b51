//! The two schemas are one: `migrations/*.sql` migrated on a real SQLite file and
//! `migrations/postgres/*.sql` on a real PostgreSQL expose the same tables and the same columns
//! (name, a normalised type class, nullability), and the two migration lists have the same
//! numbers and names. A migration added to one side only fails here.
#[path = "common/postgres.rs"]
#[allow(dead_code)]
mod postgres;

use std::collections::BTreeMap;

use npub_server::db::{self, Location, POSTGRES_MIGRATOR, SQLITE_MIGRATOR};

/// Table -> column -> (type class, nullable).
type Schema = BTreeMap<String, BTreeMap<String, (&'static str, bool)>>;

/// The type classes the server reads and writes (every integer is an `i64`).
fn class(declared: &str) -> &'static str {
    match declared.to_ascii_lowercase().as_str() {
        "integer" | "bigint" => "integer",
        "text" => "text",
        "real" | "double precision" => "float",
        "blob" | "bytea" => "bytes",
        other => panic!("column type {other:?} has no class: add it here and to both schemas"),
    }
}

async fn sqlite_schema(db: &db::Db) -> Schema {
    let rows: Vec<(String, String, String, i64, i64)> = sqlx::query_as(
        "SELECT m.name, p.name, p.type, p.\"notnull\", p.pk \
         FROM sqlite_master m, pragma_table_info(m.name) p \
         WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' AND m.name <> '_sqlx_migrations'",
    )
    .fetch_all(db)
    .await
    .unwrap();
    let mut out = Schema::new();
    for (table, column, ty, not_null, pk) in rows {
        // SQLite lets a non-INTEGER PRIMARY KEY hold NULL (a historical quirk); the server never
        // writes one, and PostgreSQL makes every key column NOT NULL: compare as NOT NULL.
        let nullable = not_null == 0 && pk == 0;
        out.entry(table)
            .or_default()
            .insert(column, (class(&ty), nullable));
    }
    out
}

async fn postgres_schema(db: &db::Db) -> Schema {
    let rows: Vec<(String, String, String, String)> = sqlx::query_as(
        "SELECT table_name::text, column_name::text, data_type::text, is_nullable::text \
         FROM information_schema.columns \
         WHERE table_schema = 'public' AND table_name <> '_sqlx_migrations'",
    )
    .fetch_all(db)
    .await
    .unwrap();
    let mut out = Schema::new();
    for (table, column, ty, nullable) in rows {
        out.entry(table)
            .or_default()
            .insert(column, (class(&ty), nullable == "YES"));
    }
    out
}

#[test]
fn both_backends_have_the_same_migrations() {
    let list = |m: &sqlx::migrate::Migrator| -> Vec<(i64, String)> {
        m.iter()
            .map(|m| (m.version, m.description.to_string()))
            .collect()
    };
    assert_eq!(list(&SQLITE_MIGRATOR), list(&POSTGRES_MIGRATOR));
    assert!(SQLITE_MIGRATOR.iter().count() >= 5);
}

#[tokio::test]
async fn both_backends_expose_the_same_tables_and_columns() {
    if !postgres::available() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let file = tmp.path().join("npub.db");
    let sqlite = db::open(&Location::Sqlite(file.as_path().into()))
        .await
        .unwrap();
    let url = postgres::fresh_database("npub_schema", true).await;
    let pg = db::open(&Location::Postgres(&url)).await.unwrap();
    let (a, b) = (sqlite_schema(&sqlite).await, postgres_schema(&pg).await);
    assert!(a.len() >= 14, "tables: {:?}", a.keys());
    for table in a.keys().chain(b.keys()) {
        assert_eq!(
            a.get(table),
            b.get(table),
            "table {table}: SQLite (left) and PostgreSQL (right) differ"
        );
    }
    assert_eq!(a, b);
}
