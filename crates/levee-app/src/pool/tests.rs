use super::*;

fn instance(pid: u32) -> Arc<Instance> {
    Arc::new(Instance::new(SocketAddr::from(([127, 0, 0, 1], 1)), pid, 1))
}

/// A pool of one slot serving `inst`, without a supervisor or a process.
fn pool_of(inst: &Arc<Instance>) -> Pool {
    let slot = Arc::new(Slot {
        index: 0,
        current: Mutex::new(Some(inst.clone())),
        restarts: AtomicU64::new(0),
        recycled: AtomicU64::new(0),
        served: AtomicU64::new(0),
        replace: AtomicBool::new(false),
    });
    Pool {
        slots: vec![slot],
        next: Default::default(),
        concurrency: 1,
        ready_timeout: Duration::from_secs(1),
        changed: Arc::new(Notify::new()),
        stop: watch::channel(false).0,
        thread: Mutex::new(None),
        _watcher: None,
    }
}

/// A request that picked a process just before its recycle published the
/// replacement must not claim the old one, whose drain may already be stopping it
/// (a 502 during a rolling restart).
#[test]
fn a_process_replaced_between_the_pick_and_the_claim_is_not_leased() {
    let old = instance(1);
    let pool = pool_of(&old);
    let (slot, picked) = pool.least_busy().expect("the old process is ready");
    assert_eq!(picked.pid, 1);
    slot.publish(Some(instance(2)));
    assert!(pool.claim(slot, picked).is_none());
    assert_eq!(
        old.in_flight.load(Ordering::Acquire),
        0,
        "the claim is given back"
    );
    let lease = pool.try_lease().expect("the replacement is leased");
    assert_eq!(lease.pid(), 2);
}

#[test]
fn a_withdrawn_process_is_not_leased() {
    let inst = instance(1);
    let pool = pool_of(&inst);
    let (slot, picked) = pool.least_busy().expect("ready");
    slot.withdraw(&inst);
    assert!(pool.claim(slot, picked).is_none());
    assert!(pool.try_lease().is_none());
    assert_eq!(inst.in_flight.load(Ordering::Acquire), 0);
}
