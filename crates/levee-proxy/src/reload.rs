//! A reload (SIGHUP, `POST /reload`, `levee reload`): the configuration re-read and
//! applied while serving, what cannot change named as needing a restart, an invalid
//! configuration refused whole; systemd and the operator told how it went.

use crate::request::Shared;
use crate::tls::{cert_pairs, warn_expiring};

impl Shared {
    /// Re-reads the configuration and applies what can change while serving; the rest
    /// keeps its running value and is named in the answer ("needs a restart"). An
    /// invalid configuration changes nothing: its error is the answer.
    pub fn reload(&self) -> Result<Vec<&'static str>, String> {
        let Some(reloader) = self.reloader.get() else {
            return Err("levee was started without a configuration to re-read".into());
        };
        let mut new = reloader()?;
        // Certificates first: a file that cannot be used refuses the whole reload, and
        // the certificates in use stay (renewed files under the same names are read
        // again).
        if let Some(tls) = &self.tls {
            tls.certs
                .reload(&cert_pairs(&new, &new.sites))
                .map_err(|e| e.to_string())?;
            warn_expiring(&tls.certs);
        }
        let old = self.conf();
        let mut restart = Vec::new();
        // What the running structures were built from (sockets, threads, the cache's
        // capacity, codecs, the log writer) stays as it is. Compared by their Debug
        // form: not every settings type is PartialEq.
        macro_rules! keep {
            ($name:literal, $($field:ident).+) => {
                if format!("{:?}", new.$($field).+) != format!("{:?}", old.settings.$($field).+) {
                    restart.push($name);
                    new.$($field).+ = old.settings.$($field).+.clone();
                }
            };
        }
        keep!("listen", listen);
        keep!("listen_tls", listen_tls);
        keep!("tls.acme_*", tls.acme);
        keep!("workers", workers);
        keep!("compression", compression);
        keep!("limits", limits);
        keep!("cache.size", cache.size);
        keep!("cache.hit_for_pass", cache.hit_for_pass);
        keep!("cache.disk_path", cache.disk);
        keep!("cache.redis", cache.redis);
        keep!("admin.listen", admin.listen);
        keep!("log", access_log);
        let sites = std::mem::take(&mut new.sites);
        let same_sites = sites.len() == self.sites.len()
            && sites
                .iter()
                .zip(&self.sites)
                .all(|(n, s)| *n.name == *s.name);
        if same_sites {
            for (site, settings) in self.sites.iter().zip(sites) {
                site.reload(settings, &mut restart);
            }
        } else {
            restart.push("sites");
        }
        self.set_conf(new);
        restart.dedup();
        Ok(restart)
    }

    /// Reloads and says how it went on standard error (the operator's terminal or
    /// journal): SIGHUP and `POST /reload` alike.
    pub fn reload_and_report(&self) -> Result<Vec<&'static str>, String> {
        levee_systemd::reloading();
        let r = self.reload();
        levee_systemd::reloaded();
        match &r {
            Ok(kept) if kept.is_empty() => eprintln!("levee: configuration reloaded"),
            Ok(kept) => eprintln!(
                "levee: configuration reloaded; these changes need a restart and were not applied: {}",
                kept.join(", ")
            ),
            Err(e) => eprintln!("levee: reload refused, the previous configuration keeps running: {e}"),
        }
        r
    }
}
