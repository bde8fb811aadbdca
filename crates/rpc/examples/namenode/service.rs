//! An example service modelled on the HDFS namenode's client protocol, as in DaRPC
//! §6.3: `create`, `delete`, `rename`, `mkdirs`, `getFileStatus`,
//! `getBlockLocations` over an in-memory namespace, plus the operations of Hadoop's
//! `NNThroughputBenchmark` for a load generator (`main.rs` beside this file,
//! `weft rpc-bench --mix metadata`), and `fuzz_calls`, the hostile-input check
//! that the `rpc_namenode` fuzz target and `tests/hostile_input.rs` run.
//!
//! An example, not part of weft-rpc's library: the example, weft-rpc's tests, the
//! fuzz target and weft-bench include this one file (`#[path]`), each using the
//! part it needs.
//!
//! The namespace is a sorted map of paths under one reader-writer lock, like the
//! namenode's FSNamesystem lock: lookups share it, mutations take it alone (which is
//! why DaRPC measured lower throughput for create/delete than for getFileStatus).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{PoisonError, RwLock};
use weft_rpc::{CallContext, Status};

/// What `getFileStatus` returns (the fields of HDFS's `HdfsFileStatus` that matter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStatus {
    /// Full path.
    pub path: String,
    /// A directory.
    pub is_dir: bool,
    /// Bytes.
    pub len: u64,
    /// Replication factor.
    pub replication: u16,
    /// Block size.
    pub block_size: u64,
    /// Last modification, ms since the epoch of the namespace.
    pub modification_time: u64,
    /// Permission bits.
    pub permission: u16,
    /// Owner.
    pub owner: String,
    /// Group.
    pub group: String,
}

/// One block of a file and the datanodes holding it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocatedBlock {
    /// Block id.
    pub block_id: u64,
    /// Offset in the file.
    pub offset: u64,
    /// Bytes.
    pub len: u64,
    /// Datanodes, `host:port`.
    pub hosts: Vec<String>,
}

/// Why a namespace operation failed (the application's error, carried inside a
/// successful RPC).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum FsError {
    /// No such file or directory.
    NotFound(String),
    /// The path exists.
    AlreadyExists(String),
    /// A parent is a file.
    ParentNotDirectory(String),
    /// The parent does not exist.
    ParentNotFound(String),
    /// A non-recursive delete of a non-empty directory.
    DirectoryNotEmpty(String),
    /// Not an absolute, normalised path.
    InvalidPath(String),
}

weft_rpc::service! {
    /// The namenode's metadata operations.
    pub trait Namenode {
        client NamenodeClient;
        server NamenodeServer;
        fn create(path: String, replication: u16, block_size: u64, overwrite: bool) -> Result<FileStatus, FsError>;
        fn delete(path: String, recursive: bool) -> Result<bool, FsError>;
        fn rename(src: String, dst: String) -> Result<bool, FsError>;
        fn mkdirs(path: String) -> Result<bool, FsError>;
        fn get_file_status(path: String) -> Result<FileStatus, FsError>;
        fn get_block_locations(path: String, offset: u64, len: u64) -> Result<Vec<LocatedBlock>, FsError>;
    }
}

#[derive(Debug, Clone)]
struct Inode {
    is_dir: bool,
    len: u64,
    replication: u16,
    block_size: u64,
    mtime: u64,
    blocks: Vec<u64>,
}

/// The in-memory namespace.
#[derive(Debug)]
pub struct Namespace {
    tree: RwLock<BTreeMap<String, Inode>>,
    clock: AtomicU64,
    next_block: AtomicU64,
}

impl Default for Namespace {
    fn default() -> Namespace {
        let mut t = BTreeMap::new();
        t.insert("/".to_string(), dir(0));
        Namespace {
            tree: RwLock::new(t),
            clock: AtomicU64::new(1),
            next_block: AtomicU64::new(1 << 30),
        }
    }
}

fn dir(mtime: u64) -> Inode {
    Inode {
        is_dir: true,
        len: 0,
        replication: 0,
        block_size: 0,
        mtime,
        blocks: Vec::new(),
    }
}

fn check(path: &str) -> Result<(), FsError> {
    if !path.starts_with('/') || (path.len() > 1 && path.ends_with('/')) || path.contains("//") {
        return Err(FsError::InvalidPath(path.to_string()));
    }
    Ok(())
}

fn parent(path: &str) -> &str {
    match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    }
}

/// Keys of `path`'s subtree (excluding `path`).
fn subtree<'a>(
    t: &'a BTreeMap<String, Inode>,
    path: &str,
) -> impl Iterator<Item = (&'a String, &'a Inode)> + 'a {
    let prefix = if path == "/" {
        "/".to_string()
    } else {
        format!("{path}/")
    };
    let p2 = prefix.clone();
    t.range(prefix..)
        .take_while(move |(k, _)| k.starts_with(&p2))
}

impl Namespace {
    fn tick(&self) -> u64 {
        self.clock.fetch_add(1, Ordering::Relaxed)
    }

    fn status(path: &str, i: &Inode) -> FileStatus {
        FileStatus {
            path: path.to_string(),
            is_dir: i.is_dir,
            len: i.len,
            replication: i.replication,
            block_size: i.block_size,
            modification_time: i.mtime,
            permission: if i.is_dir { 0o755 } else { 0o644 },
            owner: "weft".into(),
            group: "supergroup".into(),
        }
    }

    /// Create a file of one block.
    pub fn create(
        &self,
        path: &str,
        replication: u16,
        block_size: u64,
        overwrite: bool,
    ) -> Result<FileStatus, FsError> {
        check(path)?;
        let mut t = self.tree.write().unwrap_or_else(PoisonError::into_inner);
        match t.get(parent(path)) {
            None => return Err(FsError::ParentNotFound(path.into())),
            Some(p) if !p.is_dir => return Err(FsError::ParentNotDirectory(path.into())),
            _ => {}
        }
        if let Some(e) = t.get(path) {
            if e.is_dir || !overwrite {
                return Err(FsError::AlreadyExists(path.into()));
            }
        }
        let i = Inode {
            is_dir: false,
            len: block_size,
            replication,
            block_size,
            mtime: self.tick(),
            blocks: vec![self.next_block.fetch_add(1, Ordering::Relaxed)],
        };
        let s = Namespace::status(path, &i);
        t.insert(path.to_string(), i);
        Ok(s)
    }

    /// Delete a file or directory.
    pub fn delete(&self, path: &str, recursive: bool) -> Result<bool, FsError> {
        check(path)?;
        let mut t = self.tree.write().unwrap_or_else(PoisonError::into_inner);
        let Some(i) = t.get(path) else {
            return Ok(false);
        };
        if path == "/" {
            return Err(FsError::InvalidPath(path.into()));
        }
        if i.is_dir {
            let children: Vec<String> = subtree(&t, path).map(|(k, _)| k.clone()).collect();
            if !children.is_empty() && !recursive {
                return Err(FsError::DirectoryNotEmpty(path.into()));
            }
            for k in children {
                t.remove(&k);
            }
        }
        t.remove(path);
        Ok(true)
    }

    /// Move a file or directory (with its subtree).
    pub fn rename(&self, src: &str, dst: &str) -> Result<bool, FsError> {
        check(src)?;
        check(dst)?;
        let mut t = self.tree.write().unwrap_or_else(PoisonError::into_inner);
        if !t.contains_key(src) || src == "/" {
            return Ok(false);
        }
        if t.contains_key(dst) || dst.starts_with(&format!("{src}/")) {
            return Ok(false);
        }
        match t.get(parent(dst)) {
            Some(p) if p.is_dir => {}
            _ => return Ok(false),
        }
        let moved: Vec<String> = subtree(&t, src).map(|(k, _)| k.clone()).collect();
        if let Some(i) = t.remove(src) {
            t.insert(dst.to_string(), i);
        }
        for k in moved {
            if let Some(i) = t.remove(&k) {
                t.insert(format!("{dst}{}", &k[src.len()..]), i);
            }
        }
        Ok(true)
    }

    /// Make a directory and its missing ancestors.
    pub fn mkdirs(&self, path: &str) -> Result<bool, FsError> {
        check(path)?;
        let mut t = self.tree.write().unwrap_or_else(PoisonError::into_inner);
        let mut at = 0;
        let now = self.tick();
        loop {
            let end = path[at + 1..].find('/').map_or(path.len(), |i| at + 1 + i);
            let p = &path[..end];
            match t.get(p) {
                Some(i) if !i.is_dir => return Err(FsError::ParentNotDirectory(p.into())),
                Some(_) => {}
                None => {
                    t.insert(p.to_string(), dir(now));
                }
            }
            if end == path.len() {
                return Ok(true);
            }
            at = end;
        }
    }

    /// A path's status.
    pub fn get_file_status(&self, path: &str) -> Result<FileStatus, FsError> {
        check(path)?;
        let t = self.tree.read().unwrap_or_else(PoisonError::into_inner);
        t.get(path)
            .map(|i| Namespace::status(path, i))
            .ok_or_else(|| FsError::NotFound(path.into()))
    }

    /// The blocks of a file overlapping `[offset, offset + len)`.
    pub fn get_block_locations(
        &self,
        path: &str,
        offset: u64,
        len: u64,
    ) -> Result<Vec<LocatedBlock>, FsError> {
        check(path)?;
        let t = self.tree.read().unwrap_or_else(PoisonError::into_inner);
        let i = t.get(path).ok_or_else(|| FsError::NotFound(path.into()))?;
        if i.is_dir {
            return Err(FsError::NotFound(path.into()));
        }
        let bs = i.block_size.max(1);
        Ok(i.blocks
            .iter()
            .enumerate()
            .map(|(n, &b)| LocatedBlock {
                block_id: b,
                offset: n as u64 * bs,
                len: bs.min(i.len.saturating_sub(n as u64 * bs)),
                hosts: (0..u64::from(i.replication.clamp(1, 3)))
                    .map(|r| format!("dn{}.weft:9866", (b + r) % 16))
                    .collect(),
            })
            .filter(|b| b.offset < offset.saturating_add(len) && b.offset + b.len > offset)
            .collect())
    }

    /// Panics unless the namespace is a tree: the root is a directory, and every
    /// other path is valid and has a directory for its parent (the fuzz targets'
    /// invariant after any sequence of calls).
    pub fn check_tree(&self) {
        let t = self.tree.read().unwrap_or_else(PoisonError::into_inner);
        assert!(
            t.get("/").is_some_and(|r| r.is_dir),
            "the root is a directory"
        );
        for (k, _) in t.iter().filter(|(k, _)| k.as_str() != "/") {
            assert!(check(k).is_ok(), "{k:?} is not a valid path");
            assert!(
                t.get(parent(k)).is_some_and(|p| p.is_dir),
                "{k:?} has no parent directory"
            );
        }
    }

    /// Paths in the namespace (with the root).
    pub fn len(&self) -> usize {
        self.tree
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .len()
    }

    /// Only the root.
    pub fn is_empty(&self) -> bool {
        self.len() <= 1
    }
}

impl Namenode for Namespace {
    fn create(
        &self,
        _cx: &CallContext<'_>,
        path: String,
        replication: u16,
        block_size: u64,
        overwrite: bool,
    ) -> Result<Result<FileStatus, FsError>, Status> {
        Ok(Namespace::create(
            self,
            &path,
            replication,
            block_size,
            overwrite,
        ))
    }
    fn delete(
        &self,
        _cx: &CallContext<'_>,
        path: String,
        recursive: bool,
    ) -> Result<Result<bool, FsError>, Status> {
        Ok(Namespace::delete(self, &path, recursive))
    }
    fn rename(
        &self,
        _cx: &CallContext<'_>,
        src: String,
        dst: String,
    ) -> Result<Result<bool, FsError>, Status> {
        Ok(Namespace::rename(self, &src, &dst))
    }
    fn mkdirs(&self, _cx: &CallContext<'_>, path: String) -> Result<Result<bool, FsError>, Status> {
        Ok(Namespace::mkdirs(self, &path))
    }
    fn get_file_status(
        &self,
        _cx: &CallContext<'_>,
        path: String,
    ) -> Result<Result<FileStatus, FsError>, Status> {
        Ok(Namespace::get_file_status(self, &path))
    }
    fn get_block_locations(
        &self,
        _cx: &CallContext<'_>,
        path: String,
        offset: u64,
        len: u64,
    ) -> Result<Result<Vec<LocatedBlock>, FsError>, Status> {
        Ok(Namespace::get_block_locations(self, &path, offset, len))
    }
}

/// One of NNThroughputBenchmark's operations, as the load generators issue them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Op {
    /// `create` a new file.
    Create,
    /// `mkdirs` a new directory.
    Mkdirs,
    /// `open`: `getBlockLocations` of an existing file.
    Open,
    /// `fileStatus`: `getFileStatus` of an existing file.
    FileStatus,
    /// `rename` an existing file.
    Rename,
    /// `delete` an existing file.
    Delete,
}

impl Op {
    /// Every operation, in NNThroughputBenchmark's order.
    pub const ALL: [Op; 6] = [
        Op::Create,
        Op::Mkdirs,
        Op::Open,
        Op::FileStatus,
        Op::Rename,
        Op::Delete,
    ];

    /// The name NNThroughputBenchmark gives it.
    pub fn name(self) -> &'static str {
        match self {
            Op::Create => "create",
            Op::Mkdirs => "mkdirs",
            Op::Open => "open",
            Op::FileStatus => "fileStatus",
            Op::Rename => "rename",
            Op::Delete => "delete",
        }
    }

    /// Parse a name.
    pub fn parse(s: &str) -> Option<Op> {
        Op::ALL
            .into_iter()
            .find(|o| o.name().eq_ignore_ascii_case(s))
    }

    /// The metadata mix of `weft rpc-bench`: the i-th operation of a client. Reads
    /// dominate as in namenode traces (getFileStatus 60 %, getBlockLocations 20 %),
    /// and every create is undone by a rename and a delete, so the namespace stays
    /// the same size: create, fileStatus×3, open, rename, fileStatus×3, open, delete.
    pub fn mix(i: u64) -> Op {
        const MIX: [Op; 11] = [
            Op::Create,
            Op::FileStatus,
            Op::FileStatus,
            Op::FileStatus,
            Op::Open,
            Op::Rename,
            Op::FileStatus,
            Op::FileStatus,
            Op::FileStatus,
            Op::Open,
            Op::Delete,
        ];
        MIX[(i % MIX.len() as u64) as usize]
    }
}

/// The paths a load-generating client works on: its own directory, as
/// NNThroughputBenchmark gives each thread one.
#[derive(Debug, Clone)]
pub struct Workload {
    /// This client's directory.
    pub dir: String,
}

impl Workload {
    /// Client `client`'s workload.
    pub fn new(client: usize) -> Workload {
        Workload {
            dir: format!("/nnbench/client{client:04}"),
        }
    }

    /// File `n` of this client.
    pub fn file(&self, n: u64) -> String {
        format!("{}/file{n:08}", self.dir)
    }

    /// File `n` after its rename.
    pub fn renamed(&self, n: u64) -> String {
        format!("{}/moved{n:08}", self.dir)
    }

    /// The request bytes (method id and encoded arguments) of the `i`-th operation of
    /// the metadata mix: cycle `i / 11` works on file `i / 11` (create … delete).
    pub fn mix_request(&self, i: u64) -> (u32, Vec<u8>) {
        let n = i / 11;
        let op = Op::mix(i);
        // Reads before the rename look at the new file, after it at the moved one.
        let phase = i % 11;
        let path = if phase < 5 {
            self.file(n)
        } else {
            self.renamed(n)
        };
        self.request(op, n, &path)
    }

    /// The request bytes of `op` on file `n` (at `path`).
    pub fn request(&self, op: Op, n: u64, path: &str) -> (u32, Vec<u8>) {
        let id = |m: &str| weft_rpc::method_id("Namenode", m);
        let enc = |v: &dyn erased::Enc| v.enc();
        match op {
            Op::Create => (
                id("create"),
                enc(&(path.to_string(), 3u16, 128u64 << 20, true)),
            ),
            Op::Mkdirs => (id("mkdirs"), enc(&(format!("{}/dir{n:08}", self.dir),))),
            Op::Open => (
                id("get_block_locations"),
                enc(&(path.to_string(), 0u64, 1u64 << 30)),
            ),
            Op::FileStatus => (id("get_file_status"), enc(&(path.to_string(),))),
            Op::Rename => (id("rename"), enc(&(self.file(n), self.renamed(n)))),
            Op::Delete => (id("delete"), enc(&(path.to_string(), false))),
        }
    }
}

mod erased {
    /// Encode any serde value without naming its type at the call site.
    pub trait Enc {
        fn enc(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Enc for T {
        fn enc(&self) -> Vec<u8> {
            weft_rpc::codec::to_vec(self).unwrap_or_default()
        }
    }
}

/// Feed `data` as calls to the namenode service: records of one byte that picks the
/// method, one length byte and that many argument bytes (the codec's input, as a
/// client would send it). After each call the namespace must still be a tree.
/// Returns how many calls decoded their arguments; panics on a broken invariant.
pub fn fuzz_calls(data: &[u8]) -> usize {
    use weft_rpc::Service as _;
    let ns = NamenodeServer::new(Namespace::default());
    let methods = ns.methods();
    let mut decoded = 0;
    let mut rest = data;
    while let [sel, len, tail @ ..] = rest {
        let n = usize::from(*len).min(tail.len());
        let (args, next) = tail.split_at(n);
        rest = next;
        let m = &methods[usize::from(*sel) % methods.len()];
        let mut resp = Vec::new();
        match ns.call(&CallContext::detached(m.id), args, &mut resp) {
            Ok(()) => decoded += 1,
            Err(e) => assert_eq!(e.code(), weft_rpc::Code::InvalidArgument, "{e}"),
        }
        ns.0.check_tree();
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fuzz_calls_decodes_a_good_call() {
        let mk = weft_rpc::codec::to_vec(&("/a".to_string(),)).unwrap();
        let mut calls = vec![3, mk.len() as u8];
        calls.extend_from_slice(&mk);
        assert_eq!(fuzz_calls(&calls), 1);
    }

    #[test]
    fn namespace_operations() {
        let ns = Namespace::default();
        assert_eq!(ns.mkdirs("/a/b/c"), Ok(true));
        assert!(ns.get_file_status("/a/b").unwrap().is_dir);
        let s = ns.create("/a/b/f", 3, 1024, false).unwrap();
        assert_eq!((s.len, s.replication), (1024, 3));
        assert_eq!(
            ns.create("/a/b/f", 3, 1024, false),
            Err(FsError::AlreadyExists("/a/b/f".into()))
        );
        assert_eq!(
            ns.create("/nope/f", 3, 1024, false),
            Err(FsError::ParentNotFound("/nope/f".into()))
        );
        let b = ns.get_block_locations("/a/b/f", 0, 10).unwrap();
        assert_eq!((b.len(), b[0].hosts.len()), (1, 3));
        assert_eq!(ns.rename("/a/b", "/a/x"), Ok(true));
        assert!(ns.get_file_status("/a/x/f").is_ok());
        assert!(ns.get_file_status("/a/b/f").is_err());
        assert_eq!(
            ns.delete("/a/x", false),
            Err(FsError::DirectoryNotEmpty("/a/x".into()))
        );
        assert_eq!(ns.delete("/a/x", true), Ok(true));
        assert_eq!(ns.len(), 2, "/ and /a remain");
        assert!(matches!(
            ns.get_file_status("relative"),
            Err(FsError::InvalidPath(_))
        ));
    }

    #[test]
    fn the_mix_leaves_the_namespace_as_it_found_it() {
        let ns = Namespace::default();
        let w = Workload::new(3);
        ns.mkdirs(&w.dir).unwrap();
        let svc = NamenodeServer::new(ns);
        let before = svc.0.len();
        let mut resp = Vec::new();
        for i in 0..110 {
            let (m, req) = w.mix_request(i);
            resp.clear();
            weft_rpc::Service::call(&svc, &CallContext::detached(m), &req, &mut resp).unwrap();
            // Every operation of the mix succeeds at the application level too.
            let ok = match Op::mix(i) {
                Op::Create | Op::FileStatus => {
                    weft_rpc::codec::decode::<Result<FileStatus, FsError>>(
                        &resp,
                        weft_rpc::Code::Internal,
                    )
                    .unwrap()
                    .is_ok()
                }
                Op::Open => weft_rpc::codec::decode::<Result<Vec<LocatedBlock>, FsError>>(
                    &resp,
                    weft_rpc::Code::Internal,
                )
                .unwrap()
                .is_ok_and(|b| !b.is_empty()),
                _ => {
                    weft_rpc::codec::decode::<Result<bool, FsError>>(
                        &resp,
                        weft_rpc::Code::Internal,
                    )
                    .unwrap()
                        == Ok(true)
                }
            };
            assert!(ok, "op {i} ({:?}) failed", Op::mix(i));
        }
        assert_eq!(svc.0.len(), before);
    }
}
