//! The proven sessions kept with the disk cache, so that a restart or an upgrade does
//! not take people's place ahead of the crawlers away (levee-proxy's request/proven.rs
//! decides what is proven; here it is only kept).
//!
//! One file, `sessions`, of [`ProofChange`] lines, appended as changes come by a thread
//! of its own (a login must not wait for a disk; the channel is bounded and a full one
//! drops, counted), no fsync per line: a crash loses at most what the page cache held,
//! which costs those people their priority until their next login, never a session. At
//! open the file is read (a line cut by a crash is skipped), what is older than `idle`
//! dropped, and it is rewritten with one line per live hash (a temp file renamed over
//! it); the thread rewrites it the same way once it holds many more lines than live
//! hashes.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use levee_cache::proof::ProofChange;

const FILE: &str = "sessions";
/// Changes waiting for the thread at most.
const QUEUE: usize = 4096;

/// The open `sessions` file and its writer thread; the thread ends when this drops.
pub struct SessionFile {
    tx: Option<SyncSender<ProofChange>>,
    thread: Option<JoinHandle<()>>,
    dropped: Arc<AtomicU64>,
}

impl SessionFile {
    /// Opens (or creates) `dir/sessions`, keeping at most `capacity` hashes used within
    /// `idle`. Returns the file and what it holds, newest last.
    pub fn open(
        dir: &Path,
        idle: Duration,
        capacity: usize,
    ) -> io::Result<(SessionFile, Vec<ProofChange>)> {
        let path = dir.join(FILE);
        let mut live = read(&path)?;
        trim(&mut live, idle, capacity);
        rewrite(&path, &live)?;
        let file = append(&path)?;
        let mut held: Vec<(u128, u64)> = live.iter().map(|(h, at)| (*h, *at)).collect();
        held.sort_by_key(|(_, at)| *at);
        let held = held
            .into_iter()
            .map(|(hash, at)| ProofChange::Proven { hash, at })
            .collect();
        let (tx, rx) = mpsc::sync_channel(QUEUE);
        let writer = Writer {
            path,
            file,
            live,
            lines: 0,
            idle,
            capacity,
        };
        let thread = std::thread::Builder::new()
            .name("levee-sessions".into())
            .spawn(move || writer.run(rx))?;
        Ok((
            SessionFile {
                tx: Some(tx),
                thread: Some(thread),
                dropped: Arc::new(AtomicU64::new(0)),
            },
            held,
        ))
    }

    /// Queues a change; never blocks (a full queue drops it, counted).
    pub fn write(&self, change: ProofChange) {
        let Some(tx) = &self.tx else { return };
        if let Err(TrySendError::Full(_)) = tx.try_send(change) {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Changes dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

impl Drop for SessionFile {
    /// Writes what is queued, then ends the thread.
    fn drop(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Writer {
    path: PathBuf,
    file: File,
    live: HashMap<u128, u64>,
    /// Lines appended since the last rewrite.
    lines: usize,
    idle: Duration,
    capacity: usize,
}

impl Writer {
    fn run(mut self, rx: Receiver<ProofChange>) {
        while let Ok(change) = rx.recv() {
            match change {
                ProofChange::Proven { hash, at } => {
                    self.live.insert(hash, at);
                }
                ProofChange::Forgotten { hash } => {
                    self.live.remove(&hash);
                }
            }
            let line = change.to_line() + "\n";
            if let Err(e) = self.file.write_all(line.as_bytes()) {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot write the proven sessions");
            }
            self.lines += 1;
            if self.lines > 2 * self.live.len() + QUEUE {
                self.compact();
            }
        }
        let _ = self.file.sync_data();
    }

    fn compact(&mut self) {
        trim(&mut self.live, self.idle, self.capacity);
        let done = rewrite(&self.path, &self.live).and_then(|()| append(&self.path));
        match done {
            Ok(file) => {
                self.file = file;
                self.lines = 0;
            }
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "cannot rewrite the proven sessions")
            }
        }
    }
}

/// What the file holds: each hash's last proof, unless forgotten after it. Missing: none.
fn read(path: &Path) -> io::Result<HashMap<u128, u64>> {
    let mut live = HashMap::new();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(live),
        Err(e) => return Err(e),
    };
    for line in BufReader::new(file).split(b'\n') {
        let line = line?;
        match std::str::from_utf8(&line)
            .ok()
            .and_then(ProofChange::from_line)
        {
            Some(ProofChange::Proven { hash, at }) => {
                live.insert(hash, at);
            }
            Some(ProofChange::Forgotten { hash }) => {
                live.remove(&hash);
            }
            None => {}
        }
    }
    Ok(live)
}

/// Drops what is older than `idle`, then the oldest beyond `capacity`.
fn trim(live: &mut HashMap<u128, u64>, idle: Duration, capacity: usize) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    live.retain(|_, at| now.saturating_sub(*at) < idle.as_secs());
    if live.len() > capacity {
        let mut ats: Vec<u64> = live.values().copied().collect();
        let cut = ats.len() - capacity;
        ats.select_nth_unstable(cut);
        let oldest_kept = ats[cut];
        live.retain(|_, at| *at >= oldest_kept);
    }
}

/// One line per live hash, written to a temp file renamed over `path`.
fn rewrite(path: &Path, live: &HashMap<u128, u64>) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    let mut out = io::BufWriter::new(
        OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?,
    );
    for (hash, at) in live {
        let line = ProofChange::Proven {
            hash: *hash,
            at: *at,
        }
        .to_line();
        out.write_all(line.as_bytes())?;
        out.write_all(b"\n")?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_data()?;
    fs::rename(&tmp, path)
}

fn append(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(86400);

    fn now() -> u64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("levee-sessions-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        d
    }

    fn proven(hash: u128, at: u64) -> ProofChange {
        ProofChange::Proven { hash, at }
    }

    #[test]
    fn proofs_outlive_a_restart_and_forgotten_ones_do_not() {
        let d = dir("restart");
        let (f, held) = SessionFile::open(&d, DAY, 100).unwrap();
        assert!(held.is_empty());
        f.write(proven(1, now()));
        f.write(proven(2, now()));
        f.write(ProofChange::Forgotten { hash: 1 });
        f.write(proven(3, now() - 2 * 86400));
        drop(f);
        let (_f, held) = SessionFile::open(&d, DAY, 100).unwrap();
        let hashes: Vec<u128> = held.iter().map(|c| c.hash()).collect();
        assert_eq!(hashes, [2], "1 forgotten, 3 idle beyond a day");
        let text = fs::read_to_string(d.join(FILE)).unwrap();
        assert_eq!(text.lines().count(), 1, "rewritten, one line each: {text}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_line_cut_by_a_crash_is_skipped_and_the_newest_are_kept() {
        let d = dir("cut");
        let n = now();
        let lines = format!(
            "{}\n{}\n{}\n+0000000000000000000000000000",
            proven(7, n - 30).to_line(),
            proven(8, n - 20).to_line(),
            proven(9, n - 10).to_line()
        );
        fs::write(d.join(FILE), lines).unwrap();
        let (_f, held) = SessionFile::open(&d, DAY, 2).unwrap();
        let hashes: Vec<u128> = held.iter().map(|c| c.hash()).collect();
        assert_eq!(hashes, [8, 9], "the newest two, oldest first");
        fs::remove_dir_all(&d).unwrap();
    }
}
