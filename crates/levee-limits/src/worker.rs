//! Which of `levee serve`'s worker threads runs the caller, for state kept per worker
//! (the backend connection pools). Its own module so that the backend client does not
//! depend on the server that drives it.

use std::cell::Cell;

thread_local! {
    static WORKER_ID: Cell<usize> = const { Cell::new(0) };
}

/// This thread's worker index; 0 outside `levee serve`'s workers.
pub fn id() -> usize {
    WORKER_ID.with(|w| w.get())
}

/// Called once by each worker thread when it starts.
pub fn set_id(i: usize) {
    WORKER_ID.with(|w| w.set(i));
}
