//! The connection's life, on one task: connect (a connection for commands, a second
//! one subscribed to the channels; through Sentinel or to a Cluster as target.rs says),
//! send the bans queued meanwhile, read the bans kept in Redis, and only then say "up".
//! While up: apply what is heard, send this node's, check the connection every second
//! (PING; through Sentinel, `ROLE`: a primary demoted by a failover is left at once,
//! and every few seconds the sentinels are asked whether they still name it; in a
//! Cluster, the subscribed node answers, and the primaries are read again every few
//! seconds: when they change it connects again at once, for a fresh map of the slots).
//! The subscription ending (Redis closed the connection, or was killed),
//! three unanswered checks in a row (Redis hung) or a request's failed command that a
//! check confirms mean "down": requests stop asking Redis at once, and the task
//! reconnects after 1 s, then every 2 s for one server, 250 ms doubling to 2 s through Sentinel or
//! to a Cluster, whose failovers take seconds. Down and back, and every change of
//! primary, are each logged once. The task ends when the last `Redis` clone is dropped.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{PubSubSink, PubSubStream};
use tokio::sync::watch;

use crate::conn::Conn;
use crate::inner::Inner;
use crate::target::{self, Connected, Mode, Target};
use crate::{fleet, sessions, sync};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// Within a fleet's lease (3 s) of Redis being back: the other nodes take back the part
/// of a node that has not renewed, while that node, still alone, runs on it. At 30 s a
/// node came back seconds after the others and the backend got more than the fleet's 6.
const MAX_BACKOFF: Duration = Duration::from_secs(2);
/// Through Sentinel or to a Cluster, a lost primary is replaced within seconds: levee
/// asks again soon and often.
const HA_FIRST_BACKOFF: Duration = Duration::from_millis(250);
const HA_MAX_BACKOFF: Duration = Duration::from_secs(2);
/// How often a live connection is checked.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Unanswered checks in a row that mean Redis is gone.
const PINGS_MISSED: u32 = 3;
/// How many checks between two readings of a Cluster's primaries, or two questions to
/// the sentinels.
const PRIMARIES_EVERY: u32 = 3;

/// Why the connection ended.
enum Ended {
    /// The last `Redis` clone was dropped.
    Stop,
    Lost(String),
    /// The Cluster's primaries changed: connect again at once.
    Moved(String),
}

/// A connection ready to serve.
struct Link {
    conn: Conn,
    sink: PubSubSink,
    messages: PubSubStream,
    mode: Mode,
    primaries: Vec<String>,
}

pub(crate) async fn supervise(inner: Arc<Inner>, mut stop: watch::Receiver<()>) {
    let ha = !matches!(inner.target, Target::Server { .. });
    let (first, max) = if ha {
        (HA_FIRST_BACKOFF, HA_MAX_BACKOFF)
    } else {
        (FIRST_BACKOFF, MAX_BACKOFF)
    };
    let mut backoff = first;
    // Whether "unreachable" was logged and not yet followed by "reachable again".
    let mut reported = false;
    let mut was_up = false;
    loop {
        let attempt = tokio::select! {
            r = connect(&inner) => r,
            _ = stop.changed() => return,
        };
        match attempt {
            Ok(link) => {
                backoff = first;
                if was_up {
                    inner.stats.reconnect();
                }
                let changed = reached(&inner, link.mode, &link.primaries);
                if std::mem::take(&mut reported) {
                    tracing::warn!(redis = %inner.shown, "Redis at {} is reachable again{}; sharing the cache", inner.shown, on(link.mode, &link.primaries));
                } else if !changed {
                    tracing::info!(redis = %inner.shown, "connected to Redis at {}{}", inner.shown, on(link.mode, &link.primaries));
                }
                was_up = true;
                inner.set_conn(Some(link.conn.clone()));
                let ended = watch_over(&inner, link, &mut stop).await;
                // Requests stop asking at once (and, on Stop, the connection closes
                // once the last request using it is done).
                inner.set_conn(None);
                match ended {
                    Ended::Stop => return,
                    Ended::Lost(why) => {
                        log_down(&inner, &why);
                        reported = true;
                    }
                    // At once, and said by `reached` when the new connection is up.
                    Ended::Moved(why) => {
                        tracing::debug!(redis = %inner.shown, "reconnecting: {why}");
                        continue;
                    }
                }
            }
            Err(why) => {
                if !reported {
                    log_down(&inner, &why);
                    reported = true;
                }
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(max);
    }
}

/// ` (Sentinel's primary 10.0.0.5:6379)`, ` (a Cluster of 3 primaries)`, or nothing.
fn on(mode: Mode, primaries: &[String]) -> String {
    match mode {
        Mode::Server => String::new(),
        Mode::Sentinel => format!(" (Sentinel's primary {})", primaries.join(", ")),
        Mode::Cluster => format!(
            " (a Cluster of {} primaries: {})",
            primaries.len(),
            primaries.join(", ")
        ),
    }
}

/// Records what a connection reached; a primary that was not there before is a
/// failover, counted and logged once. True if that was logged.
fn reached(inner: &Inner, mode: Mode, primaries: &[String]) -> bool {
    let Ok(mut last) = inner.reached.lock() else {
        return false;
    };
    let before = last.replace((mode, primaries.to_vec()));
    let Some((_, before)) = before else {
        return false;
    };
    if before == primaries {
        return false;
    }
    let new: Vec<&String> = primaries.iter().filter(|p| !before.contains(p)).collect();
    if mode != Mode::Server && !new.is_empty() {
        for _ in &new {
            inner.stats.failover();
        }
        tracing::warn!(
            redis = %inner.shown,
            "Redis failed over: the primaries are now {} (were {}); sharing through the new one",
            primaries.join(", "),
            before.join(", ")
        );
        return true;
    }
    tracing::info!(
        redis = %inner.shown,
        "Redis's primaries are now {} (were {})",
        primaries.join(", "),
        before.join(", ")
    );
    true
}

fn log_down(inner: &Inner, why: &str) {
    tracing::warn!(
        redis = %inner.shown,
        error = why,
        "Redis at {} is unreachable: {why}; serving from local tiers, reconnecting",
        inner.shown
    );
}

/// How long connecting (and reading the bans) may take.
fn connect_timeout(inner: &Inner) -> Duration {
    (inner.cfg.op_timeout * 4).max(Duration::from_secs(2))
}

/// Both connections, the queued bans sent and the kept bans read: ready to serve.
async fn connect(inner: &Inner) -> Result<Link, String> {
    let limit = connect_timeout(inner);
    let steps = async {
        let Connected {
            mut conn,
            mut pubsub,
            mode,
            primaries,
        } = inner.target.connect(limit).await?;
        // Subscribed before the kept bans are read: a ban published in between is
        // heard, or read, or both (applied once).
        pubsub
            .subscribe(inner.keys.channel())
            .await
            .map_err(|e| e.to_string())?;
        if inner.proofs.is_some() {
            pubsub
                .subscribe(inner.keys.proofs())
                .await
                .map_err(|e| e.to_string())?;
        }
        pubsub
            .subscribe(inner.keys.fleet_channel())
            .await
            .map_err(|e| e.to_string())?;
        if !sync::flush(inner, &mut conn).await {
            return Err("cannot write the bans made meanwhile".to_string());
        }
        if !sync::load(inner, &mut conn).await {
            return Err("cannot read the bans kept there".to_string());
        }
        if !sessions::flush(inner, &mut conn).await {
            return Err("cannot write the sessions proven meanwhile".to_string());
        }
        if !sessions::load(inner, &mut conn).await {
            return Err("cannot read the proven sessions kept there".to_string());
        }
        let (sink, messages) = pubsub.split();
        Ok(Link {
            conn,
            sink,
            messages,
            mode,
            primaries,
        })
    };
    tokio::time::timeout(limit, steps)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}

async fn watch_over(inner: &Inner, link: Link, stop: &mut watch::Receiver<()>) -> Ended {
    let Link {
        mut conn,
        mut sink,
        mut messages,
        mode,
        primaries,
    } = link;
    let mut tick = tokio::time::interval(PING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut missed = 0;
    let mut ticks = 0u32;
    let proofs = inner.keys.proofs();
    let fleet = inner.keys.fleet_channel();
    loop {
        tokio::select! {
            _ = stop.changed() => return Ended::Stop,
            msg = messages.next() => match msg {
                Some(msg) if msg.get_channel_name() == proofs => {
                    sessions::received(inner, msg.get_payload_bytes())
                }
                Some(msg) if msg.get_channel_name() == fleet => {
                    fleet::received(inner, msg.get_payload_bytes())
                }
                Some(msg) => sync::received(inner, msg.get_payload_bytes()),
                None => return Ended::Lost("the connection was closed".to_string()),
            },
            _ = inner.flush.notified() => {
                // A failure is retried on the next tick, or after reconnecting.
                if sync::flush(inner, &mut conn).await {
                    sessions::flush(inner, &mut conn).await;
                }
            }
            _ = tick.tick() => {
                match check(inner, mode, &mut conn, &mut sink).await {
                    Health::Fine => missed = 0,
                    Health::Demoted => {
                        return Ended::Lost(format!(
                            "the primary {} is no longer one (a failover)",
                            primaries.join(", ")
                        ))
                    }
                    Health::NoAnswer => {
                        missed += 1;
                        if missed >= PINGS_MISSED {
                            return Ended::Lost(format!("no answer to {missed} checks in a row"));
                        }
                    }
                }
                ticks = ticks.wrapping_add(1);
                if let (Target::Sentinel(s), true) = (&inner.target, ticks.is_multiple_of(PRIMARIES_EVERY)) {
                    // A primary cut off from the sentinels still says it is one: they are
                    // asked too, and one they no longer name is left.
                    let config = redis::AsyncConnectionConfig::new()
                        .set_connection_timeout(Some(inner.cfg.op_timeout));
                    if let Ok(named) = s.named_primary(&config).await {
                        if !primaries.contains(&named) {
                            return Ended::Lost(format!(
                                "the sentinels now name {named} as the primary, not {}",
                                primaries.join(", ")
                            ));
                        }
                    }
                }
                if mode == Mode::Cluster && ticks.is_multiple_of(PRIMARIES_EVERY) {
                    let read = target::cluster_primaries(&mut conn);
                    if let Ok(Ok(now)) = tokio::time::timeout(inner.cfg.op_timeout, read).await {
                        if now != primaries {
                            // A connection made while a dead primary was still listed
                            // keeps its slots on it after the promotion (redis-rs
                            // refreshed its map too early): a new one reads the map
                            // again, and says the change once.
                            return Ended::Moved(format!(
                                "the Cluster's primaries are now {} (were {})",
                                now.join(", "),
                                primaries.join(", ")
                            ));
                        }
                    }
                }
                if sync::pending(inner) {
                    sync::flush(inner, &mut conn).await;
                }
                if sessions::pending(inner) {
                    sessions::flush(inner, &mut conn).await;
                }
                sync::trim(inner);
            }
            _ = inner.trouble.notified() => {
                if check(inner, mode, &mut conn, &mut sink).await != Health::Fine {
                    return Ended::Lost("a command failed and the check that followed did too".to_string());
                }
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Health {
    Fine,
    NoAnswer,
    /// Sentinel's primary answers as a replica.
    Demoted,
}

/// One check of a live connection, within `op_timeout`: one server answers PING;
/// Sentinel's primary answers `ROLE` as a primary; in a Cluster the subscribed node
/// answers PING (the Cluster connection reconnects to the others by itself).
async fn check(inner: &Inner, mode: Mode, conn: &mut Conn, sink: &mut PubSubSink) -> Health {
    let limit = inner.cfg.op_timeout;
    match mode {
        Mode::Server => {
            let cmd = redis::cmd("PING");
            let ping = cmd.query_async::<redis::Value>(conn);
            match tokio::time::timeout(limit, ping).await {
                Ok(Ok(_)) => Health::Fine,
                _ => Health::NoAnswer,
            }
        }
        Mode::Sentinel => {
            let cmd = redis::cmd("ROLE");
            let role = cmd.query_async::<redis::Value>(conn);
            match tokio::time::timeout(limit, role).await {
                Ok(Ok(v)) if target::role_is_primary(&v) => Health::Fine,
                Ok(Ok(_)) => Health::Demoted,
                _ => Health::NoAnswer,
            }
        }
        Mode::Cluster => match tokio::time::timeout(limit, sink.ping::<redis::Value>()).await {
            Ok(Ok(_)) => Health::Fine,
            _ => Health::NoAnswer,
        },
    }
}
