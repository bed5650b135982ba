//! The connection commands go through: to one server (a single Redis, or the primary
//! Sentinel names), or to a Redis Cluster (redis-rs's cluster connection, which routes
//! each command by its key's slot and follows MOVED and ASK). Everything above this
//! file speaks [`Conn`] and never asks which.

use redis::aio::{ConnectionLike, MultiplexedConnection};
use redis::cluster_async::ClusterConnection;
use redis::{Cmd, Pipeline, RedisFuture, Value};

#[derive(Clone)]
pub(crate) enum Conn {
    /// One server: a single Redis, or Sentinel's primary.
    One(MultiplexedConnection),
    /// A Redis Cluster. A pipeline must stay within one slot (levee's keys put a
    /// record's parts under one hash tag; see keys.rs).
    Cluster(ClusterConnection),
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::One(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::One(c) => c.req_packed_commands(cmd, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::One(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}
