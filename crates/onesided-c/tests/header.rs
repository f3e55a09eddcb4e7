//! The committed header is the one the source gives: a stale `include/onesided.h` fails here.
//! `ONESIDED_BLESS=1 cargo test -p onesided-c --test header` rewrites it.

use std::path::Path;

#[test]
fn header_matches_the_source() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml reads");
    let mut generated = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("the header generates")
        .write(&mut generated);
    let committed_path = crate_dir.join("include/onesided.h");
    if std::env::var_os("ONESIDED_BLESS").is_some() {
        std::fs::write(&committed_path, &generated).expect("the header writes");
        return;
    }
    let committed = std::fs::read(&committed_path).unwrap_or_default();
    assert!(
        committed == generated,
        "include/onesided.h is stale: regenerate it with \
         `ONESIDED_BLESS=1 cargo test -p onesided-c --test header` and commit it"
    );
}
