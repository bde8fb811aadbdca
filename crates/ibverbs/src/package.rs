//! Making `libibverbs.so.1` from this crate's staticlib.
//!
//! Why a staticlib and a separate link: the real library's symbols carry versions
//! (`ibv_post_send` is not enough; binaries ask for `ibv_create_qp@IBVERBS_1.1`,
//! provider libraries for `…@IBVERBS_PRIVATE_34`). Versions come from a linker version
//! script, and for a `cdylib` rustc writes its own version script, which wins over one
//! passed with `-C link-arg`. So cargo builds `libweft_ibverbs.a` (every `ibv_*`
//! function, `#[no_mangle]`), and [`link`] runs `cc -shared` over it with
//! `libibverbs.map` (the real library's version nodes) and the soname
//! `libibverbs.so.1`. `--no-undefined-version` makes the link fail if the map names a
//! symbol weft does not define, so the exported set is exactly the real one.
//!
//! Who calls it: `weft exec` (before it runs a program) and the integration tests,
//! both through [`ensure_beside`], which relinks only when the staticlib is newer than
//! the library. A build script cannot do it: cargo runs a package's build script
//! before the package's own library exists.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// The version script (the real library's version nodes).
pub const VERSION_SCRIPT: &str = include_str!("../libibverbs.map");

/// The file name programs load.
pub const SONAME: &str = "libibverbs.so.1";

/// The staticlib cargo built into `profile_dir` (`target/debug` or `target/release`):
/// the top-level `libweft_ibverbs.a`, or, when cargo built it only as a dependency,
/// the newest `deps/libweft_ibverbs-*.a`.
pub fn find_staticlib(profile_dir: &Path) -> Option<PathBuf> {
    let mut best: Option<(SystemTime, PathBuf)> = None;
    let mut consider = |p: PathBuf| {
        if let Ok(t) = p.metadata().and_then(|m| m.modified()) {
            if best.as_ref().is_none_or(|(bt, _)| t > *bt) {
                best = Some((t, p));
            }
        }
    };
    consider(profile_dir.join("libweft_ibverbs.a"));
    if let Ok(rd) = std::fs::read_dir(profile_dir.join("deps")) {
        for e in rd.flatten() {
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with("libweft_ibverbs-") && name.ends_with(".a") {
                consider(e.path());
            }
        }
    }
    best.map(|(_, p)| p)
}

/// Link `staticlib` into `out_dir/libibverbs.so.1` (written under a temporary name
/// and renamed, so concurrent callers never load a half-written file).
pub fn link(staticlib: &Path, out_dir: &Path) -> io::Result<PathBuf> {
    std::fs::create_dir_all(out_dir)?;
    let tag = format!("{}-{:?}", std::process::id(), std::thread::current().id())
        .replace(|c: char| !c.is_ascii_alphanumeric(), "");
    let map = out_dir.join(format!("libibverbs.map.{tag}"));
    std::fs::write(&map, VERSION_SCRIPT)?;
    let tmp = out_dir.join(format!("{SONAME}.{tag}"));
    let out = Command::new(std::env::var_os("CC").unwrap_or_else(|| "cc".into()))
        .arg("-shared")
        .arg("-o")
        .arg(&tmp)
        .arg("-Wl,--whole-archive")
        .arg(staticlib)
        .arg("-Wl,--no-whole-archive")
        .arg(format!("-Wl,--version-script={}", map.display()))
        .arg(format!("-Wl,-soname,{SONAME}"))
        .arg("-Wl,--no-undefined-version")
        .arg("-Wl,--gc-sections")
        .args([
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ])
        .output();
    let _ = std::fs::remove_file(&map);
    let out = out.map_err(|e| io::Error::new(e.kind(), format!("cannot run cc: {e}")))?;
    if !out.status.success() {
        let _ = std::fs::remove_file(&tmp);
        return Err(io::Error::other(format!(
            "linking {SONAME} from {} failed: {}",
            staticlib.display(),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    let dest = out_dir.join(SONAME);
    std::fs::rename(&tmp, &dest)?;
    Ok(dest)
}

/// The directory holding an up-to-date `libibverbs.so.1` for the cargo profile
/// directory `profile_dir` (`<profile_dir>/weft-ibverbs/`), linked now if missing or
/// older than the staticlib.
pub fn ensure_beside(profile_dir: &Path) -> io::Result<PathBuf> {
    let lib = find_staticlib(profile_dir).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "no libweft_ibverbs.a under {} (build it: cargo build --release -p weft-ibverbs)",
                profile_dir.display()
            ),
        )
    })?;
    let dir = profile_dir.join("weft-ibverbs");
    let so = dir.join(SONAME);
    let mtime = |p: &Path| p.metadata().and_then(|m| m.modified()).ok();
    let fresh = matches!((mtime(&so), mtime(&lib)), (Some(s), Some(l)) if s >= l);
    if !fresh {
        link(&lib, &dir)?;
    }
    Ok(dir)
}

/// The cargo profile directory of a binary cargo built (`target/<profile>` for
/// `target/<profile>/weft` and `target/<profile>/deps/test-HASH`).
pub fn profile_dir_of(exe: &Path) -> Option<PathBuf> {
    let dir = exe.parent()?;
    if dir
        .file_name()
        .is_some_and(|n| n == "deps" || n == "examples")
    {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}
