//! [`TempCluster`]: a throwaway PostgreSQL server for tests and examples.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

use crate::Error;

/// A PostgreSQL server of its own, in a temporary directory, reachable
/// only through a unix socket there: made with `initdb`, run until the
/// `TempCluster` is dropped or the process exits (a watchdog shell stops
/// the server and removes the directory when the process's end of a pipe
/// closes, so a test that panics or is killed leaves nothing behind).
///
/// The server's programs are looked up in `SMARTPOOL_PG_BIN`, then on the
/// `PATH`, then in `/usr/lib/postgresql/*/bin` (Debian's and Ubuntu's
/// packages, newest first). Run as root, the server runs as the
/// `postgres` user (PostgreSQL refuses root).
///
/// ```no_run
/// let cluster = smartpool_postgres::TempCluster::start()?;
/// let queue = smartpool_postgres::Queue::connect(&cluster.url())?;
/// # Ok::<(), smartpool_postgres::Error>(())
/// ```
#[derive(Debug)]
pub struct TempCluster {
    dir: PathBuf,
    watchdog: Child,
}

impl TempCluster {
    /// Makes and starts the server; returns once it accepts connections.
    pub fn start() -> Result<TempCluster, Error> {
        let bin = bin_dir()?;
        static CLUSTERS: AtomicU64 = AtomicU64::new(0);
        let nanos = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "smartpool-pg-{}-{}-{nanos}",
            std::process::id(),
            CLUSTERS.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).map_err(Error::Thread)?;
        // Until the watchdog owns the directory, a failure removes it.
        let watchdog = match start_in(&bin, &dir) {
            Ok(watchdog) => watchdog,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                return Err(e);
            }
        };
        let cluster = TempCluster { dir, watchdog };
        let socket = cluster.dir.join(".s.PGSQL.5432");
        let started = Instant::now();
        loop {
            let ready = || {
                std::fs::read_to_string(cluster.dir.join("log"))
                    .is_ok_and(|log| log.contains("ready to accept connections"))
            };
            if socket.exists() && ready() {
                return Ok(cluster);
            }
            if started.elapsed() > Duration::from_secs(30) {
                let log = std::fs::read_to_string(cluster.dir.join("log")).unwrap_or_default();
                return Err(Error::Config(format!(
                    "the temporary server did not start within 30 s; its log:\n{log}"
                )));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The connection string of its `postgres` database.
    pub fn url(&self) -> String {
        format!(
            "host={} port=5432 user=postgres dbname=postgres",
            self.dir.display()
        )
    }

    /// The connection string of database `name` (create it first, e.g.
    /// with `CREATE DATABASE`).
    pub fn url_of(&self, name: &str) -> String {
        format!(
            "host={} port=5432 user=postgres dbname={name}",
            self.dir.display()
        )
    }
}

impl Drop for TempCluster {
    fn drop(&mut self) {
        // Closing the watchdog's stdin stops the server.
        if let Some(mut stdin) = self.watchdog.stdin.take() {
            let _ = stdin.flush();
        }
        let _ = self.watchdog.wait();
    }
}

/// Makes the cluster in `dir` and starts its watchdog (see
/// [`TempCluster`]); only its owner may enter `dir`.
fn start_in(bin: &Path, dir: &Path) -> Result<Child, Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(Error::Thread)?;
    let root = run_output("id", &["-u"]).map(|u| u.trim() == "0")?;
    let as_user = |program: &Path| -> Command {
        if root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    };
    if root {
        run_status(Command::new("chown").args(["postgres"]).arg(dir))?;
    }
    let data = dir.join("data");
    run_status(
        as_user(&bin.join("initdb"))
            .args([
                "-U",
                "postgres",
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "-D",
            ])
            .arg(&data),
    )?;
    // The watchdog: starts the server, waits for its stdin to close
    // (the TempCluster dropped, or this process gone), then stops the
    // server at once and removes the directory.
    let script = r#"
        "$1/postgres" -D "$2/data" -k "$2" -p 5432 -c listen_addresses= \
            -c fsync=off -c synchronous_commit=off -c full_page_writes=off \
            -c max_connections=200 -c unix_socket_permissions=0700 >"$2/log" 2>&1 &
        pid=$!
        # A Ctrl-C to the process group stops the server, not the cleanup.
        trap '' INT TERM HUP
        cat >/dev/null
        kill -INT $pid 2>/dev/null
        wait $pid
        rm -rf "$2"
    "#;
    let mut watchdog = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", script, "sh"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script, "sh"]);
        c
    };
    watchdog
        .arg(bin)
        .arg(dir)
        .stdin(Stdio::piped())
        // Nothing of the test's output stays open in the watchdog (the
        // server logs to a file in the directory).
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(Error::Thread)
}

/// Where the server's programs are.
fn bin_dir() -> Result<PathBuf, Error> {
    if let Some(dir) = std::env::var_os("SMARTPOOL_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if dir.join("initdb").exists() && dir.join("postgres").exists() {
                return Ok(dir);
            }
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|bin| bin.join("initdb").exists())
        .collect();
    versions.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
    });
    versions.pop().ok_or_else(|| {
        Error::Config(
            "no PostgreSQL server programs (initdb, postgres) found: set SMARTPOOL_PG_BIN, \
             or install them (Debian/Ubuntu: apt-get install postgresql)"
                .into(),
        )
    })
}

fn run_output(program: &str, args: &[&str]) -> Result<String, Error> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(Error::Thread)?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn run_status(command: &mut Command) -> Result<(), Error> {
    let out = command.output().map_err(Error::Thread)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(Error::Config(format!(
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )))
    }
}
