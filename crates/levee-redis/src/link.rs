//! The connection's life, on one task: connect (a multiplexed connection for commands,
//! a second one subscribed to the purge channel), send the bans queued meanwhile, read
//! the bans kept in Redis, and only then say "up". While up: apply the bans heard,
//! send this node's, PING every second. The subscription ending (Redis closed the
//! connection, or was killed), three unanswered PINGs in a row (Redis hung) or a
//! request's failed command that a PING confirms mean "down": requests stop asking
//! Redis at once, and the task reconnects after 1 s, doubling to 30 s. Down and back
//! are each logged once. The task ends when the last `Redis` clone is dropped.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;
use redis::aio::{MultiplexedConnection, PubSubStream};
use tokio::sync::watch;

use crate::inner::Inner;
use crate::{fleet, sessions, sync};

const FIRST_BACKOFF: Duration = Duration::from_secs(1);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// How often a live connection is checked.
const PING_EVERY: Duration = Duration::from_secs(1);
/// Unanswered PINGs in a row that mean Redis is gone.
const PINGS_MISSED: u32 = 3;

/// Why the connection ended.
enum Ended {
    /// The last `Redis` clone was dropped.
    Stop,
    Lost(String),
}

pub(crate) async fn supervise(inner: Arc<Inner>, mut stop: watch::Receiver<()>) {
    let mut backoff = FIRST_BACKOFF;
    // Whether "unreachable" was logged and not yet followed by "reachable again".
    let mut reported = false;
    let mut was_up = false;
    loop {
        let attempt = tokio::select! {
            r = connect(&inner) => r,
            _ = stop.changed() => return,
        };
        match attempt {
            Ok((conn, messages)) => {
                backoff = FIRST_BACKOFF;
                if was_up {
                    inner.stats.reconnect();
                }
                if std::mem::take(&mut reported) {
                    tracing::warn!(redis = %inner.shown, "Redis at {} is reachable again; sharing the cache", inner.shown);
                } else {
                    tracing::info!(redis = %inner.shown, "connected to Redis at {}", inner.shown);
                }
                was_up = true;
                inner.set_conn(Some(conn.clone()));
                let ended = watch_over(&inner, conn, messages, &mut stop).await;
                // Requests stop asking at once (and, on Stop, the connection closes
                // once the last request using it is done).
                inner.set_conn(None);
                match ended {
                    Ended::Stop => return,
                    Ended::Lost(why) => {
                        log_down(&inner, &why);
                        reported = true;
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
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
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
async fn connect(inner: &Inner) -> Result<(MultiplexedConnection, PubSubStream), String> {
    let limit = connect_timeout(inner);
    let steps = async {
        let config = redis::AsyncConnectionConfig::new().set_connection_timeout(Some(limit));
        let mut conn = inner
            .client
            .get_multiplexed_async_connection_with_config(&config)
            .await
            .map_err(|e| e.to_string())?;
        // Subscribed before the kept bans are read: a ban published in between is
        // heard, or read, or both (applied once).
        let mut pubsub = inner
            .client
            .get_async_pubsub()
            .await
            .map_err(|e| e.to_string())?;
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
        Ok((conn, pubsub.into_on_message()))
    };
    tokio::time::timeout(limit, steps)
        .await
        .unwrap_or_else(|_| Err(format!("no answer within {limit:?}")))
}

async fn watch_over(
    inner: &Inner,
    mut conn: MultiplexedConnection,
    mut messages: PubSubStream,
    stop: &mut watch::Receiver<()>,
) -> Ended {
    let mut tick = tokio::time::interval(PING_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut missed = 0;
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
                if ping(inner, &mut conn).await {
                    missed = 0;
                } else {
                    missed += 1;
                    if missed >= PINGS_MISSED {
                        return Ended::Lost(format!("no answer to {missed} PINGs in a row"));
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
                if !ping(inner, &mut conn).await {
                    return Ended::Lost("a command failed and PING had no answer".to_string());
                }
            }
        }
    }
}

async fn ping(inner: &Inner, conn: &mut MultiplexedConnection) -> bool {
    let cmd = redis::cmd("PING");
    let ping = cmd.query_async::<String>(conn);
    matches!(
        tokio::time::timeout(inner.cfg.op_timeout, ping).await,
        Ok(Ok(_))
    )
}
