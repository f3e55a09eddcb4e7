//! The bindings generated ahead for documentation-only builds (`bindings/`) against what this
//! build generated from the installed header, where that header is the implementation and
//! specification version they were generated from. Checked where `SHMEM_SYS_CHECK_AHEAD` is
//! set (CI sets it): another release of the same version may differ in ways no build needs.
//! `scripts/docs-bindings` makes them again.

#[test]
fn bindings_generated_ahead_match_the_installed_header() {
    if std::env::var_os("SHMEM_SYS_CHECK_AHEAD").is_none() {
        return;
    }
    let generated = include_str!(concat!(env!("OUT_DIR"), "/bindings.rs"));
    let ahead = match (shmem_sys::IMPLEMENTATION, shmem_sys::SPEC_VERSION) {
        ("oshmem", (1, 4)) => include_str!("../bindings/oshmem-1.4.rs"),
        ("sos", (1, 5)) => include_str!("../bindings/sos-1.5.rs"),
        (implementation, version) => panic!(
            "no bindings generated ahead for {implementation} {version:?}; SHMEM_SYS_CHECK_AHEAD is \
             for the builds CI checks"
        ),
    };
    assert!(
        generated == ahead,
        "crates/shmem-sys/bindings/ no longer matches the installed {} header: run scripts/docs-bindings",
        shmem_sys::IMPLEMENTATION
    );
}
