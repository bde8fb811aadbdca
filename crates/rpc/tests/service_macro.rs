//! The `service!` macro end to end: no-argument, many-argument and `#[blocking]`
//! methods, an application error type, deadlines from the stub, over shm.

use std::sync::Arc;
use std::time::Duration;
use weft_rpc::{
    CallContext, Client, ClientConfig, Code, Exec, LinkKind, Server, ServerConfig, Status,
};

weft_rpc::service! {
    /// A counter.
    pub trait Counter {
        client CounterClient;
        server CounterServer;
        fn get() -> u64;
        fn add(by: u64, note: String, tags: Vec<u8>) -> Result<u64, String>;
        #[blocking]
        fn slow_add(by: u64, ms: u64) -> u64;
    }
}

#[derive(Default)]
struct Impl(std::sync::atomic::AtomicU64);

impl Counter for Impl {
    fn get(&self, _cx: &CallContext<'_>) -> Result<u64, Status> {
        Ok(self.0.load(std::sync::atomic::Ordering::SeqCst))
    }
    fn add(
        &self,
        _cx: &CallContext<'_>,
        by: u64,
        note: String,
        tags: Vec<u8>,
    ) -> Result<Result<u64, String>, Status> {
        if by == 0 {
            return Err(Status::invalid_argument("adding 0"));
        }
        if note.is_empty() {
            return Ok(Err(format!("no note ({} tags)", tags.len())));
        }
        Ok(Ok(self
            .0
            .fetch_add(by, std::sync::atomic::Ordering::SeqCst)
            + by))
    }
    fn slow_add(&self, cx: &CallContext<'_>, by: u64, ms: u64) -> Result<u64, Status> {
        std::thread::sleep(Duration::from_millis(ms));
        if cx.expired() {
            return Err(Status::deadline_exceeded("noticed late"));
        }
        Ok(self.0.fetch_add(by, std::sync::atomic::Ordering::SeqCst) + by)
    }
}

#[test]
fn typed_methods_of_every_shape() {
    let svc = CounterServer::new(Impl::default());
    let methods = weft_rpc::Service::methods(&svc);
    assert_eq!(methods.len(), 3);
    let exec = |n: &str| methods.iter().find(|m| m.name == n).unwrap().exec;
    assert_eq!(
        (exec("get"), exec("slow_add")),
        (Exec::InPlace, Exec::Blocking)
    );
    let s = Server::start(
        Arc::new(svc),
        ServerConfig::new(LinkKind::Shm),
        "127.0.0.1:0".parse().unwrap(),
    )
    .unwrap();
    let c = CounterClient::new(
        Client::connect(s.local_addr(), ClientConfig::new(LinkKind::Shm)).unwrap(),
    );
    assert_eq!(c.get().wait().unwrap(), 0);
    assert_eq!(c.add(5, "five".into(), vec![1, 2]).wait().unwrap(), Ok(5));
    assert_eq!(
        c.add(1, String::new(), vec![9]).wait().unwrap(),
        Err("no note (1 tags)".into())
    );
    assert_eq!(
        c.add(0, "x".into(), vec![]).wait().unwrap_err().code(),
        Code::InvalidArgument
    );
    assert_eq!(c.slow_add(2, 1).wait().unwrap(), 7);
    let e = c
        .with_timeout(Duration::from_millis(20))
        .slow_add(1, 100)
        .wait()
        .unwrap_err();
    assert_eq!(e.code(), Code::DeadlineExceeded);
    // The server ran it anyway (it was already running) and saw the deadline pass.
    let t = std::time::Instant::now();
    while s.metrics().by_name("slow_add").unwrap().calls < 2 && t.elapsed() < Duration::from_secs(5)
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    let m = s.metrics().by_name("slow_add").unwrap();
    assert_eq!((m.calls, m.errors_with(Code::DeadlineExceeded)), (2, 1));
}
