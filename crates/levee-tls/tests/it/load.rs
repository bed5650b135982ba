//! Loading pairs: what loads, and for each way a pair can be wrong, an error that names
//! the file and says what to do.

use std::time::SystemTime;

use levee_tls::{CertPair, CertStore, Error, Settings};
use time::OffsetDateTime;

use crate::fixtures::{Ca, Dir};

fn load(pairs: &[CertPair]) -> Result<CertStore, Error> {
    CertStore::load(pairs, Settings::default())
}

/// The error loading `pairs` gives, with its message.
fn load_err(pairs: &[CertPair]) -> (Error, String) {
    let err = load(pairs).expect_err("the load should fail");
    let message = err.to_string();
    (err, message)
}

#[test]
fn two_pairs_load_with_their_names_and_expiry() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let a = dir.pair("a", &ca.issue(&["a.example.com", "WWW.A.Example.com"]));
    let b = dir.pair("b", &ca.issue(&["b.example.com"]));
    let store = load(&[a.clone().serving(["a.example.com"]), b.clone()]).unwrap();

    let expiry = store.expiry();
    assert_eq!(expiry.len(), 2);
    assert_eq!(expiry[0].file, a.cert);
    assert_eq!(expiry[0].names, ["a.example.com", "www.a.example.com"]);
    assert_eq!(expiry[1].file, b.cert);
    assert_eq!(expiry[1].names, ["b.example.com"]);
    let days = expiry[0].days_left(SystemTime::now());
    assert!((88..=90).contains(&days), "{days} days left");
    assert!(store.covers("www.a.example.com"));
    assert!(store.covers("B.example.com."));
    assert!(!store.covers("c.example.com"));
}

#[test]
fn a_wildcard_certificate_serves_a_name_one_label_below() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let pair = dir
        .pair("wild", &ca.issue(&["*.example.org"]))
        .serving(["shop.example.org"]);
    let store = load(&[pair]).unwrap();
    assert!(store.covers("shop.example.org"));
    assert!(!store.covers("example.org"));
    assert!(!store.covers("a.shop.example.org"));
}

#[test]
fn the_certificate_and_key_may_share_one_file() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let leaf = ca.issue(&["a.example.com"]);
    let both = dir.write("both.pem", format!("{}{}", leaf.cert_pem, leaf.key_pem));
    load(&[CertPair::new(&both, &both)]).unwrap();
}

#[test]
fn no_pair_at_all_is_an_error() {
    let (err, message) = load_err(&[]);
    assert!(matches!(err, Error::NoCertificates), "{err:?}");
    assert!(message.contains("at least one certificate"), "{message}");
}

#[test]
fn a_missing_certificate_file_is_named() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    pair.cert = dir.path("missing.pem");
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert_eq!(err.file(), Some(dir.path("missing.pem").as_path()));
    assert!(
        message.starts_with(&format!(
            "cannot read {}",
            dir.path("missing.pem").display()
        )),
        "{message}"
    );
    assert!(message.contains("check the path"), "{message}");
}

#[test]
fn a_missing_key_file_is_named() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    pair.key = dir.path("missing.key");
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert!(message.contains("missing.key"), "{message}");
}

#[test]
fn a_directory_for_a_file_is_a_read_error() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let sub = dir.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    pair.cert = sub.clone();
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::Read { .. }), "{err:?}");
    assert!(message.contains(&sub.display().to_string()), "{message}");
}

#[test]
fn a_garbage_file_holds_no_certificate() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    pair.cert = dir.write("garbage.pem", garbage);
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::NoCertificate { .. }), "{err:?}");
    assert!(
        message.contains("garbage.pem holds no certificate"),
        "{message}"
    );
    assert!(
        message.contains("give the certificate chain file"),
        "{message}"
    );
}

#[test]
fn a_key_file_given_as_the_certificate_holds_no_certificate() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    let swapped = CertPair::new(&pair.key, &pair.cert);
    let (err, message) = load_err(&[swapped]);
    assert!(matches!(err, Error::NoCertificate { .. }), "{err:?}");
    assert!(message.contains("a.key holds no certificate"), "{message}");
}

#[test]
fn a_certificate_given_as_the_key_holds_no_key() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    let (err, message) = load_err(&[CertPair::new(&pair.cert, &pair.cert)]);
    assert!(matches!(err, Error::NoKey { .. }), "{err:?}");
    assert!(message.contains("a.pem holds no private key"), "{message}");
}

#[test]
fn a_pem_section_without_its_end_is_not_valid_pem() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    pair.cert = dir.write("cut.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n");
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::Pem { .. }), "{err:?}");
    assert!(message.contains("cut.pem is not valid PEM"), "{message}");
}

#[test]
fn a_certificate_section_that_is_not_x509_cannot_be_parsed() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    pair.cert = dir.write(
        "junk.pem",
        "-----BEGIN CERTIFICATE-----\naGVsbG8gd29ybGQ=\n-----END CERTIFICATE-----\n",
    );
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::BadCertificate { .. }), "{err:?}");
    assert!(message.contains("junk.pem cannot be parsed"), "{message}");
}

#[test]
fn a_key_section_that_is_no_key_cannot_be_used() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let mut pair = dir.pair("a", &ca.issue(&["a.example.com"]));
    pair.key = dir.write(
        "junk.key",
        "-----BEGIN PRIVATE KEY-----\naGVsbG8gd29ybGQ=\n-----END PRIVATE KEY-----\n",
    );
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::BadKey { .. }), "{err:?}");
    assert!(message.contains("junk.key cannot be used"), "{message}");
}

#[test]
fn the_key_of_another_certificate_is_refused() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let a = dir.pair("a", &ca.issue(&["a.example.com"]));
    let b = dir.pair("b", &ca.issue(&["b.example.com"]));
    let mixed = CertPair::new(&a.cert, &b.key);
    let (err, message) = load_err(&[mixed]);
    assert!(matches!(err, Error::KeyMismatch { .. }), "{err:?}");
    assert_eq!(err.file(), Some(b.key.as_path()));
    assert_eq!(
        message,
        format!(
            "{} is not the private key of the certificate in {}; give the key file that was \
             made together with this certificate",
            b.key.display(),
            a.cert.display()
        )
    );
}

#[test]
fn a_certificate_for_none_of_its_names_is_refused() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let pair = dir
        .pair("a", &ca.issue(&["a.example.com", "*.a.example.com"]))
        .serving(["b.example.com", "a.b.example.com"]);
    let file = pair.cert.clone();
    let (err, message) = load_err(&[pair]);
    assert!(matches!(err, Error::NamesNotCovered { .. }), "{err:?}");
    assert_eq!(
        message,
        format!(
            "the certificate in {} is for a.example.com, *.a.example.com, which covers none \
             of b.example.com, a.b.example.com; give a certificate issued for these names",
            file.display()
        )
    );
}

#[test]
fn a_wildcard_does_not_cover_its_own_domain() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let pair = dir
        .pair("wild", &ca.issue(&["*.example.org"]))
        .serving(["example.org"]);
    let (err, _) = load_err(&[pair]);
    assert!(matches!(err, Error::NamesNotCovered { .. }), "{err:?}");
}

#[test]
fn one_bad_pair_fails_the_whole_load() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let good = dir.pair("a", &ca.issue(&["a.example.com"]));
    let mut bad = dir.pair("b", &ca.issue(&["b.example.com"]));
    bad.key = dir.path("gone.key");
    let (err, _) = load_err(&[good, bad]);
    assert_eq!(err.file(), Some(dir.path("gone.key").as_path()));
}

#[test]
fn expired_and_near_expiry_certificates_load_and_are_listed_soonest_first() {
    let (ca, dir) = (Ca::new(), Dir::new());
    let now = OffsetDateTime::now_utc();
    let fresh = dir.pair("fresh", &ca.issue(&["fresh.example.com"]));
    let soon = dir.pair(
        "soon",
        &ca.issue_until(
            &["soon.example.com"],
            now + time::Duration::hours(10 * 24 + 12),
        ),
    );
    let expired = dir.pair(
        "expired",
        &ca.issue_until(
            &["expired.example.com"],
            now - time::Duration::hours(3 * 24 - 12),
        ),
    );
    let store = load(&[fresh, soon.clone(), expired.clone()]).unwrap();

    let within_14 = store.expiring_within(14);
    let files: Vec<_> = within_14.iter().map(|e| e.file.clone()).collect();
    assert_eq!(files, [expired.cert.clone(), soon.cert.clone()]);
    let today = SystemTime::now();
    // Half a day off whole days, so the seconds the test takes cannot tip the count.
    assert_eq!(within_14[1].days_left(today), 10);
    assert_eq!(within_14[0].days_left(today), -3);
    assert_eq!(within_14[0].names, ["expired.example.com"]);

    let within_7: Vec<_> = store
        .expiring_within(7)
        .into_iter()
        .map(|e| e.file)
        .collect();
    assert_eq!(within_7, [expired.cert]);
}
