//! Holdpoint integration tests: real nats-server processes started per test on free
//! ports with temporary stores (see `holdpoint_tests::nats`), the real ingress over
//! HTTP, real workers (in-process or as child processes a test can SIGKILL).

mod a2a;
mod answers;
mod auth;
mod common;
mod compat;
mod docs;
mod exactly_once;
mod faults;
mod nats_permissions;
mod product;
mod streams;
