//! `acme_dir`: the account key and, per name, the certificate chain and its key. The
//! directory is 0700 and every file 0600 (they hold private keys), each written to a
//! temporary file and renamed over the old one, so that a crash never leaves half a key
//! to be served at the next start.
//!
//! Layout: `account-HOST.json` (instant-acme's credentials, one account per ACME
//! server), `NAME.crt` (the chain, PEM, leaf first) and `NAME.key` (PKCS#8 PEM).

use std::fs;
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use instant_acme::AccountCredentials;
use levee_tls::CertPair;

use crate::error::Error;

pub(crate) struct Storage {
    dir: PathBuf,
}

impl Storage {
    /// Creates the directory if needed and makes it private.
    pub(crate) fn open(dir: &Path) -> Result<Storage, Error> {
        let failed = |cause| Error::Dir {
            dir: dir.to_owned(),
            cause,
        };
        fs::create_dir_all(dir).map_err(failed)?;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(failed)?;
        Ok(Storage {
            dir: dir.to_owned(),
        })
    }

    /// The pair stored for `name` (a DNS name: checked by the caller to hold no `/`).
    pub(crate) fn pair(&self, name: &str) -> CertPair {
        CertPair::new(
            self.dir.join(format!("{name}.crt")),
            self.dir.join(format!("{name}.key")),
        )
        .serving([name])
    }

    /// Whether both files of `name`'s pair exist.
    pub(crate) fn has(&self, name: &str) -> bool {
        let p = self.pair(name);
        p.cert.is_file() && p.key.is_file()
    }

    /// Stores a new pair for `name`: the key first, so that a new chain is never next to
    /// an old key for longer than between two renames.
    pub(crate) fn save(
        &self,
        name: &str,
        chain_pem: &str,
        key_pem: &str,
    ) -> Result<CertPair, Error> {
        let pair = self.pair(name);
        write_private(&pair.key, key_pem.as_bytes())?;
        write_private(&pair.cert, chain_pem.as_bytes())?;
        Ok(pair)
    }

    fn account_file(&self, directory: &str) -> PathBuf {
        // One account per ACME server: a changed acme_directory needs its own.
        let host = directory
            .split("://")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or(directory);
        let host: String = host
            .chars()
            .map(|c| match c {
                'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' => c,
                _ => '_',
            })
            .collect();
        self.dir.join(format!("account-{host}.json"))
    }

    /// The stored account for the server at `directory`, if any (an unreadable one is
    /// reported and replaced by a new account).
    pub(crate) fn account(&self, directory: &str) -> Option<AccountCredentials> {
        let file = self.account_file(directory);
        let text = fs::read(&file).ok()?;
        match serde_json::from_slice(&text) {
            Ok(creds) => Some(creds),
            Err(e) => {
                tracing::warn!(file = %file.display(), error = %e, "unreadable ACME account, a new one will be made");
                None
            }
        }
    }

    pub(crate) fn save_account(
        &self,
        directory: &str,
        creds: &AccountCredentials,
    ) -> Result<(), Error> {
        let file = self.account_file(directory);
        let json = serde_json::to_vec_pretty(creds).map_err(|e| Error::File {
            action: "write",
            file: file.clone(),
            cause: std::io::Error::other(e),
        })?;
        write_private(&file, &json)
    }
}

/// Writes `bytes` to `file` with mode 0600: a temporary file beside it, synced, then
/// renamed over it.
fn write_private(file: &Path, bytes: &[u8]) -> Result<(), Error> {
    let tmp = file.with_extension("tmp");
    let failed = |cause| Error::File {
        action: "write",
        file: file.to_owned(),
        cause,
    };
    let _ = fs::remove_file(&tmp);
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(failed)?;
    f.write_all(bytes).map_err(failed)?;
    f.sync_all().map_err(failed)?;
    drop(f);
    fs::rename(&tmp, file).map_err(failed)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn files_are_private_and_replaced_whole() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("acme");
        let s = Storage::open(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let pair = s.save("a.example.com", "chain 1", "key 1").unwrap();
        s.save("a.example.com", "chain 2", "key 2").unwrap();
        assert_eq!(fs::read_to_string(&pair.cert).unwrap(), "chain 2");
        assert_eq!(fs::read_to_string(&pair.key).unwrap(), "key 2");
        assert_eq!(mode(&pair.cert), 0o600);
        assert_eq!(mode(&pair.key), 0o600);
        assert!(s.has("a.example.com") && !s.has("b.example.com"));
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            2,
            "no temporary file left"
        );
    }

    #[test]
    fn each_acme_server_has_its_own_account_file() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Storage::open(tmp.path()).unwrap();
        assert_eq!(
            s.account_file("https://127.0.0.1:14000/dir"),
            tmp.path().join("account-127.0.0.1_14000.json")
        );
        assert_eq!(
            s.account_file("https://acme-v02.api.letsencrypt.org/directory"),
            tmp.path().join("account-acme-v02.api.letsencrypt.org.json")
        );
    }

    #[test]
    fn an_uncreatable_directory_says_what_to_do() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("file");
        fs::write(&file, "").unwrap();
        let err = Storage::open(&file.join("acme")).err().unwrap().to_string();
        assert!(err.contains("acme_dir"), "{err}");
    }

    fn mode(p: &Path) -> u32 {
        fs::metadata(p).unwrap().permissions().mode() & 0o777
    }
}
