//! A request waiting for a backend slot, and what it waits on.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::lane::Grant;
use crate::{Class, Inner};

/// How a request waits for its slot.
pub(crate) enum Wait {
    People(oneshot::Receiver<()>),
    Lane(oneshot::Receiver<Grant>),
}

/// A request in a queue. Dropped without its slot (timed out, or the client left and
/// its future was dropped): a slot granted in the meantime goes back, and its place in
/// the queue is cleared at once, so that the dead never fill the queue.
pub(crate) struct Waiter {
    pub(crate) wait: Wait,
    pub(crate) inner: Arc<Inner>,
    pub(crate) class: Class,
    pub(crate) thread: usize,
    pub(crate) granted: bool,
}

impl Drop for Waiter {
    fn drop(&mut self) {
        self.inner.waiting.fetch_sub(1, Ordering::Relaxed);
        self.inner.stats.queued[self.class.index()].fetch_sub(1, Ordering::Relaxed);
        if self.granted {
            return;
        }
        let got_slot = match &mut self.wait {
            Wait::People(rx) => {
                rx.close();
                rx.try_recv().is_ok()
            }
            Wait::Lane(rx) => {
                rx.close();
                rx.try_recv() == Ok(Grant::Slot)
            }
        };
        if got_slot {
            self.inner
                .release(self.class, self.thread, Duration::from_millis(0));
            return;
        }
        let mut st = self.inner.lock();
        match self.class {
            Class::Anonymous(net) => st.lane.remove_closed(net),
            Class::Session(_) => st.people.remove_closed(self.thread, true),
            Class::Shared => st.people.remove_closed(self.thread, false),
        }
        st.grant(self.thread, self.inner.reserved, &self.inner.lane);
    }
}
