//! The layer's dispatch positions are the ICD ABI's: a C program built
//! against the Khronos `CL/cl_icd.h` prints `offsetof` of every entry the
//! layer names, and each must match.

use hetsched_opencl_layer::dispatch::NAMED;
use std::process::Command;

#[test]
fn every_named_entry_sits_where_the_khronos_header_puts_it() {
    let header = std::path::Path::new("/usr/include/CL/cl_icd.h");
    if !header.exists() {
        let required = std::env::var("HETSCHED_TEST_REQUIRE").unwrap_or_default();
        assert!(
            !required.contains("opencl"),
            "{} is missing (apt-get install opencl-headers)",
            header.display()
        );
        eprintln!(
            "skipped: {} is missing (apt-get install opencl-headers)",
            header.display()
        );
        return;
    }
    let dir = std::env::temp_dir().join(format!("hetsched-dispatch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#define CL_TARGET_OPENCL_VERSION 300\n#include <stdio.h>\n#include <stddef.h>\n#include <CL/cl_icd.h>\nint main(void) {\n",
    );
    for (_, name) in NAMED {
        c.push_str(&format!(
            "printf(\"{name} %zu\\n\", offsetof(cl_icd_dispatch, {name}) / sizeof(void *));\n"
        ));
    }
    c.push_str("return 0; }\n");
    let src = dir.join("offsets.c");
    let exe = dir.join("offsets");
    std::fs::write(&src, c).unwrap();
    let built = Command::new("cc")
        .arg(&src)
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("cc runs");
    assert!(
        built.status.success(),
        "{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    for ((index, name), line) in NAMED.iter().zip(text.lines()) {
        assert_eq!(
            line,
            format!("{name} {index}"),
            "dispatch position of {name}"
        );
    }
    assert_eq!(text.lines().count(), NAMED.len());
    let _ = std::fs::remove_dir_all(&dir);
}
