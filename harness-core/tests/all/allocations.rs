//! Counting the bytes a piece of code allocates on its thread, for tests that bound them.
//!
//! The test binary's global allocator is the system allocator with a count: only while
//! [`counted`] runs, only on its thread (tests run in parallel on other threads, uncounted).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static BYTES: Cell<u64> = const { Cell::new(0) };
}

/// The system allocator, counting the bytes requested on threads that asked for it.
pub(crate) struct CountingAllocator;

fn count(bytes: usize) {
    // `try_with`: a thread being torn down has no counter any more (and counts nothing).
    let counting = COUNTING.try_with(Cell::get).unwrap_or(false);
    if counting {
        let _ = BYTES.try_with(|total| total.set(total.get() + bytes as u64));
    }
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract is `System`'s; counting touches only const-initialized thread-locals
// without destructors, which allocate nothing.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from `System` with this layout (every allocation goes through it).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size());
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size);
        // SAFETY: `ptr` came from `System` with `layout`; the caller guarantees `new_size`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `work` and returns what it returned with the bytes it allocated on this thread.
pub(crate) fn counted<R>(work: impl FnOnce() -> R) -> (R, u64) {
    BYTES.with(|total| total.set(0));
    COUNTING.with(|on| on.set(true));
    let result = work();
    COUNTING.with(|on| on.set(false));
    (result, BYTES.with(Cell::get))
}
