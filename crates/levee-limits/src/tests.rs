use super::governor::WINDOW as GOVERNOR_WINDOW;
use super::gradient::{MIN_SAMPLES, WINDOW};
use super::*;

pub(super) fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn reserved_share() {
    assert_eq!(reserved_slots(1, 0.25), 0);
    assert_eq!(reserved_slots(2, 0.25), 1);
    assert_eq!(reserved_slots(4, 0.25), 1);
    assert_eq!(reserved_slots(5, 0.25), 2);
    assert_eq!(reserved_slots(64, 0.25), 16);
    assert_eq!(reserved_slots(4, 1.0), 3);
    assert_eq!(reserved_slots(64, 0.0), 0);
}

/// Feeds `windows` windows of requests taking `rtt` with `used` in flight.
fn run(g: &mut Gradient, windows: usize, rtt: Duration, used: usize, now: &mut Instant) {
    for _ in 0..windows {
        for _ in 0..MIN_SAMPLES {
            g.sample(rtt, used, *now);
        }
        *now += WINDOW;
        g.sample(rtt, used, *now);
    }
}

#[test]
fn a_steady_busy_backend_lets_the_limit_grow() {
    let mut g = Gradient::new(10, 2, 100);
    let mut now = Instant::now();
    run(&mut g, 50, ms(20), 100, &mut now);
    assert!(g.limit > 50.0, "{}", g.limit);
}

#[test]
fn a_slowing_backend_gets_fewer_requests() {
    let mut g = Gradient::new(40, 2, 100);
    let mut now = Instant::now();
    run(&mut g, 20, ms(20), 40, &mut now);
    let before = g.limit;
    // The backend queues inside: the same work takes five times as long.
    run(&mut g, 20, ms(100), 40, &mut now);
    assert!(g.limit < before / 2.0, "{before} -> {}", g.limit);
    assert!(g.limit >= 2.0);
}

#[test]
fn a_few_slow_answers_do_not_bring_the_limit_down() {
    let mut g = Gradient::new(40, 2, 100);
    let mut now = Instant::now();
    run(&mut g, 20, ms(20), 40, &mut now);
    let before = g.limit;
    // Each window: three answers of 3 s (deliberately slow pages) among nine of 20 ms.
    for _ in 0..20 {
        for i in 0..12 {
            let rtt = if i % 4 == 0 { ms(3000) } else { ms(20) };
            g.sample(rtt, 40, now);
        }
        now += WINDOW;
        g.sample(ms(20), 40, now);
    }
    assert!(g.limit >= before, "{before} -> {}", g.limit);
}

/// A backend of `workers` that each take `service`: what `in_flight` requests at once
/// take (queued inside beyond its workers).
fn backend(workers: usize, service: Duration, in_flight: usize) -> Duration {
    service.mul_f64((in_flight as f64 / workers as f64).max(1.0))
}

/// Windows of a storm that always wants more than the limit given out.
fn storm(g: &mut Gradient, windows: usize, workers: usize, service: Duration, now: &mut Instant) {
    for _ in 0..windows {
        // What the limiter lets in: the estimate, or fewer while probing.
        let used = g.probe().unwrap_or(g.current());
        let rtt = backend(workers, service, used);
        for _ in 0..MIN_SAMPLES {
            g.sample(rtt, used, *now);
        }
        *now += WINDOW;
        g.sample(rtt, used, *now);
    }
}

#[test]
fn the_limit_finds_the_knee_of_a_backend_kept_busy() {
    // php-fpm's 4 children behind nginx: levee cannot read their number.
    for initial in [2, 16, 64] {
        let mut g = Gradient::new(initial, 2, 256);
        let mut now = Instant::now();
        storm(&mut g, 600, 4, ms(50), &mut now);
        let settled: Vec<usize> = (0..100)
            .map(|_| {
                storm(&mut g, 1, 4, ms(50), &mut now);
                g.limit.round() as usize
            })
            .collect();
        let most = settled.iter().max().copied().unwrap_or(0);
        let least = settled.iter().min().copied().unwrap_or(0);
        assert!(
            (4..=7).contains(&least) && most <= 7,
            "from {initial}: the limit moved within {least}..={most}, for 4 workers"
        );
    }
}

#[test]
fn a_backend_slow_for_good_gets_its_limit_back() {
    let mut g = Gradient::new(16, 2, 256);
    let mut now = Instant::now();
    storm(&mut g, 300, 4, ms(20), &mut now);
    // Every page takes four times as long from now on (a bigger database): the backend
    // still runs 4 at once.
    storm(&mut g, 20, 4, ms(80), &mut now);
    assert!(g.limit <= 6.0, "slower: {}", g.limit);
    storm(&mut g, 400, 4, ms(80), &mut now);
    assert!(g.limit >= 4.0, "taken as it is: {}", g.limit);
}

#[test]
fn an_idle_limit_does_not_grow_and_comes_down_toward_what_is_used() {
    let mut g = Gradient::new(20, 2, 100);
    let mut now = Instant::now();
    run(&mut g, 50, ms(20), 3, &mut now);
    assert_eq!(
        g.limit, 8.0,
        "twice what is used, not below a usual backend's size"
    );
    // Load: it grows back within a couple of seconds while the backend keeps up.
    run(&mut g, 20, ms(20), 100, &mut now);
    assert!(g.limit >= 16.0, "{}", g.limit);
}

#[tokio::test]
async fn resizing_keeps_slots_in_step_with_the_limit() {
    let l = Limiter::new(
        Mode::Adaptive {
            initial: 4,
            min: 1,
            max: 8,
        },
        0.0,
        0,
        ms(10),
        LaneConfig::OPEN,
    );
    let a = l.acquire(Class::Shared).await.unwrap();
    let b = l.acquire(Class::Shared).await.unwrap();
    // Down to 1 while two are out: both must come back before a new one goes.
    l.inner.resize(1, None, 0);
    assert!(l.acquire(Class::Shared).await.is_err());
    drop(a);
    assert!(l.acquire(Class::Shared).await.is_err(), "one still out");
    drop(b);
    let _c = l.acquire(Class::Shared).await.unwrap();
    assert!(l.acquire(Class::Shared).await.is_err(), "the limit is 1");
    l.inner.resize(3, None, 0);
    let _d = l.acquire(Class::Shared).await.unwrap();
    let _e = l.acquire(Class::Shared).await.unwrap();
    assert!(l.acquire(Class::Shared).await.is_err());
    assert_eq!(l.in_use(), 3);
}

/// Four slots, all busy with anonymous work and a queue of it: a session's request
/// gets the next slot that frees, ahead of the anonymous queue.
#[tokio::test]
async fn a_freed_slot_goes_to_a_waiting_session_first() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(4),
        0.25,
        100,
        Duration::from_secs(5),
        LaneConfig::OPEN,
    ));
    let mut busy = Vec::new();
    for _ in 0..4 {
        busy.push(l.acquire(Class::Shared).await.unwrap());
    }
    let queued: Vec<_> = (0..3)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.acquire(Class::Shared).await.map(|_| Instant::now()) })
        })
        .collect();
    while l.waiting() < 3 {
        tokio::task::yield_now().await;
    }
    let editor = {
        let l = l.clone();
        tokio::spawn(async move { l.acquire(session()).await.map(|s| (Instant::now(), s)) })
    };
    while l.waiting() < 4 {
        tokio::task::yield_now().await;
    }
    busy.pop();
    let (editor_at, slot) = editor.await.unwrap().unwrap();
    drop((busy, slot));
    for q in queued {
        let at = q.await.unwrap().unwrap();
        assert!(editor_at <= at, "an anonymous request went first");
    }
    // Anonymous work alone may use every slot: nothing idles for sessions.
    let all: Vec<_> = futures_take(&l, Class::Shared, 4).await;
    assert_eq!(all.len(), 4);
}

#[tokio::test]
async fn a_waiter_that_times_out_gives_its_slot_back() {
    let l = Limiter::new(Mode::Fixed(1), 0.0, 10, ms(20), LaneConfig::OPEN);
    let a = l.acquire(Class::Shared).await.unwrap();
    assert!(l.acquire(Class::Shared).await.is_err(), "timed out");
    drop(a);
    let _b = l.acquire(Class::Shared).await.unwrap();
    assert_eq!(l.waiting(), 0);
}

/// Clients that leave while queued (their futures dropped, as hyper does when a
/// connection closes) leave nothing behind: no place in the queue, no slot.
#[tokio::test]
async fn abandoned_waiters_do_not_clog_the_queue() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(2),
        0.0,
        4,
        Duration::from_secs(30),
        LaneConfig::OPEN,
    ));
    let a = l.acquire(Class::Shared).await.unwrap();
    let b = l.acquire(Class::Shared).await.unwrap();
    let queued: Vec<_> = (0..4)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.acquire(Class::Shared).await.is_ok() })
        })
        .collect();
    while l.waiting() < 4 {
        tokio::task::yield_now().await;
    }
    for q in &queued {
        q.abort();
    }
    for q in queued {
        let _ = q.await;
    }
    assert_eq!(l.waiting(), 0);
    drop((a, b));
    assert_eq!(l.in_use(), 0);
    // The queue has room and both slots are free again.
    let _c = l.acquire(Class::Shared).await.unwrap();
    let _d = l.acquire(Class::Shared).await.unwrap();
    assert_eq!(l.inner.lock().people.queued(), 0);
}

/// Queues `priority` on `thread` in a task; resolves to when it got its slot.
async fn queue_on(
    l: &Arc<Limiter>,
    thread: usize,
    priority: Class,
) -> tokio::task::JoinHandle<Result<(Instant, BackendSlot), Refused>> {
    let before = l.waiting();
    let task = {
        let l = l.clone();
        tokio::spawn(async move {
            l.acquire_on(thread, priority)
                .await
                .map(|s| (Instant::now(), s))
        })
    };
    while l.waiting() == before {
        tokio::task::yield_now().await;
    }
    task
}

/// A slot freed on a worker thread goes to that thread's waiter, even one that came
/// later than another thread's, while the thread holds no more than its share.
#[tokio::test]
async fn a_freed_slot_stays_on_its_thread() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(2),
        0.0,
        10,
        Duration::from_secs(5),
        LaneConfig::OPEN,
    ));
    let on0 = l.acquire_on(0, Class::Shared).await.unwrap();
    let on1 = l.acquire_on(1, Class::Shared).await.unwrap();
    let first = queue_on(&l, 1, Class::Shared).await;
    let second = queue_on(&l, 0, Class::Shared).await;
    drop(on0);
    let (_, s0) = second.await.unwrap().unwrap();
    assert_eq!(s0.thread, 0);
    assert!(!first.is_finished());
    drop(on1);
    let (_, s1) = first.await.unwrap().unwrap();
    assert_eq!(s1.thread, 1);
}

/// A thread holding every slot does not keep them for its own queue: beyond its
/// fair share, a freed slot goes to the oldest waiter anywhere.
#[tokio::test]
async fn a_busy_thread_does_not_starve_another() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(2),
        0.0,
        10,
        Duration::from_secs(5),
        LaneConfig::OPEN,
    ));
    let mut mine = vec![
        l.acquire_on(0, Class::Shared).await.unwrap(),
        l.acquire_on(0, Class::Shared).await.unwrap(),
    ];
    let remote = queue_on(&l, 1, Class::Shared).await;
    let local = queue_on(&l, 0, Class::Shared).await;
    mine.pop();
    let (_, s) = remote.await.unwrap().unwrap();
    assert_eq!(s.thread, 1, "the other thread's older waiter goes first");
    assert!(!local.is_finished());
    mine.pop();
    let (_, s) = local.await.unwrap().unwrap();
    assert_eq!(s.thread, 0);
}

/// The sessions' share comes before keeping slots on their thread.
#[tokio::test]
async fn a_session_on_another_thread_comes_before_local_anonymous_work() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(4),
        0.25,
        10,
        Duration::from_secs(5),
        LaneConfig::OPEN,
    ));
    let mut mine = Vec::new();
    for _ in 0..4 {
        mine.push(l.acquire_on(0, Class::Shared).await.unwrap());
    }
    let local = queue_on(&l, 0, Class::Shared).await;
    let editor = queue_on(&l, 1, session()).await;
    mine.pop();
    let (_, s) = editor.await.unwrap().unwrap();
    assert_eq!(s.thread, 1);
    assert!(!local.is_finished());
    drop(mine);
    assert!(local.await.unwrap().is_ok());
}

async fn futures_take(l: &Limiter, p: Class, n: usize) -> Vec<BackendSlot> {
    let mut v = Vec::new();
    for _ in 0..n {
        if let Ok(s) = l.acquire(p).await {
            v.push(s);
        }
    }
    v
}

fn session_of() -> super::SessionOf {
    super::SessionOf {
        net: crate::client_net::ClientNet::of("127.1.0.1".parse().unwrap(), 24, 56),
        who: 1,
    }
}

pub(super) fn session() -> Class {
    Class::Session(session_of())
}

pub(super) fn anon(addr: &str) -> Class {
    Class::Anonymous(crate::client_net::ClientNet::of(
        addr.parse().unwrap(),
        24,
        56,
    ))
}

/// A limiter of 8 slots, its lane governed (half of them), people lingering 5 s.
pub(super) fn governed(wait: Duration) -> Limiter {
    Limiter::new(
        Mode::Fixed(8),
        0.0,
        100,
        ms(5000),
        LaneConfig {
            people_linger: ms(5000),
            governed: true,
            ..lanes(0.5, 1.0, wait)
        },
    )
}

pub(super) fn lanes(share: f64, network_share: f64, wait: Duration) -> LaneConfig {
    LaneConfig {
        share,
        network_share,
        wait,
        people_linger: Duration::ZERO,
        governed: false,
    }
}

#[tokio::test]
async fn the_lane_keeps_to_its_share_while_people_work() {
    let l = Limiter::new(
        Mode::Fixed(4),
        0.25,
        100,
        ms(2000),
        lanes(0.5, 1.0, ms(2000)),
    );
    // Nobody else has work: the lane may take it all.
    let mut crawl = Vec::new();
    for i in 0..4 {
        crawl.push(
            l.acquire(anon(&format!("127.{}.0.1", i + 2)))
                .await
                .unwrap(),
        );
    }
    crawl.truncate(2);
    // An editor starts: from now on the lane keeps to 2 of 4.
    let editor = l.acquire(session()).await.unwrap();
    let blocked = l.acquire(anon("127.9.0.1"));
    let got = tokio::time::timeout(ms(50), blocked).await;
    assert!(got.is_err(), "the lane took a third slot while people work");
    drop(editor);
    // People done (no linger here): the lane may have the rest again.
    let _third = l.acquire(anon("127.9.0.1")).await.unwrap();
    let _fourth = l.acquire(anon("127.10.0.1")).await.unwrap();
}

#[tokio::test]
async fn a_freed_slot_goes_to_people_before_the_lane() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(2),
        0.0,
        100,
        ms(5000),
        lanes(1.0, 1.0, ms(5000)),
    ));
    let a = l.acquire(anon("127.2.0.1")).await.unwrap();
    let _b = l.acquire(anon("127.3.0.1")).await.unwrap();
    let crawler = {
        let l = l.clone();
        tokio::spawn(async move {
            l.acquire(anon("127.4.0.1"))
                .await
                .map(|s| (Instant::now(), s))
        })
    };
    tokio::task::yield_now().await;
    let reval = {
        let l = l.clone();
        tokio::spawn(async move { l.acquire(Class::Shared).await.map(|s| (Instant::now(), s)) })
    };
    eventually_waiting(&l, 2).await;
    drop(a);
    let (when, _slot) = reval.await.unwrap().unwrap();
    assert!(
        tokio::time::timeout(ms(30), crawler).await.is_err(),
        "the crawler got the slot too ({when:?})"
    );
}

#[tokio::test]
async fn a_network_keeps_to_its_share_while_others_wait_then_429_at_once() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(4),
        0.0,
        100,
        ms(5000),
        lanes(1.0, 0.25, ms(5000)),
    ));
    // Alone, one network may use the whole backend.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(l.acquire(anon("127.2.0.1")).await.unwrap());
    }
    let queue = |addr: &'static str| {
        let l = l.clone();
        tokio::spawn(async move { l.acquire(anon(addr)).await.map(|s| (Instant::now(), s)) })
    };
    let crawler = queue("127.2.0.9");
    eventually_waiting(&l, 1).await;
    let reader = queue("127.3.0.1");
    eventually_waiting(&l, 2).await;
    // Another network waits: the crawler's network has its share waiting; refused.
    let started = Instant::now();
    let r = l.acquire(anon("127.2.0.200")).await;
    assert_eq!(r.err().map(|r| r.why), Some(Refusal::NetworkOverShare));
    assert!(
        started.elapsed() < ms(20),
        "not at once: {:?}",
        started.elapsed()
    );
    // A freed slot goes to the network below its share, though it came later.
    held.pop();
    let (_, reader_slot) = reader.await.unwrap().unwrap();
    assert!(
        tokio::time::timeout(ms(30), crawler).await.is_err(),
        "the crawler's network, over its share, was served first"
    );
    drop(reader_slot);
    assert_eq!(
        l.stats().refused[Refusal::NetworkOverShare as usize].load(Ordering::Relaxed),
        1
    );
}

#[tokio::test]
async fn a_lane_waiter_is_refused_after_its_wait() {
    let l = Limiter::new(Mode::Fixed(1), 0.0, 100, ms(5000), lanes(1.0, 1.0, ms(30)));
    let _a = l.acquire(anon("127.2.0.1")).await.unwrap();
    let r = l.acquire(anon("127.3.0.1")).await;
    assert_eq!(r.err().map(|r| r.why), Some(Refusal::LaneWait));
    assert_eq!(l.waiting(), 0);
}

pub(super) async fn eventually_waiting(l: &Limiter, n: usize) {
    for _ in 0..500 {
        if l.waiting() >= n {
            return;
        }
        tokio::time::sleep(ms(2)).await;
    }
    panic!("{} waiting, not {n}", l.waiting());
}

#[tokio::test]
async fn the_lane_keeps_to_its_share_a_while_after_people_left() {
    let l = Limiter::new(
        Mode::Fixed(2),
        0.0,
        100,
        ms(2000),
        LaneConfig {
            people_linger: ms(60),
            ..lanes(0.5, 1.0, ms(2000))
        },
    );
    drop(l.acquire(Class::Shared).await.unwrap());
    let _a = l.acquire(anon("127.2.0.1")).await.unwrap();
    // Within the linger the second slot stays free for the next reader or editor.
    let started = Instant::now();
    let _b = l.acquire(anon("127.3.0.1")).await.unwrap();
    assert!(started.elapsed() >= ms(40), "{:?}", started.elapsed());
}

#[tokio::test]
async fn a_session_beyond_its_share_is_anonymous_work_of_its_network() {
    let l = Limiter::new(
        Mode::Fixed(8),
        0.25,
        100,
        ms(2000),
        lanes(0.5, 0.25, ms(2000)),
    );
    // One session holds two slots of the session class at most.
    let held = [
        l.acquire(session()).await.unwrap(),
        l.acquire(session()).await.unwrap(),
    ];
    let third = l.acquire(session()).await.unwrap();
    let stats = l.stats();
    assert_eq!(stats.over_share.load(Ordering::Relaxed), 1);
    assert_eq!(stats.in_flight[1].load(Ordering::Relaxed), 2, "session");
    assert_eq!(stats.in_flight[2].load(Ordering::Relaxed), 1, "anonymous");
    // While it has a request beyond its share (a script, not a page load), its share is
    // one slot: with one of its two back, the next is still anonymous work.
    let [first, second] = held;
    drop(first);
    let fourth = l.acquire(session()).await.unwrap();
    assert_eq!(stats.over_share.load(Ordering::Relaxed), 2);
    drop((fourth, third));
    // No overflow left, and none lately: two again.
    l.inner.lock().people.overflow.forget_recent();
    let again = l.acquire(session()).await.unwrap();
    assert_eq!(stats.in_flight[1].load(Ordering::Relaxed), 2, "session");
    drop((second, again));
    // Another session of the same network: the network's share is free again.
    let other = Class::Session(super::SessionOf {
        net: crate::client_net::ClientNet::of("127.1.0.9".parse().unwrap(), 24, 56),
        who: 2,
    });
    let _s = l.acquire(other).await.unwrap();
    assert_eq!(stats.in_flight[1].load(Ordering::Relaxed), 1);
}

/// A session replayed by 16 connections while the backend is full: its requests that
/// wait for a slot are part of its share, so a page load's worth (six) queue as a
/// person's and the others go to the lane (before, all 16 queued as a person's while it
/// held none yet, and took slot after slot as they freed).
#[tokio::test]
async fn a_sessions_waiting_requests_count_in_its_share() {
    let l = Arc::new(Limiter::new(
        Mode::Fixed(1),
        0.0,
        100,
        ms(2000),
        lanes(1.0, 1.0, ms(2000)),
    ));
    let full = l.acquire(Class::Shared).await.unwrap();
    let replay: Vec<_> = (0..16)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move { l.acquire(session()).await.map(drop) })
        })
        .collect();
    let stats = l.stats();
    let arrived = || {
        stats.over_share.load(Ordering::Relaxed) as usize + stats.queued[1].load(Ordering::Relaxed)
    };
    while arrived() < 16 {
        tokio::task::yield_now().await;
    }
    assert_eq!(
        stats.queued[1].load(Ordering::Relaxed),
        6,
        "a person's: six"
    );
    assert_eq!(
        stats.over_share.load(Ordering::Relaxed),
        10,
        "the lane: the rest"
    );
    drop(full);
    for r in replay {
        let _ = r.await.unwrap();
    }
}

/// A session sending far beyond its share (a script, a replay) is not people: its
/// requests' times do not judge the lane (a replay through a node without editors set
/// that node's lane by the replay's own pages).
#[tokio::test]
async fn a_scripted_sessions_times_are_not_peoples() {
    let l = Limiter::new(
        Mode::Fixed(16),
        0.0,
        100,
        ms(2000),
        lanes(0.5, 1.0, ms(2000)),
    );
    // The governor judges a window once it has lasted WINDOW (its clock is the real
    // one) and holds MIN_SAMPLES of people's times.
    let start = Instant::now();
    while start.elapsed() <= GOVERNOR_WINDOW {
        tokio::time::sleep(ms(20)).await;
    }
    let replayed = [
        l.acquire(session()).await.unwrap(),
        l.acquire(session()).await.unwrap(),
    ];
    let mut beyond = Vec::new();
    for _ in 0..=super::people::PAGE_LOAD_OVERFLOW {
        beyond.push(l.acquire(session()).await.unwrap());
    }
    assert!(l.inner.lock().people.scripted(session_of()));
    drop(replayed);
    // A person's two.
    let person = Class::Session(super::SessionOf {
        net: crate::client_net::ClientNet::of("127.1.0.9".parse().unwrap(), 24, 56),
        who: 2,
    });
    for _ in 0..2 {
        drop(l.acquire(person).await.unwrap());
    }
    assert_eq!(
        l.inner.lock().governor.own(8),
        None,
        "two people's times are no window; the replay's two were not counted"
    );
}
