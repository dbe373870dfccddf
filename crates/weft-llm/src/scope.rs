//! The scope a model call is opened in: a label its caller sets around
//! [`Provider::stream`](crate::Provider::stream), which a provider that keeps state across calls
//! partitions that state by. The faux provider keeps one script cursor per scope; an agent opens
//! every call of a session (its conversation's, its scratch calls, its graph nodes') in the
//! session's scope. The scope is not part of the [`ModelRequest`](crate::ModelRequest): a model
//! call means the same whatever scope it is made in, and real providers ignore it.
//!
//! A provider reads the scope while `stream` runs ([`current`]), not later from the stream it
//! returns: the scope is the calling thread's for the duration of [`in_scope`] only.

use std::cell::RefCell;
use std::sync::Arc;

thread_local! {
    static CURRENT: RefCell<Option<Arc<str>>> = const { RefCell::new(None) };
}

/// Runs `open` (which opens a model call with [`Provider::stream`](crate::Provider::stream)) in
/// scope `scope`; the scope before it is back when it returns, or unwinds.
pub fn in_scope<T>(scope: &Arc<str>, open: impl FnOnce() -> T) -> T {
    /// Puts the scope before back, even when `open` panics.
    struct Restore(Option<Arc<str>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let previous = self.0.take();
            CURRENT.with(|current| *current.borrow_mut() = previous);
        }
    }
    let previous = CURRENT.with(|current| current.borrow_mut().replace(Arc::clone(scope)));
    let _restore = Restore(previous);
    open()
}

/// The scope the model call being opened is in; `None` outside [`in_scope`].
pub fn current() -> Option<Arc<str>> {
    CURRENT.with(|current| current.borrow().clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_nest_and_end() {
        assert_eq!(current(), None);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        in_scope(&a, || {
            assert_eq!(current().as_deref(), Some("a"));
            in_scope(&b, || assert_eq!(current().as_deref(), Some("b")));
            assert_eq!(current().as_deref(), Some("a"));
        });
        assert_eq!(current(), None);
        let unwound = std::panic::catch_unwind(|| in_scope(&a, || panic!("in the call")));
        assert!(unwound.is_err());
        assert_eq!(current(), None, "a panic inside the scope ends it too");
    }
}
