//! Holdpoint integration tests: real nats-server processes started per test on free
//! ports with temporary stores (see `holdpoint_tests::nats`), the real ingress over
//! HTTP, real workers (in-process or as child processes a test can SIGKILL).

mod a2a;
mod a2a_conformance;
mod adversary;
mod answers;
mod atomic;
mod auth;
mod backup;
mod batch;
mod clocks;
mod cluster;
mod common;
mod compat;
mod deadlines;
mod disk;
mod docs;
mod edges;
mod edits;
mod effects;
mod exactly_once;
mod fault_suite;
mod faults;
mod forms;
mod hostile;
mod hostile_fuzz;
mod inbox_facts;
mod migrate;
mod nats_permissions;
mod observability;
mod openapi_fuzz;
mod operator;
mod partition;
mod product;
mod remembered;
mod rpc;
mod schemas;
mod seen;
mod shutdown;
mod skew;
mod streams;
mod task_view;
mod text;
mod upgrades;
mod vectors;
mod webhooks;
