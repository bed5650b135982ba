//! levee's integration tests, one binary (one link) for all: each module starts the real
//! `levee` binary and real servers (origins, php-fpm, Chromium where a page is checked)
//! on ephemeral loopback ports. They wait on levee's own state (its admin listener's
//! counters, `levee_test::Levee::wait_fills_done`), not on time.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod access_log;
mod acme;
mod admission;
mod alone;
mod anonymous;
mod anonymous_sessions;
mod anonymous_ttl;
mod app_pool;
mod apps;
mod caching_fields;
mod claims;
mod coalescing;
mod compression;
mod conformance_freshness;
mod conformance_validation;
mod dashboard;
mod demo;
mod devices;
mod doctor;
mod edits;
mod fleet;
mod frameworks;
mod hostile;
mod http2;
mod http3;
mod lanes;
mod limits;
mod live_streams;
mod metrics;
mod overload;
mod php;
mod proxy;
mod purge;
mod ranges;
mod redis_ha;
mod redis_tls;
mod reload;
mod rfc9111;
mod route_rules;
mod routes;
mod seed_apps;
mod sendfile;
mod sessions;
mod sites;
mod stale;
mod static_files;
mod storage;
mod structure;
mod systemd;
mod tiers;
mod tls;
mod visitor_cookies;
mod websockets;
