//! Cost per tenant: what one organisation's reads cost the servers every
//! organisation shares.
//!
//! - 200 audit pages read at once by one organisation's people make at most
//!   [`holdpoint_bus::STORED_READERS`] consumers on the audit stream at any
//!   moment (counted from the stream's `consumer_count` while they run), and
//!   every one of them is answered.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use holdpoint_tests::app::TestApp;

use crate::common::*;

#[tokio::test]
async fn many_audit_readers_at_once_share_a_bounded_set_of_consumers() {
    let app = TestApp::start().await;
    let rt = app.runtime("acme").await;
    // Something to read: a decided approval is audited.
    let (_, denied) = open_approval(&rt).await;
    let r = app
        .person("acme", "ana")
        .post(
            &format!("/v1/interactions/{denied}/approve"),
            &serde_json::json!({"approved": false, "reason": "not today"}),
        )
        .await;
    assert_eq!(r.status, 204, "{r:?}");
    app.wait_sourced().await;
    let js = app.bus.js.clone();
    let audit = app.bus.topo.audit_stream();
    let consumers = |js: async_nats::jetstream::Context, audit: String| async move {
        let mut s = js.get_stream(&audit).await.expect("audit stream");
        s.info()
            .await
            .expect("audit stream info")
            .state
            .consumer_count
    };
    let before = consumers(js.clone(), audit.clone()).await;

    // The sampler reads the count as fast as the server answers, for as long
    // as the readers run. A round whose reads were too quick for it to see
    // any consumer proves nothing, so rounds go on until one was seen.
    let most = Arc::new(AtomicUsize::new(0));
    for _round in 0..10 {
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = tokio::spawn({
            let (js, audit, most, stop) = (js.clone(), audit.clone(), most.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::SeqCst) {
                    let n = consumers(js.clone(), audit.clone()).await;
                    most.fetch_max(n.saturating_sub(before), Ordering::SeqCst);
                }
            }
        });
        let readers: Vec<_> = (0..200)
            .map(|i| {
                let person = app.person("acme", &format!("reader-{i}"));
                tokio::spawn(async move { person.get("/v1/audit?after=0&limit=50").await })
            })
            .collect();
        for r in readers {
            let reply = r.await.expect("reader task");
            assert_eq!(reply.status, 200, "{reply:?}");
            assert!(
                !reply.body["items"].as_array().expect("items").is_empty(),
                "an audit page without the approval's record: {reply:?}"
            );
        }
        stop.store(true, Ordering::SeqCst);
        sampler.await.expect("sampler");
        if most.load(Ordering::SeqCst) > 0 {
            break;
        }
    }
    let most = most.load(Ordering::SeqCst);
    assert!(most > 0, "the sampler never saw a reader's consumer");
    assert!(
        most <= holdpoint_bus::STORED_READERS,
        "{most} consumers on {audit} at once for 200 readers (bound {})",
        holdpoint_bus::STORED_READERS
    );
    println!("200 audit readers: at most {most} consumers at once");
}
