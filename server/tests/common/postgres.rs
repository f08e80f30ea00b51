//! `NPUB_TEST_BACKEND=postgres`: the test servers run on a real PostgreSQL instead of their
//! SQLite file. One temporary cluster per test binary (`initdb` from Debian's `postgresql`
//! package, under `nobody` when the tests run as root, since PostgreSQL refuses root; listening
//! on a unix socket in its temp dir only, `fsync` off), and one fresh database per server data
//! dir, so a test that restarts a server over the same dir finds its data again.
//!
//! The cluster is owned by a small shell that holds the test binary's end of a pipe: when the
//! test process exits, however it exits, the shell reads end-of-file, stops the cluster and
//! removes its directory.
use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

use sha2::{Digest as _, Sha256};
use sqlx::Connection as _;

/// Where Debian's `postgresql` package puts the server binaries; `$NPUB_PG_BIN` overrides.
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The superuser `initdb` creates (trust authentication on the socket only).
const SUPERUSER: &str = "npub";

/// The key-encryption key of the test servers on PostgreSQL (their keys live in the database).
pub const TEST_KEK: &str = "7e57000000000000000000000000000000000000000000000000000000007e57";

/// Which database the test servers of this run use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// `NPUB_TEST_BACKEND`: `postgres`, or `sqlite` / unset.
pub fn backend() -> Backend {
    match std::env::var("NPUB_TEST_BACKEND").as_deref() {
        Ok("postgres") => Backend::Postgres,
        Ok("sqlite") | Ok("") | Err(_) => Backend::Sqlite,
        Ok(other) => panic!("NPUB_TEST_BACKEND={other:?}: expected postgres or sqlite"),
    }
}

/// Skips a test that only means something on SQLite (it inspects the file): prints why and
/// returns true when this run is on PostgreSQL.
pub fn skip_unless_sqlite(why: &str) -> bool {
    if backend() == Backend::Postgres {
        eprintln!("SKIPPED on postgres: {why}");
        return true;
    }
    false
}

/// Whether PostgreSQL's server binaries are installed, for tests that need one whatever
/// `NPUB_TEST_BACKEND` says: `false` (printed) outside CI; in CI (`CI=true`) a missing
/// installation fails the test instead.
pub fn available() -> bool {
    let bin = std::env::var("NPUB_PG_BIN").unwrap_or_else(|_| PG_BIN.into());
    if Path::new(&bin).join("initdb").is_file() {
        return true;
    }
    let hint = format!("{bin}/initdb missing: install Debian's postgresql package (.ci/run does)");
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "{hint}; CI must run the PostgreSQL tests"
    );
    eprintln!("SKIPPED: {hint}");
    false
}

/// The running cluster of this test binary.
pub struct Cluster {
    /// The directory holding the socket (`.s.PGSQL.5432`).
    pub socket_dir: PathBuf,
    /// Held for the life of the process: closing it stops the cluster.
    _owner: Mutex<(Child, ChildStdin)>,
}

impl Cluster {
    /// A URL for database `name` on this cluster.
    pub fn url(&self, name: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost/{name}?host={}",
            self.socket_dir.display()
        )
    }
}

/// The cluster, started at the first call.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(start_cluster)
}

fn start_cluster() -> Cluster {
    let bin = std::env::var("NPUB_PG_BIN").unwrap_or_else(|_| PG_BIN.into());
    assert!(
        Path::new(&bin).join("initdb").is_file(),
        "{bin}/initdb missing: install Debian's postgresql package (.ci/run does) or set NPUB_PG_BIN"
    );
    let script = r#"
        set -eu
        bin="$1"; user="$2"
        dir=$(mktemp -d "${TMPDIR:-/tmp}/npub-pg.XXXXXX")
        as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u nobody -- "$@"; else "$@"; fi; }
        [ "$(id -u)" = 0 ] && chown nobody "$dir"
        as_pg "$bin/initdb" -D "$dir/data" -U "$user" --auth=trust -E UTF8 --no-sync >"$dir/initdb.log" 2>&1 \
            || { cat "$dir/initdb.log" >&2; exit 1; }
        as_pg "$bin/postgres" -D "$dir/data" -k "$dir" -c listen_addresses= -c fsync=off \
            -c synchronous_commit=off -c full_page_writes=off -c max_connections=300 \
            </dev/null >"$dir/postgres.log" 2>&1 &
        pid=$!
        until "$bin/pg_isready" -q -h "$dir"; do
            kill -0 "$pid" 2>/dev/null || { cat "$dir/postgres.log" >&2; exit 1; }
            sleep 0.05
        done
        echo "READY $dir"
        cat >/dev/null || true
        # Signal the postmaster itself (runuser does not pass SIGTERM on), let it finish
        # (fast shutdown), then remove its files.
        pm=$(head -n 1 "$dir/data/postmaster.pid" 2>/dev/null || echo "$pid")
        kill -TERM "$pm" 2>/dev/null || true
        for _ in $(seq 100); do kill -0 "$pm" 2>/dev/null || break; sleep 0.05; done
        kill -KILL "$pm" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        rm -rf "$dir"
    "#;
    let mut child = Command::new("bash")
        .args(["-c", script, "npub-pg", &bin, SUPERUSER])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("bash starts the PostgreSQL cluster");
    let stdin = child.stdin.take().unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let socket_dir = line
        .trim()
        .strip_prefix("READY ")
        .unwrap_or_else(|| panic!("the PostgreSQL cluster did not start: {line:?}"))
        .into();
    Cluster {
        socket_dir,
        _owner: Mutex::new((child, stdin)),
    }
}

/// The database of the server over `dir` (created empty the first time), as a URL.
pub async fn database_for(dir: &Path) -> String {
    let digest = Sha256::digest(dir.to_string_lossy().as_bytes());
    let name: String = digest[..10].iter().map(|b| format!("{b:02x}")).collect();
    fresh_database(&format!("npub_{name}"), false).await
}

/// Creates database `name` on the cluster (dropping it first when `recreate`), returns its URL.
pub async fn fresh_database(name: &str, recreate: bool) -> String {
    let cluster = cluster();
    let mut admin = sqlx::PgConnection::connect(&cluster.url("postgres"))
        .await
        .expect("connect to the test cluster");
    if recreate {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut admin)
        .await
        .unwrap();
    }
    match sqlx::query(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
        .execute(&mut admin)
        .await
    {
        Ok(_) => {}
        // 42P04 duplicate_database: a server restarted over the same dir.
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42P04") => {}
        Err(e) => panic!("CREATE DATABASE {name}: {e}"),
    }
    let _ = std::io::stderr().flush();
    cluster.url(name)
}
