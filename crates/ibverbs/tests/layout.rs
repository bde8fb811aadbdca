//! Every size, offset and constant of weft's hand-written C structures
//! (`weft_ibverbs::abi::layout`) against the installed `<infiniband/verbs.h>`: a C
//! program prints each expression, compiled with the system's `cc`.

use std::process::Command;

#[test]
fn every_layout_fact_matches_the_installed_headers() {
    let header = std::path::Path::new("/usr/include/infiniband/verbs.h");
    if !header.exists() {
        weft_testkit::skip("libibverbs-dev is not installed (scripts/setup.sh installs it)");
        return;
    }
    let Some(()) = weft_testkit::require("cc", weft_testkit::tool("cc")) else {
        return;
    };
    let facts = weft_ibverbs::abi::layout();
    let mut c = String::from(
        "#include <stddef.h>\n#include <stdint.h>\n#include <stdio.h>\n\
         #include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for (expr, _) in &facts {
        c.push_str(&format!(
            "  printf(\"%llu\\n\", (unsigned long long)(size_t)({expr}));\n"
        ));
    }
    c.push_str("  return 0;\n}\n");
    let dir = std::env::temp_dir().join(format!("weft-ibverbs-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = dir.join("layout.c");
    let exe = dir.join("layout");
    std::fs::write(&src, c).unwrap();
    let cc = Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(
        cc.status.success(),
        "the layout program does not compile: {}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let out = Command::new(&exe).output().expect("run the layout program");
    assert!(out.status.success());
    let printed = String::from_utf8(out.stdout).unwrap();
    let c_values: Vec<u64> = printed.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(c_values.len(), facts.len());
    let wrong: Vec<String> = facts
        .iter()
        .zip(&c_values)
        .filter(|((_, weft), c)| *weft as u64 != **c)
        .map(|((expr, weft), c)| format!("{expr}: C says {c}, weft has {weft}"))
        .collect();
    std::fs::remove_dir_all(&dir).ok();
    assert!(wrong.is_empty(), "layout mismatches:\n{}", wrong.join("\n"));
    assert!(facts.len() > 200, "the table covers what weft relies on");
    eprintln!("{} layout facts match <infiniband/verbs.h>", facts.len());
}
