//! How many WebSockets are open, per client network and in all, and the signal that
//! tells every one of them levee is going away. A WebSocket holds no backend slot (it
//! would hold it for hours): these bounds are its own.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use tokio::sync::watch;

/// Why an upgrade is refused before the backend is asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Full {
    /// This client network has its share open (429).
    Network,
    /// levee has its total open (503).
    Total,
}

/// The open WebSockets of the process.
pub struct Tunnels<K> {
    inner: Arc<Inner<K>>,
}

struct Inner<K> {
    per_network: Mutex<HashMap<K, usize>>,
    open: AtomicUsize,
    opened: AtomicU64,
    going_away: watch::Sender<bool>,
}

impl<K> Clone for Tunnels<K> {
    fn clone(&self) -> Self {
        Tunnels {
            inner: self.inner.clone(),
        }
    }
}

impl<K: Hash + Eq + Clone> Default for Tunnels<K> {
    fn default() -> Self {
        Tunnels {
            inner: Arc::new(Inner {
                per_network: Mutex::new(HashMap::new()),
                open: AtomicUsize::new(0),
                opened: AtomicU64::new(0),
                going_away: watch::channel(false).0,
            }),
        }
    }
}

impl<K: Hash + Eq + Clone> Tunnels<K> {
    /// A place for one more WebSocket from `net`, within `per_network` for it and `total`
    /// for all; held until the [`Open`] is dropped.
    pub fn open(&self, net: K, per_network: usize, total: usize) -> Result<Open<K>, Full> {
        let mut nets = self
            .inner
            .per_network
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if self.inner.open.load(Ordering::Relaxed) >= total {
            return Err(Full::Total);
        }
        let n = nets.entry(net.clone()).or_insert(0);
        if *n >= per_network {
            return Err(Full::Network);
        }
        *n += 1;
        self.inner.open.fetch_add(1, Ordering::Relaxed);
        self.inner.opened.fetch_add(1, Ordering::Relaxed);
        Ok(Open {
            inner: self.inner.clone(),
            net,
        })
    }

    /// WebSockets open now.
    pub fn count(&self) -> usize {
        self.inner.open.load(Ordering::Relaxed)
    }

    /// WebSockets opened since start.
    pub fn opened(&self) -> u64 {
        self.inner.opened.load(Ordering::Relaxed)
    }

    /// Tells every open WebSocket that levee stops: each gets `1001 Going Away`.
    pub fn go_away(&self) {
        self.inner.going_away.send_replace(true);
    }

    /// Completes when [`Tunnels::go_away`] is called.
    pub fn going_away(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let mut rx = self.inner.going_away.subscribe();
        async move {
            let _ = rx.wait_for(|g| *g).await;
        }
    }

    /// Waits until no WebSocket is open (after [`Tunnels::go_away`]), at most `within`.
    pub async fn closed(&self, within: std::time::Duration) {
        let _ = tokio::time::timeout(within, async {
            while self.count() > 0 {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        })
        .await;
    }
}

/// One open WebSocket's place.
pub struct Open<K: Hash + Eq> {
    inner: Arc<Inner<K>>,
    net: K,
}

impl<K: Hash + Eq> Drop for Open<K> {
    fn drop(&mut self) {
        let mut nets = self
            .inner
            .per_network
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = nets.get_mut(&self.net) {
            *n -= 1;
            if *n == 0 {
                nets.remove(&self.net);
            }
        }
        self.inner.open.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_per_network_and_in_all() {
        let t: Tunnels<u8> = Tunnels::default();
        let a1 = t.open(1, 2, 3).unwrap();
        let _a2 = t.open(1, 2, 3).unwrap();
        assert_eq!(t.open(1, 2, 3).err(), Some(Full::Network));
        let _b1 = t.open(2, 2, 3).unwrap();
        assert_eq!(t.open(3, 2, 3).err(), Some(Full::Total));
        drop(a1);
        assert_eq!(t.count(), 2);
        let _a3 = t.open(1, 2, 3).unwrap();
        assert_eq!(t.opened(), 4);
    }
}
