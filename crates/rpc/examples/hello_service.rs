//! hello_service: the smallest complete weft-rpc program, in two processes. A typed
//! service defined with `service!`, a server that serves it over the udp link, and a
//! client that calls it.
//!
//!   server:  cargo run -p weft-rpc --example hello_service
//!   client:  cargo run -p weft-rpc --example hello_service -- 127.0.0.1:18518 Ada
//!
//! The server runs until it is stopped (Ctrl-C). Each side's device takes a loopback
//! address of its own on RoCEv2's UDP port 4791.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use weft_rpc::{CallContext, Client, ClientConfig, LinkKind, Server, ServerConfig, Status};

weft_rpc::service! {
    /// Greets whoever asks.
    pub trait Greeter {
        client GreeterClient;
        server GreeterServer;
        fn hello(name: String) -> String;
    }
}

struct Polite;

impl Greeter for Polite {
    fn hello(&self, _cx: &CallContext<'_>, name: String) -> Result<String, Status> {
        if name.is_empty() {
            return Err(Status::invalid_argument("a name, please"));
        }
        Ok(format!("hello, {name}"))
    }
}

const USAGE: &str = "usage: hello_service [--listen IP:PORT | SERVER_IP:PORT NAME]";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = |s: &str| {
        s.parse::<SocketAddr>()
            .map_err(|_| format!("bad address {s:?}"))
    };
    let parsed = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["--help" | "-h", ..] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        [] => addr("127.0.0.1:18518").map(|a| (a, None)),
        ["--listen", a] => addr(a).map(|a| (a, None)),
        [a, name] if !a.starts_with('-') => addr(a).map(|a| (a, Some(name.to_string()))),
        _ => Err(format!("unexpected arguments {args:?}")),
    };
    let (at, name) = match parsed {
        Ok(p) => p,
        Err(e) => {
            eprintln!("hello_service: {e}");
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match name {
        None => serve(at),
        Some(name) => call(at, name),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("hello_service: {e}");
            ExitCode::FAILURE
        }
    }
}

fn serve(at: SocketAddr) -> Result<(), Status> {
    let service = Arc::new(GreeterServer::new(Polite));
    let server = Server::start(service, ServerConfig::new(LinkKind::Udp), at)?;
    println!("listening on {}", server.local_addr());
    // The server's threads do the work; this one only keeps it alive.
    loop {
        std::thread::park();
    }
}

fn call(server: SocketAddr, name: String) -> Result<(), Status> {
    let client = GreeterClient::new(Client::connect(server, ClientConfig::new(LinkKind::Udp))?);
    let greeting = client.hello(name).wait()?;
    println!("{greeting}");
    Ok(())
}
