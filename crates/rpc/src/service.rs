//! What a server serves: the [`Service`] trait (the byte API), the per-call
//! [`CallContext`], and [`Handlers`], a service made of closures.
//!
//! Typed services come from the [`crate::service!`] macro, which implements
//! [`Service`] over the serde codec.

use crate::status::Status;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// Where a method's handler runs (DaRPC §4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Exec {
    /// On the cluster head, in place, as the request is taken from the completion
    /// queue: no hand-off, no context switch. For handlers that never block.
    #[default]
    InPlace,
    /// On the server's worker pool, for handlers that block or run long; the cluster
    /// head goes on serving other connections meanwhile.
    Blocking,
}

/// One method a service answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Method {
    /// Its number on the wire.
    pub id: u32,
    /// Its name (metrics, traces).
    pub name: String,
    /// Where it runs.
    pub exec: Exec,
}

/// What a handler knows about its call.
#[derive(Debug)]
pub struct CallContext<'a> {
    pub(crate) method: u32,
    pub(crate) id: u64,
    pub(crate) deadline: Option<Instant>,
    pub(crate) cancelled: Option<&'a AtomicBool>,
    pub(crate) conn: u64,
    pub(crate) cluster: usize,
}

impl CallContext<'_> {
    /// A context for calling a service directly (tests, local calls).
    pub fn detached(method: u32) -> CallContext<'static> {
        CallContext {
            method,
            id: 0,
            deadline: None,
            cancelled: None,
            conn: 0,
            cluster: 0,
        }
    }
    /// The method called.
    pub fn method(&self) -> u32 {
        self.method
    }
    /// The request id (unique per connection).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// When the caller stops waiting (from the budget it sent, counted from the
    /// request's arrival).
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
    /// The deadline passed: the answer will be thrown away.
    pub fn expired(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d)
    }
    /// The caller cancelled the call (only seen by worker-pool handlers: in-place
    /// handlers finish before the next message of their connection is read).
    pub fn is_cancelled(&self) -> bool {
        self.cancelled.is_some_and(|c| c.load(Ordering::Relaxed))
    }
    /// The server's id of the connection the call came on.
    pub fn connection(&self) -> u64 {
        self.conn
    }
    /// The completion-queue cluster that took the call.
    pub fn cluster(&self) -> usize {
        self.cluster
    }
}

/// A service: methods by number, and a handler over bytes.
///
/// `call` gets the request payload and appends the response payload to `resp`
/// (empty on entry). An `Err` becomes the call's status at the client.
pub trait Service: Send + Sync + 'static {
    /// The methods (ids must be distinct).
    fn methods(&self) -> Vec<Method>;
    /// Run method `cx.method()` on `req`.
    fn call(&self, cx: &CallContext<'_>, req: &[u8], resp: &mut Vec<u8>) -> Result<(), Status>;
}

type HandlerFn =
    Box<dyn Fn(&CallContext<'_>, &[u8], &mut Vec<u8>) -> Result<(), Status> + Send + Sync>;

/// A service made of closures over bytes (the zero-copy byte API: no codec; the
/// only copies are out of and into registered memory).
pub struct Handlers {
    methods: Vec<(Method, HandlerFn)>,
}

impl std::fmt::Debug for Handlers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.methods.iter().map(|(m, _)| m))
            .finish()
    }
}

impl Default for Handlers {
    fn default() -> Handlers {
        Handlers::new()
    }
}

impl Handlers {
    /// No methods yet.
    pub fn new() -> Handlers {
        Handlers {
            methods: Vec::new(),
        }
    }

    /// Add method `id` called `name`, run as `exec`.
    pub fn add(
        mut self,
        id: u32,
        name: &str,
        exec: Exec,
        f: impl Fn(&CallContext<'_>, &[u8], &mut Vec<u8>) -> Result<(), Status> + Send + Sync + 'static,
    ) -> Handlers {
        assert!(
            self.methods.iter().all(|(m, _)| m.id != id),
            "method id {id} used twice"
        );
        self.methods.push((
            Method {
                id,
                name: name.to_string(),
                exec,
            },
            Box::new(f),
        ));
        self.methods.sort_by_key(|(m, _)| m.id);
        self
    }
}

impl Service for Handlers {
    fn methods(&self) -> Vec<Method> {
        self.methods.iter().map(|(m, _)| m.clone()).collect()
    }

    fn call(&self, cx: &CallContext<'_>, req: &[u8], resp: &mut Vec<u8>) -> Result<(), Status> {
        match self.methods.binary_search_by_key(&cx.method, |(m, _)| m.id) {
            Ok(i) => (self.methods[i].1)(cx, req, resp),
            Err(_) => Err(Status::unimplemented(format!("method {}", cx.method))),
        }
    }
}

/// A stable method id: FNV-1a of `"service.method"` (what [`crate::service!`] uses,
/// so reordering a trait's methods changes no id).
pub const fn method_id(service: &str, method: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    let parts = [service.as_bytes(), b".", method.as_bytes()];
    let mut p = 0;
    while p < parts.len() {
        let b = parts[p];
        let mut i = 0;
        while i < b.len() {
            h ^= b[i] as u32;
            h = h.wrapping_mul(0x0100_0193);
            i += 1;
        }
        p += 1;
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handlers_dispatch_by_id_and_refuse_unknown_methods() {
        let h = Handlers::new()
            .add(2, "two", Exec::InPlace, |_, req, resp| {
                resp.extend_from_slice(req);
                resp.push(2);
                Ok(())
            })
            .add(1, "one", Exec::Blocking, |_, _, _| {
                Err(Status::not_found("x"))
            });
        let mut out = Vec::new();
        h.call(&CallContext::detached(2), b"a", &mut out).unwrap();
        assert_eq!(out, b"a\x02");
        assert_eq!(
            h.call(&CallContext::detached(1), b"", &mut out)
                .unwrap_err()
                .code(),
            crate::Code::NotFound
        );
        assert_eq!(
            h.call(&CallContext::detached(3), b"", &mut out)
                .unwrap_err()
                .code(),
            crate::Code::Unimplemented
        );
        assert_eq!(h.methods()[0].exec, Exec::Blocking);
    }

    #[test]
    fn method_ids_are_fnv1a() {
        // FNV-1a("a.b") computed by hand from the reference algorithm.
        let mut h: u32 = 0x811c_9dc5;
        for b in b"a.b" {
            h ^= u32::from(*b);
            h = h.wrapping_mul(0x0100_0193);
        }
        assert_eq!(method_id("a", "b"), h);
        assert_ne!(method_id("S", "create"), method_id("S", "delete"));
    }
}
