//! Turns what shmem-sys found (through its `links = "openshmem"` metadata) into cfgs:
//! `shmem_oshmem` or `shmem_sos` for the implementation, `shmem_spec_1_5` when the header
//! declares OpenSHMEM 1.5 or later (put-with-signal, teams, `wait_until_any`); and gives
//! the package's own binaries (`onesided-doctor`, its tests) an rpath to the OpenSHMEM
//! library where it lives outside the loader's default path (an `OPENSHMEM_DIR` install).

fn main() {
    println!("cargo::rerun-if-env-changed=DEP_OPENSHMEM_IMPLEMENTATION");
    println!("cargo::rerun-if-env-changed=DEP_OPENSHMEM_SPEC_VERSION");
    println!("cargo::rerun-if-env-changed=DEP_OPENSHMEM_LIB_DIR");
    if let Some(dirs) = std::env::var_os("DEP_OPENSHMEM_LIB_DIR") {
        for dir in std::env::split_paths(&dirs).filter(|d| !d.as_os_str().is_empty()) {
            println!("cargo::rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
    }
    println!("cargo::rustc-check-cfg=cfg(shmem_oshmem, shmem_sos, shmem_spec_1_5)");
    let implementation = std::env::var("DEP_OPENSHMEM_IMPLEMENTATION").unwrap_or_default();
    match implementation.as_str() {
        "oshmem" => println!("cargo::rustc-cfg=shmem_oshmem"),
        "sos" => println!("cargo::rustc-cfg=shmem_sos"),
        other => panic!("shmem-sys exported an unknown implementation {other:?}"),
    }
    let spec = std::env::var("DEP_OPENSHMEM_SPEC_VERSION").unwrap_or_default();
    let (major, minor) = spec
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
        .unwrap_or_else(|| panic!("shmem-sys exported an unreadable spec version {spec:?}"));
    if (major, minor) >= (1, 5) {
        println!("cargo::rustc-cfg=shmem_spec_1_5");
    }
}
