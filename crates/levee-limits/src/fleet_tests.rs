//! A fleet's node judging the lane by every node's people (people_times.rs, sharing.rs).

use std::time::{Duration, Instant};

use tokio::sync::Notify;

use crate::fleet::{Peer, PeopleTimes, Report};
use crate::tests::{anon, governed, ms, session};

/// Node b's editor has a request in flight, none ended yet; node a's editor's
/// requests are b's evidence too: quick with no lane at work, b judges the lane
/// may hold what it held (two slots); three times slower while a's crawlers only
/// wait, nothing; three times slower beside a's crawlers' pages, b cuts it, as a's
/// own governor does.
#[tokio::test]
async fn a_node_judges_the_lane_by_the_other_nodes_people_too() {
    let l = governed(ms(2000));
    l.join_fleet();
    let _editor = l.acquire(session()).await.unwrap();
    let mut a = PeopleTimes::default();
    // Four more of a's people's requests, each taking `took`.
    let more = |a: &mut PeopleTimes, took: Duration| (0..4).for_each(|_| a.push(took));
    // `anonymous` of a's lane waiting, `running` of them in flight.
    let tell = |a: &PeopleTimes, anonymous: usize, running: usize| {
        let report = Report {
            capacity: 8,
            people: 1,
            anonymous,
            lane_in_flight: running,
            people_times: a.clone(),
            ..Report::default()
        };
        let node = "a".to_string();
        l.apply_fleet(
            "b",
            8,
            vec![Peer {
                node,
                grant: 4,
                report,
            }],
        );
        l.fleet_ask("b").report.lane_milli
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut judged = tell(&a, 0, 0);
    while judged == 0 {
        assert!(Instant::now() < deadline, "no judgment from a's people");
        more(&mut a, ms(40));
        judged = tell(&a, 0, 0);
        tokio::time::sleep(ms(20)).await;
    }
    assert_eq!(judged, 2000, "what the lane held, at least two slots");
    // a's crawlers only wait (its lane at its cap): no load, whatever a's people's
    // times say, for a second and more of them.
    let waiting_until = Instant::now() + Duration::from_millis(1200);
    while Instant::now() < waiting_until {
        more(&mut a, ms(120));
        assert_eq!(tell(&a, 8, 0), 2000, "cut by waiters, not work");
        tokio::time::sleep(ms(20)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    while judged == 2000 {
        assert!(Instant::now() < deadline, "a's slow people did not cut it");
        more(&mut a, ms(120));
        judged = tell(&a, 8, 1);
        tokio::time::sleep(ms(20)).await;
    }
    assert!(judged < 2000, "{judged}");
}

/// Whether `n` was notified (a permit is stored): polled once, never waited on.
async fn notified(n: &Notify) -> bool {
    tokio::time::timeout(Duration::ZERO, n.notified())
        .await
        .is_ok()
}

/// A crawler's request the lane does not admit is demand: the renewal hears of it soon
/// (`fleet_demand`), not at once as of a person's wait (`fleet_wake`): woken at every
/// refusal, each node of a storm renewed about 90 times a second.
#[tokio::test]
async fn a_refusal_wakes_the_fleet_as_demand_and_a_person_waiting_at_once() {
    let l = governed(ms(0));
    l.join_fleet();
    let (wake, demand) = (l.fleet_wake(), l.fleet_demand());
    // Its one slot before the first renewal, to a crawler.
    let _crawling = l.acquire(anon("127.2.0.1")).await.unwrap();
    notified(&wake).await;
    notified(&demand).await;
    assert!(l.acquire(anon("127.3.0.1")).await.is_err());
    assert!(notified(&demand).await, "a refusal is the fleet's to hear");
    assert!(!notified(&wake).await, "a refusal is no person's wait");
    let person = tokio::spawn({
        let l = l.clone();
        async move { l.acquire(session()).await.map(drop) }
    });
    tokio::time::timeout(Duration::from_secs(1), wake.notified())
        .await
        .unwrap();
    person.abort();
}
