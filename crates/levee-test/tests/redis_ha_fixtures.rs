//! The Redis Cluster and Sentinel fixtures themselves: they start, serve keys, and
//! replace a killed primary; a reshard moves slots and keys. The TLS variants (and the
//! single TLS server) speak TLS only, replication and the Cluster bus included. Skipped
//! (as the other Redis tests) where redis-server is missing and
//! `LEVEE_TEST_SKIP_MISSING` names it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use levee_test::{Redis, RedisCluster, RedisSentinel, RedisTls};

/// `SET key value` on the node serving `key`, found by following `-MOVED`.
fn cluster_set(cluster: &RedisCluster, key: &str, value: &str) -> u16 {
    let mut port = cluster.ports()[0];
    for _ in 0..5 {
        let reply = cluster.command(port, &format!("SET {key} {value}"));
        match moved_to(&reply) {
            Some(p) => port = p,
            None => {
                assert_eq!(reply, "+OK\r\n", "SET {key} on {port}");
                return port;
            }
        }
    }
    panic!("SET {key}: redirected too often\n{}", cluster.logs());
}

/// `GET key` from the node serving it: (its port, the raw reply).
fn cluster_get(cluster: &RedisCluster, key: &str) -> (u16, String) {
    let mut port = cluster.primaries()[0];
    for _ in 0..5 {
        let reply = cluster.command(port, &format!("GET {key}"));
        match moved_to(&reply) {
            Some(p) => port = p,
            None => return (port, reply),
        }
    }
    panic!("GET {key}: redirected too often\n{}", cluster.logs());
}

/// The port of a `-MOVED slot 127.0.0.1:port` reply.
fn moved_to(reply: &str) -> Option<u16> {
    let rest = reply.strip_prefix("-MOVED ")?;
    rest.trim_end().rsplit(':').next()?.parse().ok()
}

/// How many slots the node on `port` says it serves.
fn slots_of(cluster: &RedisCluster, port: u16) -> u32 {
    let nodes = cluster.command(port, "CLUSTER NODES");
    let me = nodes
        .lines()
        .find(|l| l.contains("myself"))
        .expect("a myself line");
    me.split_whitespace()
        .skip(8)
        .filter(|s| !s.starts_with('['))
        .map(|s| match s.split_once('-') {
            Some((a, b)) => b.parse::<u32>().unwrap() - a.parse::<u32>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

fn dbsize(cluster: &RedisCluster, port: u16) -> i64 {
    let reply = cluster.command(port, "DBSIZE");
    reply
        .trim()
        .strip_prefix(':')
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("DBSIZE on {port}: {reply:?}"))
}

/// What a client without credentials hears from the server on `port`.
fn unauthenticated_ping(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"PING\r\n").unwrap();
    let mut buf = [0u8; 256];
    let n = s.read(&mut buf).unwrap();
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// A key written to its primary survives that primary's death: the replica has it.
fn kill_and_promote(cluster: &RedisCluster, key: &str) {
    let primary = cluster.primary_for_key(key);
    assert_eq!(
        cluster.command(primary, &format!("SET {key} v1")),
        "+OK\r\n"
    );
    // WAIT on a new connection would count nothing: it waits for that connection's writes.
    cluster.wait_replicated(primary);
    let t = Instant::now();
    cluster.kill(primary);
    let promoted = cluster.wait_promoted(primary);
    eprintln!("replica {promoted} promoted in {:?}", t.elapsed());
    assert_ne!(promoted, primary);
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3, "{primaries:?}");
    assert!(primaries.contains(&promoted) && !primaries.contains(&primary));
    assert_eq!(cluster.primary_for_key(key), promoted);
    assert_eq!(
        cluster.command(promoted, &format!("GET {key}")),
        "$2\r\nv1\r\n"
    );
    assert!(cluster
        .cluster_command("CLUSTER INFO")
        .contains("cluster_state:ok"));
}

#[test]
fn a_cluster_serves_keys_and_promotes_a_replica() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let t = Instant::now();
    let cluster = RedisCluster::start();
    eprintln!("cluster started in {:?}", t.elapsed());

    let ports = cluster.ports();
    assert_eq!(ports.len(), 6);
    let urls = cluster.urls();
    assert_eq!(urls[0], format!("redis://127.0.0.1:{}", ports[0]));
    let primaries = cluster.primaries();
    assert_eq!(primaries.len(), 3, "{primaries:?}");

    let primary = cluster.primary_for_key("levee:a");
    assert!(primaries.contains(&primary));
    assert_eq!(cluster.command(primary, "SET levee:a 1"), "+OK\r\n");
    assert_eq!(cluster.command(primary, "GET levee:a"), "$1\r\n1\r\n");
    let other = primaries.iter().find(|p| **p != primary).unwrap();
    let reply = cluster.command(*other, "GET levee:a");
    assert_eq!(moved_to(&reply), Some(primary), "{reply}");

    kill_and_promote(&cluster, "levee:b");
}

#[test]
fn a_reshard_moves_slots_and_their_keys() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let cluster = RedisCluster::start();
    let keys: Vec<String> = (0..500).map(|i| format!("key:{i}")).collect();
    for k in &keys {
        cluster_set(&cluster, k, "x");
    }
    let primaries = cluster.primaries();
    let (from, to) = (primaries[0], primaries[1]);
    let (from_slots, to_slots) = (slots_of(&cluster, from), slots_of(&cluster, to));
    let (from_keys, to_keys) = (dbsize(&cluster, from), dbsize(&cluster, to));

    let t = Instant::now();
    let reshard = cluster.reshard_in_background(from, to, 500);
    // The cluster keeps answering while the slots move.
    assert!(cluster.cluster_command("PING").starts_with("+PONG"));
    reshard
        .wait()
        .unwrap_or_else(|e| panic!("{e}\n{}", cluster.logs()));
    eprintln!("500 slots moved in {:?}", t.elapsed());

    assert_eq!(slots_of(&cluster, from), from_slots - 500);
    assert_eq!(slots_of(&cluster, to), to_slots + 500);
    let (from_after, to_after) = (dbsize(&cluster, from), dbsize(&cluster, to));
    assert_eq!(from_after + to_after, from_keys + to_keys, "no key lost");
    assert!(to_after > to_keys, "keys moved with their slots");
    for k in &keys {
        assert_eq!(cluster_get(&cluster, k).1, "$1\r\nx\r\n", "{k}");
    }

    // And back, waited for in place.
    cluster.reshard(to, from, 500);
    assert_eq!(slots_of(&cluster, from), from_slots);
    assert_eq!(dbsize(&cluster, to), to_keys);
}

#[test]
fn a_cluster_with_credentials() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let cluster = RedisCluster::start_with_auth("levee", "s3cret");
    let port = cluster.ports()[0];
    assert_eq!(
        cluster.urls()[0],
        format!("redis://levee:s3cret@127.0.0.1:{port}")
    );
    assert!(unauthenticated_ping(port).starts_with("-NOAUTH"));
    assert!(cluster.command(port, "ACL WHOAMI").contains("levee"));
    kill_and_promote(&cluster, "levee:c");
}

/// A key written to the primary is read from the replica the sentinels promote.
fn fail_over(sentinel: &RedisSentinel) {
    let [first, replica] = sentinel.ports()[..] else {
        panic!("two data nodes");
    };
    assert_eq!(sentinel.primary_port(), first);
    assert_eq!(sentinel.command(first, "SET levee:s 1"), "+OK\r\n");
    sentinel.wait_replicated();

    let t = Instant::now();
    let old = sentinel.kill_primary();
    assert_eq!(old, first);
    let new = sentinel.wait_failover(old);
    let took = t.elapsed();
    eprintln!("failed over in {took:?}");
    assert!(took < Duration::from_secs(15), "failover took {took:?}");
    assert_eq!(new, replica);
    assert_eq!(sentinel.primary_port(), replica);
    assert_eq!(sentinel.command(new, "GET levee:s"), "$1\r\n1\r\n");
    assert_eq!(sentinel.command(new, "SET levee:s 2"), "+OK\r\n");
}

#[test]
fn sentinels_fail_over_to_the_replica() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let t = Instant::now();
    let sentinel = RedisSentinel::start();
    eprintln!("sentinels started in {:?}", t.elapsed());
    let s = sentinel.sentinel_ports();
    assert_eq!(
        sentinel.url(),
        format!(
            "redis+sentinel://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/mymaster",
            s[0], s[1], s[2]
        )
    );
    fail_over(&sentinel);
}

#[test]
fn sentinels_fail_over_with_credentials() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let sentinel = RedisSentinel::start_with_auth("levee", "s3cret");
    let s = sentinel.sentinel_ports();
    assert!(sentinel.url().starts_with(&format!(
        "redis+sentinel://levee:s3cret@127.0.0.1:{},",
        s[0]
    )));
    assert!(unauthenticated_ping(sentinel.ports()[0]).starts_with("-NOAUTH"));
    assert!(unauthenticated_ping(s[0]).starts_with("+PONG"));
    fail_over(&sentinel);
}

/// Whether a cleartext client hears PONG from the server on `port`: a TLS-only server
/// ends the connection instead.
fn cleartext_ping_answered(port: u16) -> bool {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if s.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 64];
    matches!(s.read(&mut buf), Ok(n) if buf[..n].starts_with(b"+PONG"))
}

#[test]
fn a_tls_server_speaks_tls_only_and_restarts_on_tls() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    for file in [tls.ca_path(), tls.cert_path(), tls.key_path()] {
        assert!(file.is_file(), "{}", file.display());
    }
    let mut redis = Redis::start_tls(&tls);
    let port = redis.port();
    assert_eq!(redis.url(), format!("rediss://127.0.0.1:{port}/0"));
    // The fixture's own client checks the certificate against the CA.
    assert_eq!(redis.command("PING"), "+PONG\r\n");
    redis.set_raw("k", b"v");
    assert_eq!(redis.command("GET k"), "$1\r\nv\r\n");
    assert!(!cleartext_ping_answered(port));
    redis.restart();
    assert_eq!(redis.command("GET k"), "$-1\r\n", "a new, empty server");
    assert!(!cleartext_ping_answered(port));
}

#[test]
fn a_cluster_on_tls_serves_keys_and_promotes_a_replica() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    let t = Instant::now();
    let cluster = RedisCluster::start_tls(&tls);
    eprintln!("TLS cluster started in {:?}", t.elapsed());
    let port = cluster.ports()[0];
    assert_eq!(cluster.urls()[0], format!("rediss://127.0.0.1:{port}"));
    assert!(!cleartext_ping_answered(port));
    // Redirections name the TLS ports, the ones clients reach.
    let primaries = cluster.primaries();
    let primary = cluster.primary_for_key("levee:t");
    let other = primaries.iter().find(|p| **p != primary).unwrap();
    let reply = cluster.command(*other, "GET levee:t");
    assert_eq!(moved_to(&reply), Some(primary), "{reply}");
    // Replication and the Cluster bus run on TLS: a replica takes over.
    kill_and_promote(&cluster, "levee:t");
}

#[test]
fn sentinels_on_tls_fail_over_to_the_replica() {
    let Some(_) = levee_test::redis::require() else {
        return;
    };
    let tls = RedisTls::new();
    let t = Instant::now();
    let sentinel = RedisSentinel::start_tls(&tls);
    eprintln!("TLS sentinels started in {:?}", t.elapsed());
    let s = sentinel.sentinel_ports();
    assert_eq!(
        sentinel.url(),
        format!(
            "rediss+sentinel://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}/mymaster",
            s[0], s[1], s[2]
        )
    );
    assert!(!cleartext_ping_answered(s[0]));
    assert!(!cleartext_ping_answered(sentinel.ports()[0]));
    assert_eq!(sentinel.command(s[0], "PING"), "+PONG\r\n");
    fail_over(&sentinel);
}
