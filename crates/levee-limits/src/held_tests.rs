//! The lane while people's latency holds it below its share (governor.rs): what it
//! queues, and what becomes of a waiter whose wait runs out.

use super::tests::{anon, eventually_waiting, governed, ms, session};
use super::*;

/// With people at work and their latency holding the lane below its share, a lane
/// waiter whose wait runs out is refused though slots are free: let in, a storm's
/// waiters came in together beside the editors' requests. With the lane at its share,
/// the same waiter is let in (nothing refused with slots to spare).
#[tokio::test]
async fn a_lane_held_back_for_people_refuses_a_waiter_whose_wait_ran_out() {
    let l = governed(ms(60));
    let _editor = l.acquire(session()).await.unwrap();
    l.inner.lock().governor.set_cap(1.0);
    let _crawler = l.acquire(anon("127.2.0.1")).await.unwrap();
    let r = l.acquire(anon("127.3.0.1")).await;
    assert_eq!(r.err().map(|r| r.why), Some(Refusal::LaneWait));
    assert_eq!(l.in_use(), 2, "6 slots free, and still refused");
    // At its share (4 of 8), the lane's waiter gets a free slot when its wait runs out.
    l.inner.lock().governor.set_cap(f64::MAX);
    let mut lane = Vec::new();
    for i in 0..3 {
        lane.push(
            l.acquire(anon(&format!("127.{}.0.1", i + 4)))
                .await
                .unwrap(),
        );
    }
    let started = Instant::now();
    let late = l.acquire(anon("127.9.0.1")).await;
    assert!(late.is_ok(), "{:?}", late.err().map(|r| r.why));
    assert!(started.elapsed() >= ms(60), "not after its wait");
}

/// While people's latency holds the lane below its share, its queue holds what the lane
/// serves within half its wait, even at the moment the lane opens with a waiter ahead
/// (a rest just ended): queued up to `max_waiting` then, a storm's waiters waited out
/// their 2 s and were refused late.
#[tokio::test]
async fn while_people_hold_the_lane_back_it_queues_only_what_it_serves_in_time() {
    let l = Arc::new(governed(ms(2000)));
    let _editor = l.acquire(session()).await.unwrap();
    let (tx, _ahead) = tokio::sync::oneshot::channel();
    {
        let mut st = l.inner.lock();
        // Cut to 2 slots of its 4, a second a page: 2 waiters are what it serves in 1 s.
        st.governor.set_cap(2.0);
        st.lane.learnt(Duration::from_secs(1));
        let waiter = super::lane::LaneWaiter { thread: 0, tx };
        let net = crate::client_net::ClientNet::of("127.2.0.1".parse().unwrap(), 24, 56);
        st.lane.arrive(net, waiter, 8, 100, false, Instant::now());
    }
    assert!(!l.refuses_now(anon("127.3.0.1")));
    let second = {
        let l = l.clone();
        tokio::spawn(async move { l.acquire(anon("127.3.0.1")).await.is_ok() })
    };
    eventually_waiting(&l, 1).await;
    assert!(l.refuses_now(anon("127.4.0.1")));
    let third = tokio::time::timeout(ms(500), l.acquire(anon("127.4.0.1"))).await;
    assert_eq!(
        third.ok().and_then(|r| r.err()).map(|r| r.why),
        Some(Refusal::LaneFull),
        "not refused at once"
    );
    second.abort();
}

/// The fleet moves its lane's fraction from node to node (fleet.rs): a node given it
/// while its slot rested a floor's rest (nine times its last page) rests only what the
/// fraction's duty asks, and one that lost it rests the floor's. Without this, the
/// fraction sat idle for most of a second each time it moved.
#[test]
fn a_part_the_fleet_moves_moves_the_slots_rest_with_it() {
    let mut g = governor::Governor::new();
    g.set_cap(0.1);
    g.set_fleet(Some(0.1));
    let now = Instant::now();
    g.lane_released(ms(100), now);
    assert!(g.resting(now + ms(899)));
    g.set_fleet(Some(0.5));
    assert!(g.resting(now + ms(99)) && !g.resting(now + ms(101)));
    g.set_fleet(Some(0.1));
    assert!(g.resting(now + ms(899)) && !g.resting(now + ms(901)));
}
