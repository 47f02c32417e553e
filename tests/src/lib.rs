//! Shared test support for Holdpoint's crates: helpers that start real
//! `nats-server` processes (single JetStream servers and 3-node clusters on
//! loopback) so tests run against the broker Holdpoint uses in production.
//! The server binary comes from `ops/setup.sh` (see [`nats::nats_server_binary`]).

pub mod nats;
