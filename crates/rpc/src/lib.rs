//! weft-rpc: RPC over weft-verbs in the design of DaRPC (Stuedi et al., SoCC '14).
//!
//! Requests and responses are RC SENDs into pre-registered per-connection buffer
//! rings, framed by a checked 24-byte header ([`frame`]); small messages go inline,
//! messages larger than a buffer move by RDMA READ of registered memory
//! (rendezvous). Credit-based flow control means a server is never overrun: every
//! message is answered by exactly one message, and a client never has more messages
//! unanswered than the server has receive buffers ([`conn`](crate::DeviceOptions)).
//!
//! - [`Server`]: completion-queue clusters (one device, one completion queue and one
//!   head thread each), least-loaded placement of new connections, handlers in place
//!   on the head or on a worker pool per method ([`Exec`]), in-flight limits with
//!   `Overloaded` shedding, optional work stealing, per-method [`metrics`] and
//!   `tracing` spans.
//! - [`Client`]: calls are futures ([`Call`]) for any executor; dropping one cancels
//!   the call at the server; deadlines travel on the wire and are enforced at both
//!   ends; [`CallStream`] keeps many calls outstanding (DaRPC's take/poll); direct
//!   and dispatched completion processing ([`Mode`]); batching that follows the load
//!   ([`Batching`]); keepalive.
//! - Services: the byte API ([`Service`], [`Handlers`]) or a typed trait from the
//!   [`service!`] macro with the serde [`codec`].
//! - Errors: [`Status`] with a typed [`Code`], an `std::error::Error`.
//!
//! It owns: the RPC wire format, flow control and threading. It must not touch:
//! verbs internals (it uses only weft-verbs' public API).
//!
//! # Hello, service
//!
//! A complete two-process program (`examples/hello_service.rs`): a typed service, its
//! server, and a client that calls it.
//!
//! ```text
//! cargo run -p weft-rpc --example hello_service                        # server
//! cargo run -p weft-rpc --example hello_service -- 127.0.0.1:18518 Ada # client
//! ```
//!
#![doc = concat!("```no_run\n", include_str!("../examples/hello_service.rs"), "```")]
#![forbid(unsafe_code)]

mod adapt;
mod batch;
mod client;
pub mod codec;
mod conn;
pub mod frame;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod idle;
pub mod metrics;
mod server;
mod service;
mod status;

pub use client::{Batching, Call, CallStream, Client, ClientConfig, ClientStats, Mode, TypedCall};
pub use conn::{DeviceOptions, HelloError, MIN_BUFFER};
pub use idle::IdleSpin;
pub use server::{ClusterStats, Server, ServerConfig, ServerStats};
pub use service::{method_id, CallContext, Exec, Handlers, Method, Service};
pub use status::{Code, Status};
pub use weft_verbs::{LinkKind, Progress};

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// A hasher for request ids and QP numbers: they are already well spread (ids
/// count up, QP numbers are random), so one multiply does.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8 | u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

pub(crate) type IdMap<V> = HashMap<u64, V, BuildHasherDefault<IdHasher>>;

/// Run a future to completion on this thread (no executor needed): sleeps between
/// wake-ups, so a dispatched-mode call costs no CPU while it waits; a direct-mode
/// call keeps itself awake and polls.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    use std::sync::Arc;
    use std::task::{Context, Poll, Wake, Waker};
    struct Unpark(std::thread::Thread);
    impl Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = std::pin::pin!(f);
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

/// Define a typed service: a trait the server implements, a client stub and a
/// server adapter, with method ids from [`method_id`] and arguments and results in
/// the serde [`codec`]. tarpc-style, no IDL:
///
/// ```
/// weft_rpc::service! {
///     /// Greets.
///     pub trait Greeter {
///         client GreeterClient;
///         server GreeterServer;
///         fn hello(name: String) -> String;
///         #[blocking]
///         fn slow_hello(name: String, times: u32) -> Vec<String>;
///     }
/// }
///
/// struct Impl;
/// impl Greeter for Impl {
///     fn hello(&self, _cx: &weft_rpc::CallContext<'_>, name: String) -> Result<String, weft_rpc::Status> {
///         Ok(format!("hello {name}"))
///     }
///     fn slow_hello(&self, _cx: &weft_rpc::CallContext<'_>, name: String, times: u32) -> Result<Vec<String>, weft_rpc::Status> {
///         Ok(vec![name; times as usize])
///     }
/// }
/// let service: std::sync::Arc<dyn weft_rpc::Service> = std::sync::Arc::new(GreeterServer::new(Impl));
/// assert_eq!(service.methods().len(), 2);
/// ```
///
/// `#[blocking]` runs a method on the server's worker pool ([`Exec::Blocking`]);
/// others run in place on the cluster head. The client stub's methods return
/// [`TypedCall`]s (futures; `.wait()` blocks).
#[macro_export]
macro_rules! service {
    (
        $(#[$meta:meta])*
        $vis:vis trait $name:ident {
            client $client:ident;
            server $server:ident;
            $(
                $(#[$($attr:tt)*])*
                fn $method:ident ( $( $arg:ident : $arg_ty:ty ),* $(,)? ) -> $ret:ty ;
            )*
        }
    ) => {
        $(#[$meta])*
        $vis trait $name: ::std::marker::Send + ::std::marker::Sync + 'static {
            $(
                #[doc = concat!("The `", stringify!($method), "` method.")]
                fn $method(
                    &self,
                    cx: &$crate::CallContext<'_>,
                    $( $arg: $arg_ty ),*
                ) -> ::std::result::Result<$ret, $crate::Status>;
            )*
        }

        #[doc = concat!("Serves a [`", stringify!($name), "`] implementation.")]
        #[derive(Debug)]
        $vis struct $server<S>(pub ::std::sync::Arc<S>);

        impl<S: $name> $server<S> {
            /// Wrap an implementation.
            pub fn new(service: S) -> Self {
                $server(::std::sync::Arc::new(service))
            }
        }

        impl<S: $name> $crate::Service for $server<S> {
            fn methods(&self) -> ::std::vec::Vec<$crate::Method> {
                ::std::vec![$(
                    $crate::Method {
                        id: $crate::method_id(stringify!($name), stringify!($method)),
                        name: ::std::string::String::from(stringify!($method)),
                        exec: $crate::__weft_rpc_exec!($([$($attr)*])*),
                    }
                ),*]
            }

            #[allow(unused_parens)]
            fn call(
                &self,
                cx: &$crate::CallContext<'_>,
                req: &[u8],
                resp: &mut ::std::vec::Vec<u8>,
            ) -> ::std::result::Result<(), $crate::Status> {
                $(
                    if cx.method() == $crate::method_id(stringify!($name), stringify!($method)) {
                        let ($($arg,)*): ($($arg_ty,)*) =
                            $crate::codec::decode(req, $crate::Code::InvalidArgument)?;
                        let r = self.0.$method(cx, $($arg),*)?;
                        return $crate::codec::encode(&r, resp);
                    }
                )*
                Err($crate::Status::unimplemented(format!(
                    "{} has no method {}",
                    stringify!($name),
                    cx.method()
                )))
            }
        }

        #[doc = concat!("Calls a remote [`", stringify!($name), "`].")]
        #[derive(Debug, Clone)]
        $vis struct $client {
            client: $crate::Client,
            timeout: ::std::option::Option<::std::time::Duration>,
        }

        impl $client {
            /// Wrap a connection.
            pub fn new(client: $crate::Client) -> Self {
                $( client.name_method(
                    $crate::method_id(stringify!($name), stringify!($method)),
                    stringify!($method),
                ); )*
                $client { client, timeout: None }
            }

            /// The same stub with a deadline of `timeout` on every call.
            pub fn with_timeout(&self, timeout: ::std::time::Duration) -> Self {
                $client { client: self.client.clone(), timeout: Some(timeout) }
            }

            /// The connection.
            pub fn client(&self) -> &$crate::Client {
                &self.client
            }

            $(
                #[doc = concat!("Call `", stringify!($method), "`.")]
                pub fn $method(&self, $( $arg: $arg_ty ),*) -> $crate::TypedCall<$ret> {
                    self.client.call_typed(
                        $crate::method_id(stringify!($name), stringify!($method)),
                        &($($arg,)*),
                        self.timeout,
                    )
                }
            )*
        }
    };
}

/// Internal: the [`Exec`] of a method from its attributes.
#[doc(hidden)]
#[macro_export]
macro_rules! __weft_rpc_exec {
    () => { $crate::Exec::InPlace };
    ([blocking] $($rest:tt)*) => { $crate::Exec::Blocking };
    ([$($other:tt)*] $($rest:tt)*) => { $crate::__weft_rpc_exec!($($rest)*) };
}
