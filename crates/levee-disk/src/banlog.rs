//! The ban log: every purge, one [`Ban::to_line`] per line, appended and synced before
//! `Disk::ban` returns, so that a purge survives a crash or a restart: the next open
//! reads the log and its scan deletes (or marks stale) what the bans match among the
//! records written before them.
//!
//! A ban leaves the log once it is *settled*: no record it matches and that was written
//! before it can remain on disk. A URL ban settles as soon as its one file is gone (or
//! rewritten with its variants marked) and that is synced; other bans settle when a
//! sweep has passed over every record (scan.rs). Compaction rewrites the log with the
//! unsettled bans (temp file, sync, rename, sync of the directory), and lets the read
//! filter ([`Bans`]) forget what is settled.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, UNIX_EPOCH};

use levee_cache::ban::{Ban, BanTarget, Bans};
use levee_cache::codec::unix_ms;

use crate::dir::sync_dir;

const FILE: &str = "bans";
const TEMP: &str = "bans.tmp";

#[derive(Debug)]
pub struct BanLog {
    root: PathBuf,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    /// Opened for appending; None when the last write failed (the next append or
    /// compaction rewrites the whole file first: a half-written line must not run into
    /// the next one).
    file: Option<File>,
    pending: Vec<Pending>,
    /// The earliest `at_ms` of the bans added since the running sweep began: a ban
    /// stamped before the sweep began but added after is not one it applied.
    added_during_sweep: Option<u64>,
}

#[derive(Debug)]
struct Pending {
    ban: Ban,
    settled: bool,
}

/// What the writer thread has to do for the unsettled bans.
#[derive(Debug, Default)]
pub struct Unsettled {
    pub count: usize,
    /// URL bans, settled one file at a time.
    pub urls: Vec<Ban>,
    /// Some other ban waits for a sweep.
    pub needs_sweep: bool,
}

impl BanLog {
    /// Reads the log in `root` (complete lines only: a line cut by a crash is dropped)
    /// and rewrites it with what it could read. Returns the log, its bans, and how many
    /// lines were unreadable.
    pub fn open(root: &Path) -> io::Result<(BanLog, Vec<Ban>, usize)> {
        let path = root.join(FILE);
        let (bans, bad) = match fs::read(&path) {
            Ok(bytes) => parse(&bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => (Vec::new(), 0),
            Err(e) => return Err(e),
        };
        let log = BanLog {
            root: root.to_path_buf(),
            state: Mutex::new(State {
                file: None,
                pending: bans
                    .iter()
                    .map(|b| Pending {
                        ban: b.clone(),
                        settled: false,
                    })
                    .collect(),
                added_during_sweep: None,
            }),
        };
        {
            let mut st = log.lock();
            log.rewrite(&mut st)?;
        }
        Ok((log, bans, bad))
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends `ban` and syncs it, then runs `then` under the log's lock (which adds it
    /// to the read filter: compaction, under the same lock, sees both or neither).
    /// `then` runs even when the log cannot be written (the purge still applies until
    /// a restart).
    pub fn append(&self, ban: &Ban, then: impl FnOnce()) -> io::Result<()> {
        let mut st = self.lock();
        let line = ban.to_line();
        let result = if Ban::from_line(&line).as_ref() != Some(ban) {
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("the ban does not fit on one line: {line:?}"),
            ))
        } else {
            st.pending.push(Pending {
                ban: ban.clone(),
                settled: false,
            });
            if let Some(m) = st.added_during_sweep.as_mut() {
                *m = (*m).min(ban.at_ms);
            }
            match st.file.as_mut() {
                Some(f) => {
                    let r = f
                        .write_all(format!("{line}\n").as_bytes())
                        .and_then(|()| f.sync_data());
                    if r.is_err() {
                        st.file = None;
                    }
                    r
                }
                None => self.rewrite(&mut st),
            }
        };
        then();
        result
    }

    pub fn unsettled(&self) -> Unsettled {
        let st = self.lock();
        let mut out = Unsettled::default();
        for p in st.pending.iter().filter(|p| !p.settled) {
            out.count += 1;
            match p.ban.target {
                BanTarget::Url(_) => out.urls.push(p.ban.clone()),
                _ => out.needs_sweep = true,
            }
        }
        out
    }

    /// How many bans wait to be settled.
    pub fn unsettled_count(&self) -> usize {
        self.lock().pending.iter().filter(|p| !p.settled).count()
    }

    /// `ban` has been applied to its one file, durably.
    pub fn settle(&self, ban: &Ban) {
        let mut st = self.lock();
        if let Some(p) = st.pending.iter_mut().find(|p| !p.settled && p.ban == *ban) {
            p.settled = true;
        }
    }

    pub fn sweep_started(&self) {
        self.lock().added_during_sweep = Some(u64::MAX);
    }

    /// A sweep that began at `start_ms` has passed over every record (and synced what it
    /// changed): the bans it applied are settled.
    pub fn sweep_finished(&self, start_ms: u64) {
        let mut st = self.lock();
        let horizon = start_ms.min(st.added_during_sweep.take().unwrap_or(u64::MAX));
        for p in st.pending.iter_mut().filter(|p| p.ban.at_ms < horizon) {
            p.settled = true;
        }
    }

    /// Rewrites the log without the settled bans, and lets `bans` forget them. Does
    /// nothing when nothing is settled and the file is sound.
    pub fn compact(&self, bans: &Bans, now_ms: u64) -> io::Result<()> {
        let mut st = self.lock();
        if st.file.is_some() && !st.pending.iter().any(|p| p.settled) {
            return Ok(());
        }
        st.pending.retain(|p| !p.settled);
        self.rewrite(&mut st)?;
        let oldest = st.pending.iter().map(|p| p.ban.at_ms).min();
        bans.forget_before(UNIX_EPOCH + Duration::from_millis(oldest.unwrap_or(now_ms)));
        Ok(())
    }

    /// The whole log from `pending` (settled ones too: they go only in `compact`),
    /// through a synced temp file renamed into place.
    fn rewrite(&self, st: &mut State) -> io::Result<()> {
        st.file = None;
        let mut text = String::new();
        for p in &st.pending {
            text.push_str(&p.ban.to_line());
            text.push('\n');
        }
        let temp = self.root.join(TEMP);
        let path = self.root.join(FILE);
        {
            let mut f = OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temp)?;
            f.write_all(text.as_bytes())?;
            f.sync_data()?;
        }
        fs::rename(&temp, &path)?;
        sync_dir(&self.root)?;
        st.file = Some(OpenOptions::new().append(true).open(&path)?);
        Ok(())
    }

    /// The bans of the log, for tests.
    #[cfg(test)]
    pub fn lines(root: &Path) -> Vec<String> {
        fs::read_to_string(root.join(FILE))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
}

/// The bans of a log's bytes, and the number of lines that are not bans. A last line
/// without its newline was cut by a crash: dropped (a cut URL is another URL, a cut
/// prefix a wider one).
fn parse(bytes: &[u8]) -> (Vec<Ban>, usize) {
    let (complete, cut) = match bytes.iter().rposition(|&b| b == b'\n') {
        Some(end) => (&bytes[..end], &bytes[end + 1..]),
        None => (&[][..], bytes),
    };
    let mut bad = usize::from(!cut.is_empty());
    let mut bans = Vec::new();
    for line in complete.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
        match std::str::from_utf8(line).ok().and_then(Ban::from_line) {
            Some(b) => bans.push(b),
            None => bad += 1,
        }
    }
    (bans, bad)
}

/// `at_ms` of a ban made now, on levee's clock.
pub fn now_ms() -> u64 {
    unix_ms(levee_cache::clock::system_now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use levee_cache::ban::BanMode;
    use levee_cache::CacheKey;

    fn url(u: &str, at_ms: u64) -> Ban {
        Ban {
            at_ms,
            mode: BanMode::Remove,
            target: BanTarget::Url(CacheKey::stored(u, 0)),
        }
    }

    fn tag(t: &str, at_ms: u64) -> Ban {
        Ban {
            at_ms,
            mode: BanMode::Stale,
            target: BanTarget::Tag {
                tag: t.into(),
                site: None,
            },
        }
    }

    #[test]
    fn a_line_cut_by_a_crash_is_dropped_and_the_log_rewritten() {
        let dir = tempfile::tempdir().unwrap();
        let a = url("http://a.test/x", 10);
        let b = tag("t", 11);
        let cut = &url("http://a.test/longer", 12).to_line()[..25];
        fs::write(
            dir.path().join(FILE),
            format!("{}\n{}\ngarbage\n{cut}", a.to_line(), b.to_line()),
        )
        .unwrap();
        let (log, bans, bad) = BanLog::open(dir.path()).unwrap();
        assert_eq!(bans, vec![a.clone(), b.clone()]);
        assert_eq!(bad, 2);
        assert_eq!(BanLog::lines(dir.path()), vec![a.to_line(), b.to_line()]);
        // Appends follow whole lines.
        let c = url("http://a.test/y", 13);
        log.append(&c, || {}).unwrap();
        let (_, again, bad) = BanLog::open(dir.path()).unwrap();
        assert_eq!((again, bad), (vec![a, b, c], 0));
    }

    #[test]
    fn settled_bans_leave_the_log_and_the_read_filter() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _, _) = BanLog::open(dir.path()).unwrap();
        let read = Bans::new();
        let (u, t) = (url("http://a.test/x", 100), tag("t", 200));
        for b in [&u, &t] {
            log.append(b, || read.add(b.clone())).unwrap();
        }
        let un = log.unsettled();
        assert_eq!(
            (un.count, un.urls, un.needs_sweep),
            (2, vec![u.clone()], true)
        );
        log.settle(&u);
        log.compact(&read, 1000).unwrap();
        assert_eq!(BanLog::lines(dir.path()), vec![t.to_line()]);
        assert_eq!(read.len(), 1, "the URL ban is forgotten, the tag ban kept");
        // A sweep that began at 300 settles the tag ban, unless a ban stamped before
        // 300 arrived during it.
        log.sweep_started();
        let late = tag("late", 250);
        log.append(&late, || read.add(late.clone())).unwrap();
        log.sweep_finished(300);
        log.compact(&read, 1000).unwrap();
        assert_eq!(BanLog::lines(dir.path()), vec![late.to_line()]);
        assert_eq!(read.since(UNIX_EPOCH), vec![late]);
    }

    #[test]
    fn a_ban_that_does_not_fit_on_a_line_is_refused_but_applied() {
        let dir = tempfile::tempdir().unwrap();
        let (log, _, _) = BanLog::open(dir.path()).unwrap();
        let mut applied = false;
        assert!(log.append(&tag("a\nb", 1), || applied = true).is_err());
        assert!(applied);
        assert!(BanLog::lines(dir.path()).is_empty());
    }
}
