//! Shared test support for Holdpoint's crates: helpers that start real
//! `nats-server` processes (single JetStream servers and 3-node clusters on
//! loopback) so tests run against the broker Holdpoint uses in production.
//! The server binary comes from `ops/setup.sh` (see [`nats::nats_server_binary`]).
//! [`app`] runs a whole Holdpoint (ingress, workers) on such a server; [`jwt`] is a
//! test identity provider (keys, a JWKS HTTP server, tokens). [`chaos`] is the load,
//! fault injection and invariant check of the fault suite and the soak, [`load`]
//! the targets, jobs and results it passes around; [`readers`] are the live event
//! readers (core subscriber, durable consumer) those runs check for duplicates and
//! effect delays; [`copies`] counts each stored effect's copies in the public
//! streams.
//!
//! The partition harness: [`lab`] makes network namespaces on one bridge (allow
//! list, nft cuts), [`linkem`] degrades links in userspace, [`netcluster`] runs a
//! whole Holdpoint across the lab, [`partition`] drives a seeded fault schedule
//! under load and records a [`history::History`], which [`history::check`] judges.

pub mod app;
pub mod chaos;
pub mod copies;
pub mod history;
pub mod jwt;
pub mod lab;
pub mod linkem;
pub mod load;
pub mod nats;
pub mod netcluster;
pub mod partition;
pub mod readers;
